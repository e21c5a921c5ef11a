"""Phased workloads: real trace requests strung into phases whose rate and mix follow a profile.

A deployment serves one traffic that changes through the day; this builds it from the committed
traces so every system can be run on the same changing arrivals (issue #50).

A workload definition (:class:`PhasedSpec`, the committed ones in ``phased_workloads.json``) is a
sequence of phases. Each phase lasts ``duration_s`` seconds and has

* a *load* that moves linearly from ``load[0]`` at its start to ``load[1]`` at its end, in
  reference units: load 1 of trace t is ``ref_rps[t]`` requests per second (the definition's
  reference rate of that trace, about what one good system sustains on it alone on 2 GPUs), so
  a load means the same share of a cluster whatever trace carries it;
* a *mix*: each trace's share of the phase's load.

At load scale ``s`` (the capacity search's variable, a multiplier of the whole profile), trace t
arrives as its own Poisson stream of rate ``s * load(tau) * share_t * ref_rps[t]`` (req/s, tau
the time in the profile), and the workload is their superposition (itself Poisson, of the sum's
rate). Each stream is drawn by inverting its cumulative rate (piecewise quadratic, solved
exactly) at the points of a unit-rate Poisson process from ``numpy.random.default_rng([seed,
2, k])`` (k the trace's index in ``TRACE_ORDER``), so a higher scale gives the same points
closer together. A stream's requests are the trace's own (prompt and output lengths, and
Mooncake's prefix-block ``hash_ids``), in the order of a permutation of the trace drawn from
``default_rng([seed, 3, k])`` (a uniform sample without replacement, drawn with replacement
from the trace again once it is used up), so the sample is fixed by the seed alone and a higher
scale takes a longer prefix of the same permutation.

Block hashes of different traces must never match (one trace's prompt is no prefix of
another's): each trace's ids are offset by ``(k + 1) << HASH_SHIFT``. Azure requests have no
hashes (an empty list, which the prefix cache skips). Times are seconds from the profile's start.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, replace
from functools import cache

import numpy as np

from .arrivals import Workload
from .traces import Trace, load_trace

__all__ = ["HASH_SHIFT", "TRACE_ORDER", "Phase", "Phased", "PhasedSpec", "build_phased",
           "load_specs", "spec"]

TRACE_ORDER = ("azure-code", "azure-conv", "mooncake")
HASH_SHIFT = 40  # Mooncake's block ids are < 2**20; a trace's ids live in [(k+1) << 40, ...)
SPECS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "phased_workloads.json")


@dataclass(frozen=True)
class Phase:
    """One phase: its length (s), its load at start and end (reference units, linear between)
    and each trace's share of that load (shares sum to 1)."""

    duration_s: float
    load: tuple[float, float]
    mix: tuple[tuple[str, float], ...]
    label: str = ""

    def share(self, trace: str) -> float:
        return dict(self.mix).get(trace, 0.0)

    def dominant(self) -> str:
        """The trace carrying the most of this phase's load (first in ``mix`` on a tie)."""
        return max(self.mix, key=lambda kv: kv[1])[0]


@dataclass(frozen=True)
class PhasedSpec:
    """A workload definition: phases in order and the reference rates (req/s) of the traces."""

    name: str
    phases: tuple[Phase, ...]
    ref_rps: tuple[tuple[str, float], ...]
    description: str = ""

    def __post_init__(self) -> None:
        ref = dict(self.ref_rps)
        if not self.phases:
            raise ValueError(f"{self.name}: no phases")
        for p in self.phases:
            if not p.duration_s > 0 or min(p.load) < 0:
                raise ValueError(f"{self.name}: a phase needs duration > 0 and loads >= 0")
            if abs(sum(s for _, s in p.mix) - 1.0) > 1e-9 or min(s for _, s in p.mix) < 0:
                raise ValueError(f"{self.name}: a phase's shares must be >= 0 and sum to 1")
            for t, _ in p.mix:
                if t not in TRACE_ORDER or t not in ref:
                    raise ValueError(f"{self.name}: trace {t!r} has no reference rate or is "
                                     f"not one of {TRACE_ORDER}")

    @property
    def duration_s(self) -> float:
        return float(sum(p.duration_s for p in self.phases))

    def starts(self) -> np.ndarray:
        """Each phase's start time (s), and the profile's end as the last entry."""
        return np.concatenate(([0.0], np.cumsum([p.duration_s for p in self.phases])))

    def traces(self) -> tuple[str, ...]:
        used = {t for p in self.phases for t, s in p.mix if s > 0}
        return tuple(t for t in TRACE_ORDER if t in used)

    def repeated(self, times: int) -> PhasedSpec:
        """The profile played ``times`` times in a row (the run-length check)."""
        return replace(self, name=f"{self.name}x{times}", phases=self.phases * times)

    def rate_rps(self, trace: str, t: float, scale: float = 1.0) -> float:
        """Trace ``trace``'s arrival rate (req/s) at profile time ``t`` (s)."""
        starts = self.starts()
        i = int(np.searchsorted(starts, t, side="right")) - 1
        if i < 0 or i >= len(self.phases):
            return 0.0
        p = self.phases[i]
        x = (t - starts[i]) / p.duration_s
        load = p.load[0] + (p.load[1] - p.load[0]) * x
        return scale * load * p.share(trace) * dict(self.ref_rps)[trace]

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "description": self.description,
                "ref_rps": dict(self.ref_rps),
                "phases": [{"label": p.label, "duration_s": p.duration_s, "load": list(p.load),
                            "mix": dict(p.mix)} for p in self.phases]}


@dataclass(frozen=True, eq=False)
class Phased:
    """A built phased workload: what ``Simulation`` runs, and per request its phase and trace."""

    workload: Workload
    phase: np.ndarray  # int64, the phase index of each request (arrival order)
    trace: np.ndarray  # int64, index into TRACE_ORDER
    spec: PhasedSpec
    scale: float
    seed: int

    def part(self, index: int) -> Workload:
        """Phase ``index``'s requests alone, at their own times (the per-phase oracle runs each
        phase on its own)."""
        sel = np.flatnonzero(self.phase == index)
        w = self.workload
        return Workload(w.arrival_s[sel], w.input_len[sel], w.output_len[sel],
                        f"{w.description}, phase {index}",
                        None if w.hash_ids is None else [w.hash_ids[j] for j in sel])


def _arrivals(spec: PhasedSpec, trace: str, scale: float, rng: np.random.Generator
              ) -> np.ndarray:
    """Poisson arrival times (s) of one trace's stream: unit-rate points mapped through the
    inverse of the stream's cumulative rate (linear rate in a phase: a quadratic per phase)."""
    ref = dict(spec.ref_rps)[trace]
    a0 = np.array([scale * p.load[0] * p.share(trace) * ref for p in spec.phases])
    a1 = np.array([scale * p.load[1] * p.share(trace) * ref for p in spec.phases])
    dur = np.array([p.duration_s for p in spec.phases])
    mass = (a0 + a1) / 2 * dur  # expected arrivals per phase
    cum = np.concatenate(([0.0], np.cumsum(mass)))
    total = float(cum[-1])
    if total <= 0:
        return np.empty(0)
    # enough unit-rate gaps to pass the total with overwhelming probability, drawn in one go
    n = int(total + 10 * math.sqrt(total) + 20)
    pts = np.cumsum(rng.exponential(1.0, size=n))
    while pts[-1] <= total:  # practically never; kept exact rather than probable
        pts = np.concatenate((pts, pts[-1] + np.cumsum(rng.exponential(1.0, size=n))))
    pts = pts[pts <= total]
    i = np.clip(np.searchsorted(cum, pts, side="right") - 1, 0, len(spec.phases) - 1)
    r = pts - cum[i]  # arrivals' mass into their phase
    b = a0[i]
    slope = (a1[i] - a0[i]) / dur[i]  # rate = b + slope * x over x in [0, duration]
    flat = np.abs(slope) < 1e-12
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(flat, r / np.where(b > 0, b, 1.0),
                     (-b + np.sqrt(np.maximum(b * b + 2 * slope * r, 0.0)))
                     / np.where(flat, 1.0, slope))
    starts = spec.starts()
    return starts[i] + np.clip(x, 0.0, dur[i])


def _sample(trace: Trace, n: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``n`` requests: a prefix of one permutation, then draws with replacement."""
    perm = rng.permutation(len(trace))
    if n <= len(perm):
        return perm[:n]
    return np.concatenate((perm, rng.integers(0, len(trace), size=n - len(perm))))


def build_phased(spec: PhasedSpec, scale: float, seed: int = 0,
                 traces: dict[str, Trace] | None = None) -> Phased:
    """The workload of ``spec`` at load scale ``scale`` (the module docstring's rule);
    ``traces`` by name (loaded from ``benchmark/traces`` where not given)."""
    if not scale > 0:
        raise ValueError("scale must be > 0")
    arr, inp, out, hashes, tix = [], [], [], [], []
    any_hashes = False
    for name in spec.traces():
        k = TRACE_ORDER.index(name)
        tr = traces[name] if traces and name in traces else _load(name)
        t = _arrivals(spec, name, scale, np.random.default_rng([seed, 2, k]))
        idx = _sample(tr, len(t), np.random.default_rng([seed, 3, k]))
        arr.append(t)
        inp.append(tr.input_len[idx])
        out.append(tr.output_len[idx])
        tix.append(np.full(len(t), k, np.int64))
        if tr.hash_ids is not None:
            any_hashes = True
            off = (k + 1) << HASH_SHIFT
            hashes += [[h + off for h in tr.hash_ids[j]] for j in idx]
        else:
            hashes += [[] for _ in idx]
    times = np.concatenate(arr) if arr else np.empty(0)
    if times.size == 0:
        raise ValueError(f"{spec.name} at scale {scale:g}: no arrivals")
    order = np.argsort(times, kind="stable")
    phase = np.clip(np.searchsorted(spec.starts(), times[order], side="right") - 1, 0,
                    len(spec.phases) - 1)
    desc = (f"{spec.name}: phased ({', '.join(spec.traces())}), load scale {scale:g}, "
            f"seed {seed}")
    w = Workload(times[order], np.concatenate(inp)[order].astype(np.int64),
                 np.concatenate(out)[order].astype(np.int64), desc,
                 [hashes[j] for j in order] if any_hashes else None)
    return Phased(w, phase.astype(np.int64), np.concatenate(tix)[order], spec, scale, seed)


@cache
def _load(name: str) -> Trace:
    return load_trace(name)


def _parse(name: str, d: dict, ref: dict[str, float]) -> PhasedSpec:
    phases = tuple(Phase(float(p["duration_s"]), (float(p["load"][0]), float(p["load"][-1])),
                         tuple((t, float(s)) for t, s in p["mix"].items()), p.get("label", ""))
                   for p in d["phases"])
    return PhasedSpec(name, phases, tuple(sorted(ref.items())), d.get("description", ""))


@cache
def load_specs(path: str = SPECS_FILE) -> dict[str, PhasedSpec]:
    """The workload definitions of a JSON file (default: the committed
    ``phased_workloads.json``): ``ref_rps`` and ``workloads`` by name."""
    with open(path) as f:
        d = json.load(f)
    ref = {k: float(v) for k, v in d["ref_rps"].items()}
    return {name: _parse(name, w, ref) for name, w in d["workloads"].items()}


def spec(name: str) -> PhasedSpec:
    specs = load_specs()
    if name not in specs:
        raise ValueError(f"unknown phased workload {name!r}; choices: {', '.join(specs)}")
    return specs[name]
