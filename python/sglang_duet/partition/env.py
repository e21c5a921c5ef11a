"""Environment knobs of the partition backends, read in one place."""

from __future__ import annotations

import os

LIBSMCTRL_PATH = "SGLANG_DUET_LIBSMCTRL"  # path of the user's libsmctrl.so
# 1: accept a driver libsmctrl does not list, but only up to the newest release whose offset is
# known; above it the offset is unknown and only MASK_OFF (the offset itself) is accepted.
LIBSMCTRL_ANY_DRIVER = "SGLANG_DUET_LIBSMCTRL_ANY_DRIVER"
LIBSMCTRL_MASK_OFF = "MASK_OFF"  # libsmctrl's own stream-offset override: any driver


def libsmctrl_path() -> str | None:
    """Path from SGLANG_DUET_LIBSMCTRL, or None for `libsmctrl.so` on the search path."""
    return os.environ.get(LIBSMCTRL_PATH) or None


def libsmctrl_any_driver() -> bool:
    """SGLANG_DUET_LIBSMCTRL_ANY_DRIVER is set (see above for its limit)."""
    return os.environ.get(LIBSMCTRL_ANY_DRIVER, "").strip().lower() in ("1", "true", "yes")


def libsmctrl_mask_off() -> str | None:
    """The explicit stream-mask offset given to libsmctrl through MASK_OFF, if any."""
    return os.environ.get(LIBSMCTRL_MASK_OFF) or None
