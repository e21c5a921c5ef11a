"""PartitionMenu: every (decode, prefill) split the scheduler may use, built once at start-up.

Each entry owns its pair of streams, so switching split between iterations is a dictionary
lookup, never a driver call. Sizes are SMs; decode size S_d leaves the prefill stream the rest.
"""

from __future__ import annotations

import logging
import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .base import PartitionBackend, PartitionError, RawPair
from .sizes import DEFAULT_MIN_SMS, Granularity, decode_sizes

if TYPE_CHECKING:
    from sglang_duet.policy.sm_menu import SmMenu

logger = logging.getLogger(__name__)

# (backend name, device SMs, granularity) -> the decode sizes to create (`partition.plan.menu_for`)
Select = Callable[[str, int, Granularity], Sequence[int]]


@dataclass
class MenuEntry:
    """One split: requested and granted SM counts and, on a GPU, its raw streams."""

    decode_sms: int
    prefill_sms: int
    raw: RawPair | None = None
    _torch: tuple[Any, Any] | None = field(default=None, repr=False)


class PartitionMenu:
    """The partitions of one device for one backend.

    Build it with `PartitionMenu.build` (creates streams on the GPU) or `PartitionMenu.plan`
    (sizes only: CPU machines, hypothetical hardware). `close()` releases every stream.
    """

    def __init__(
        self,
        backend: str,
        total_sms: int,
        granularity: Granularity | None,
        entries: Sequence[MenuEntry],
        device: int | None = None,
    ) -> None:
        self.backend = backend
        self.total_sms = total_sms
        self.granularity = granularity
        self.device = device
        self._entries = {e.decode_sms: e for e in entries}

    # ---- construction -----------------------------------------------------------------------
    @classmethod
    def plan(
        cls,
        backend: str,
        total_sms: int,
        granularity: Granularity | None,
        min_decode: int = DEFAULT_MIN_SMS,
        min_prefill: int = DEFAULT_MIN_SMS,
        sizes: Sequence[int] | None = None,
    ) -> PartitionMenu:
        """The menu `build` would create, without touching a GPU (no streams)."""
        if granularity is None:  # backend none
            return cls(backend, total_sms, None, [])
        chosen = (
            tuple(sizes)
            if sizes is not None
            else decode_sizes(total_sms, granularity, min_decode, min_prefill)
        )
        return cls(backend, total_sms, granularity, [MenuEntry(s, total_sms - s) for s in chosen])

    @classmethod
    def build(
        cls,
        backend: PartitionBackend,
        device: int = 0,
        min_decode: int = DEFAULT_MIN_SMS,
        min_prefill: int = DEFAULT_MIN_SMS,
        sizes: Sequence[int] | None = None,
        select: Select | None = None,
    ) -> PartitionMenu:
        """Creates the stream pair of every decode size on `device`.

        `select(backend name, device SMs, granularity)` -> the sizes to create, when the caller
        applies its own menu rule (each split costs two contexts and streams, so only those
        are ever made); default: every size `decode_sizes` plans.
        A size the backend refuses (PartitionError), or grants with a decode group smaller
        than asked or a prefill side below `min_prefill`, is dropped and logged: the other
        splits stay usable. Raises PartitionError (after releasing what was made) only when
        every size is refused.
        """
        total = backend.num_sms(device)
        if not backend.partitions:
            return cls(backend.name, total, None, [], device)
        gran = backend.granularity(device)
        if select is not None:
            planned = tuple(select(backend.name, total, gran))
        else:
            planned = cls.plan(backend.name, total, gran, min_decode, min_prefill,
                               sizes).decode_sizes
        entries: list[MenuEntry] = []
        refused: list[str] = []
        try:
            for want in planned:
                why = _create(backend, device, want, min_prefill, entries)
                if why:
                    refused.append(why)
                    logger.warning("%s: the %d-SM decode split is dropped from the menu (%s)",
                                   backend.name, want, why)
            if planned and not entries:
                raise PartitionError(f"{backend.name} refused every decode split: "
                                     + "; ".join(refused))
        except BaseException:
            for e in entries:
                e.raw.close()  # type: ignore[union-attr]
            raise
        unique: dict[int, MenuEntry] = {}
        for e in entries:
            if e.decode_sms in unique:
                e.raw.close()  # type: ignore[union-attr]
            else:
                unique[e.decode_sms] = e
        menu = cls(backend.name, total, gran, list(unique.values()), device)
        logger.info("partition menu: %s", menu.describe_line())
        return menu

    # ---- queries ------------------------------------------------------------------------------
    @property
    def decode_sizes(self) -> tuple[int, ...]:
        """Decode sizes (SMs) the optimizer may choose, ascending."""
        return tuple(sorted(self._entries))

    def prefill_sms(self, sms_decode: int) -> int:
        """SMs of the prefill side of the split whose decode side has `sms_decode` SMs."""
        return self._entry(sms_decode).prefill_sms

    @property
    def sm_menu(self) -> SmMenu:
        """The sizes as the policy's `SmMenu` (what `PartitionOptimizer` enumerates)."""
        from sglang_duet.policy.sm_menu import SmMenu

        if self.total_sms < 2:
            raise PartitionError(
                f"the {self.backend} menu knows no device (total_sms={self.total_sms}); "
                "plan one for a GPU shape with PartitionMenu.plan"
            )
        sizes = self.decode_sizes
        step = math.gcd(*sizes) if sizes else 1  # granted sizes can differ from the plan
        return SmMenu(total_sms=self.total_sms, decode_sizes=sizes, granularity=step)

    def streams(self, sms_decode: int) -> tuple[Any, Any]:
        """(decode, prefill) `torch.cuda.ExternalStream`s of the split with `sms_decode` SMs.

        Kernels enqueued on the first run only on that split's decode SMs, on the second only
        on the others. The streams are created lazily once per entry and then reused.
        """
        entry = self._entry(sms_decode)
        if entry.raw is None:
            raise PartitionError("this menu was planned, not built: it has no streams")
        if entry._torch is None:
            import torch

            dev = torch.device("cuda", self.device or 0)
            entry._torch = (
                torch.cuda.ExternalStream(entry.raw.decode_stream, device=dev),
                torch.cuda.ExternalStream(entry.raw.prefill_stream, device=dev),
            )
        return entry._torch

    def raw_streams(self, sms_decode: int) -> tuple[int, int]:
        """(decode, prefill) raw CUstream handles of a built entry."""
        raw = self._entry(sms_decode).raw
        if raw is None:
            raise PartitionError("this menu was planned, not built: it has no streams")
        return raw.decode_stream, raw.prefill_stream

    def _entry(self, sms_decode: int) -> MenuEntry:
        try:
            return self._entries[sms_decode]
        except KeyError:
            raise KeyError(
                f"no {sms_decode}-SM decode split in the {self.backend} menu "
                f"(sizes: {self.decode_sizes or 'none'})"
            ) from None

    def restrict(self, sizes: Sequence[int]) -> PartitionMenu:
        """A menu of only the splits whose decode sizes are in `sizes`; the other entries'
        streams are released (this menu keeps none of them afterwards)."""
        missing = sorted(set(sizes) - set(self._entries))
        if missing:
            raise KeyError(f"no split with {missing} decode SMs in the {self.backend} menu")
        kept = [self._entries[s] for s in sorted(set(sizes))]
        for s, e in self._entries.items():
            if s not in sizes and e.raw is not None:
                e.raw.close()
                e.raw, e._torch = None, None
        self._entries = {}
        return PartitionMenu(self.backend, self.total_sms, self.granularity, kept, self.device)

    def close(self) -> None:
        """Releases every stream; the menu keeps its sizes but has no streams afterwards."""
        for e in self._entries.values():
            if e.raw is not None:
                e.raw.close()
                e.raw, e._torch = None, None

    def __len__(self) -> int:
        return len(self._entries)

    # ---- display ------------------------------------------------------------------------------
    def describe_line(self) -> str:
        g = self.granularity
        gran = f"min {g.min_sms} / step {g.step_sms} SMs ({g.source})" if g else "no split"
        d = self.decode_sizes
        sizes = f"{len(d)} decode sizes {d[0]}..{d[-1]}" if d else "no decode sizes"
        return f"{self.backend}: {self.total_sms} SMs, granularity {gran}, {sizes}"

    def describe(self) -> str:
        """The summary line plus every split as `decode/prefill` SMs (and whether built)."""
        pairs = " ".join(
            f"{s}/{self._entries[s].prefill_sms}{'' if self._entries[s].raw else '*'}"
            for s in self.decode_sizes
        )
        if not pairs:
            return self.describe_line()
        body = textwrap.fill(pairs, width=96, initial_indent="    ", subsequent_indent="    ")
        return f"{self.describe_line()}\n  decode/prefill SMs (* = planned, no streams):\n{body}"


def _create(backend: PartitionBackend, device: int, want: int, min_prefill: int,
            entries: list[MenuEntry]) -> str:
    """Creates the `want`-SM decode split into `entries`; "" when done, else why it was not
    (its streams, if any, released)."""
    try:
        raw = backend.create_pair(device, want, min_prefill)
    except PartitionError as exc:
        return str(exc)
    if raw.decode_sms < want or raw.prefill_sms < min_prefill:
        raw.close()
        return (f"{backend.name} granted decode={raw.decode_sms} prefill={raw.prefill_sms} SMs "
                f"for a {want}-SM decode split (prefill >= {min_prefill})")
    entries.append(MenuEntry(raw.decode_sms, raw.prefill_sms, raw))
    if raw.decode_sms != want:
        logger.warning("%s rounded decode %d -> %d SMs", backend.name, want, raw.decode_sms)
    return ""


def build_partition_menu(
    name: str = "auto",
    device: int = 0,
    min_decode: int = DEFAULT_MIN_SMS,
    min_prefill: int = DEFAULT_MIN_SMS,
    sizes: Sequence[int] | None = None,
    select: Select | None = None,
) -> tuple[PartitionMenu, str]:
    """Start-up helper: select a backend, build its menu, fall back to `none` on failure.

    Returns the menu and the reason for the backend in use (logged as well). `select` as in
    `PartitionMenu.build`.
    """
    from .none import NoneBackend
    from .registry import select_backend

    backend, reason = select_backend(name, device)
    try:
        menu = PartitionMenu.build(backend, device, min_decode, min_prefill, sizes, select)
        return menu, reason
    except (PartitionError, ValueError, OSError, RuntimeError) as exc:
        reason = f"{backend.name} failed at start-up ({exc}); falling back to none"
        logger.warning("partition backend %s", reason)
        return PartitionMenu.build(NoneBackend(), device), reason
