"""TPC-mask arithmetic for the libsmctrl backend (pure Python, no GPU).

Units: a mask addresses TPCs (texture processing clusters), not SMs; on Volta..Hopper one TPC
holds 2 SMs. Polarity follows libsmctrl: a SET bit DISABLES that TPC, a clear bit allows it.
Masks are 128 bits wide (`libsmctrl_set_stream_mask_ext`); H100 SXM has 66 TPCs, more than a
64-bit mask can name. On Hopper libsmctrl's bit i is the *physical* TPC i (floor-swept TPCs
included), so a range of n bits may hold fewer than n working TPCs; `test_libsmctrl_gpu.py`
measures this.
"""

from __future__ import annotations

MASK_BITS = 128
_U64 = (1 << 64) - 1
_ALL = (1 << MASK_BITS) - 1


def tpc_bits(first: int, stop: int) -> int:
    """Integer with bits `first .. stop-1` set (TPC indices, half-open range)."""
    if not 0 <= first <= stop <= MASK_BITS:
        raise ValueError(f"TPC range [{first}, {stop}) outside [0, {MASK_BITS})")
    return ((1 << stop) - 1) ^ ((1 << first) - 1)


def disable_mask_allowing(first: int, stop: int) -> int:
    """128-bit libsmctrl mask that allows only TPCs `first .. stop-1`.

    Every other bit up to 127 is set (disabled), so TPCs beyond the visible count, such as
    Hopper's physical ids above 65, are excluded too.
    """
    return _ALL & ~tpc_bits(first, stop)


def allowed_tpcs(mask: int) -> list[int]:
    """TPC indices a 128-bit disable-mask leaves enabled (its clear bits)."""
    if not 0 <= mask <= _ALL:
        raise ValueError("mask must be a non-negative 128-bit integer")
    return [i for i in range(MASK_BITS) if not (mask >> i) & 1]


def split_u128(mask: int) -> tuple[int, int]:
    """(lo, hi) 64-bit halves of a 128-bit mask: mask == hi << 64 | lo."""
    if not 0 <= mask <= _ALL:
        raise ValueError("mask must be a non-negative 128-bit integer")
    return mask & _U64, mask >> 64


def join_u128(lo: int, hi: int) -> int:
    """Inverse of `split_u128`."""
    if not (0 <= lo <= _U64 and 0 <= hi <= _U64):
        raise ValueError("halves must be unsigned 64-bit integers")
    return hi << 64 | lo


def sms_to_tpcs(sms: int, sms_per_tpc: int = 2) -> int:
    """Number of TPCs holding exactly `sms` SMs; raises if `sms` is not a whole number of TPCs."""
    if sms < 0 or sms % sms_per_tpc:
        raise ValueError(f"{sms} SMs is not a whole number of {sms_per_tpc}-SM TPCs")
    return sms // sms_per_tpc


def pair_masks(decode_tpcs: int) -> tuple[int, int]:
    """(decode, prefill) disable-masks for a split at TPC `decode_tpcs`.

    Decode is allowed TPCs [0, decode_tpcs), prefill every TPC from `decode_tpcs` on; the two
    allowed sets are disjoint and together cover all 128 bit positions.
    """
    return disable_mask_allowing(0, decode_tpcs), disable_mask_allowing(decode_tpcs, MASK_BITS)
