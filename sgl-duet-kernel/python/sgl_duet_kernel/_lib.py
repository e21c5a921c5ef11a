"""Loads libsgl_duet_kernel.so with ctypes and declares its C signatures.

Loading the library never touches the CUDA driver; the first call that needs the driver opens
it (dlopen of libcuda.so.1), so importing works on machines without a GPU or driver.
"""

from __future__ import annotations

import ctypes
import os
import threading

ABI_VERSION = 1
_LIB_NAME = "libsgl_duet_kernel.so"

_c_int_p = ctypes.POINTER(ctypes.c_int)


class GreenPairStruct(ctypes.Structure):
    """Mirror of `sgld_green_pair` in include/sgl_duet_kernel.h."""

    _fields_ = [
        ("decode_stream", ctypes.c_void_p),
        ("prefill_stream", ctypes.c_void_p),
        ("decode_sms", ctypes.c_int),
        ("prefill_sms", ctypes.c_int),
        ("priv", ctypes.c_void_p),
    ]


_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "sgld_abi_version": (ctypes.c_int, []),
    "sgld_last_error": (ctypes.c_char_p, []),
    "sgld_driver_open": (ctypes.c_int, []),
    "sgld_driver_version": (ctypes.c_int, [_c_int_p]),
    "sgld_device_count": (ctypes.c_int, [_c_int_p]),
    "sgld_device_info": (ctypes.c_int, [ctypes.c_int, _c_int_p, _c_int_p, _c_int_p]),
    "sgld_stream_create": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]),
    "sgld_stream_destroy": (ctypes.c_int, [ctypes.c_int, ctypes.c_void_p]),
    "sgld_stream_synchronize": (ctypes.c_int, [ctypes.c_void_p]),
    "sgld_green_granularity": (
        ctypes.c_int,
        [ctypes.c_int, ctypes.c_uint, _c_int_p, _c_int_p, _c_int_p, _c_int_p],
    ),
    "sgld_green_pair_create": (
        ctypes.c_int,
        [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(GreenPairStruct)],
    ),
    "sgld_green_pair_destroy": (ctypes.c_int, [ctypes.POINTER(GreenPairStruct)]),
    "sgld_smctrl_open": (ctypes.c_int, [ctypes.c_char_p]),
    "sgld_smctrl_has_ext": (ctypes.c_int, []),
    "sgld_smctrl_set_stream_mask": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64],
    ),
    "sgld_smid_available": (ctypes.c_int, []),
    "sgld_smid_record": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint],
    ),
    "sgld_smid_record_graph": (
        ctypes.c_int,
        [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_uint64,
            ctypes.c_int,
            ctypes.c_uint64,
            ctypes.c_uint,
        ],
    ),
}

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def library_path() -> str:
    """Path of the shared library installed next to this file."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIB_NAME)


def lib() -> ctypes.CDLL:
    """The loaded library with typed functions (loaded once, thread-safe)."""
    global _lib
    with _lock:
        if _lib is None:
            path = library_path()
            if not os.path.exists(path):
                raise ImportError(
                    f"{path} is missing: sgl_duet_kernel is imported from a source tree that "
                    "was not built; install it with `pip install --no-build-isolation "
                    "./sgl-duet-kernel`"
                )
            handle = ctypes.CDLL(path)
            for name, (restype, argtypes) in _SIGNATURES.items():
                fn = getattr(handle, name)
                fn.restype = restype
                fn.argtypes = argtypes
            got = handle.sgld_abi_version()
            if got != ABI_VERSION:
                raise ImportError(f"{path} has C ABI {got}, this wrapper expects {ABI_VERSION}")
            _lib = handle
        return _lib
