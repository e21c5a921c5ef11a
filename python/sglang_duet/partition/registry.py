"""Backends by name and the `auto` choice (green-ctx, else libsmctrl, else none)."""

from __future__ import annotations

import logging

from .base import PartitionBackend
from .green_ctx import GreenCtxBackend
from .libsmctrl import LibsmctrlBackend
from .none import NoneBackend

logger = logging.getLogger(__name__)

BACKENDS: dict[str, type[PartitionBackend]] = {
    "green-ctx": GreenCtxBackend,
    "libsmctrl": LibsmctrlBackend,
    "none": NoneBackend,
}
AUTO_ORDER: tuple[str, ...] = ("green-ctx", "libsmctrl", "none")
# Choices of --duet-partition-backend.
BACKEND_NAMES: tuple[str, ...] = ("auto", "green-ctx", "libsmctrl", "none")


def get_backend(name: str) -> PartitionBackend:
    """A fresh backend instance by registry name (not `auto`)."""
    try:
        return BACKENDS[name]()
    except KeyError:
        msg = f"unknown partition backend {name!r}; choose from {BACKEND_NAMES}"
        raise ValueError(msg) from None


def probe_all(device: int = 0) -> dict[str, tuple[bool, str]]:
    """available() of every registered backend, in `auto` order."""
    return {name: get_backend(name).available(device) for name in AUTO_ORDER}


def select_backend(
    name: str = "auto", device: int = 0, strict: bool = False
) -> tuple[PartitionBackend, str]:
    """Resolves `name` to a usable backend and says why.

    `auto` takes the first available of green-ctx, libsmctrl, none. A named backend that is not
    available falls back to `none` with a warning, or raises RuntimeError if `strict`.
    """
    if name not in BACKEND_NAMES:
        raise ValueError(f"unknown partition backend {name!r}; choose from {BACKEND_NAMES}")
    candidates = AUTO_ORDER if name == "auto" else (name,)
    skipped = []
    for cand in candidates:
        backend = get_backend(cand)
        ok, why = backend.available(device)
        if ok:
            reason = f"{name} -> {cand}: {why}"
            if skipped:
                reason += "; skipped " + "; ".join(skipped)
            logger.info("partition backend %s", reason)
            return backend, reason
        skipped.append(f"{cand} ({why})")
    if strict:
        raise RuntimeError(f"partition backend {name} is not available: {skipped[0]}")
    reason = f"{name} -> none: {name} unavailable: {'; '.join(skipped)}"
    logger.warning("partition backend %s", reason)
    return NoneBackend(), reason
