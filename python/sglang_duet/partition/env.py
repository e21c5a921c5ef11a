"""Environment knobs of the partition backends, read in one place."""

from __future__ import annotations

import os

LIBSMCTRL_PATH = "SGLANG_DUET_LIBSMCTRL"  # path of the user's libsmctrl.so
LIBSMCTRL_ANY_DRIVER = "SGLANG_DUET_LIBSMCTRL_ANY_DRIVER"  # 1: skip the driver-version check
LIBSMCTRL_MASK_OFF = "MASK_OFF"  # libsmctrl's own stream-offset override; implies any driver


def libsmctrl_path() -> str | None:
    """Path from SGLANG_DUET_LIBSMCTRL, or None for `libsmctrl.so` on the search path."""
    return os.environ.get(LIBSMCTRL_PATH) or None


def libsmctrl_any_driver() -> bool:
    flag = os.environ.get(LIBSMCTRL_ANY_DRIVER, "").strip().lower() in ("1", "true", "yes")
    return flag or bool(os.environ.get(LIBSMCTRL_MASK_OFF))
