"""Exceptions raised for the C library's negative status codes."""

from __future__ import annotations


class KernelError(RuntimeError):
    """A call into libsgl_duet_kernel failed; `code` is the SGLD_E_* value."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class DriverUnavailable(KernelError):
    """No usable CUDA driver (missing, cuInit failed, or too old for the call)."""


class GrantError(KernelError):
    """The driver granted fewer SMs than requested."""


class NotBuilt(KernelError):
    """The feature was compiled out (e.g. the smid kernel when nvcc was missing)."""


class LibsmctrlUnavailable(KernelError):
    """libsmctrl could not be loaded or lacks the stream-mask entry points."""


E_NO_DRIVER = -1
E_DRIVER_TOO_OLD = -2
E_CUDA = -3
E_INVALID = -4
E_GRANTED = -5
E_NOT_BUILT = -6
E_NO_LIBSMCTRL = -7

_BY_CODE: dict[int, type[KernelError]] = {
    E_NO_DRIVER: DriverUnavailable,
    E_DRIVER_TOO_OLD: DriverUnavailable,
    E_GRANTED: GrantError,
    E_NOT_BUILT: NotBuilt,
    E_NO_LIBSMCTRL: LibsmctrlUnavailable,
}


def raise_for(code: int, message: str) -> None:
    """Raises the exception matching a non-zero status `code`."""
    if code == 0:
        return
    exc = _BY_CODE.get(code, KernelError)
    if code == E_INVALID:
        raise ValueError(message)
    raise exc(code, message)
