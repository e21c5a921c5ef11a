"""Phased workloads (sim/phases.py): reproducible, each phase keeps its trace's requests, the rate
follows the profile, block hashes of different traces never collide."""

from __future__ import annotations

import numpy as np
import pytest

from sglang_duet.sim import Trace
from sglang_duet.sim.phases import (
    HASH_SHIFT,
    TRACE_ORDER,
    Phase,
    PhasedSpec,
    build_phased,
    load_specs,
    spec,
)

REF = (("azure-code", 10.0), ("azure-conv", 20.0), ("mooncake", 2.0))


def _trace(name: str, base: int, n: int = 400, hashes: bool = False) -> Trace:
    """A synthetic trace whose prompt lengths lie in [base, base + n) (so a request names its
    trace) and whose output length is its prompt's minus base plus one."""
    inp = np.arange(base, base + n, dtype=np.int64)
    h = tuple([int(i % 7), int(i % 11) + 100] for i in range(n)) if hashes else None
    return Trace(name, np.arange(n, dtype=float), inp, inp - base + 1, h)


TRACES = {"azure-code": _trace("azure-code", 1000), "azure-conv": _trace("azure-conv", 2000,
                                                                           hashes=True),
          "mooncake": _trace("mooncake", 3000, hashes=True)}


def _spec(*phases: Phase) -> PhasedSpec:
    return PhasedSpec("t", phases, REF)


SWITCH = _spec(Phase(30.0, (1.0, 1.0), (("azure-conv", 1.0),)),
               Phase(30.0, (1.0, 1.0), (("mooncake", 1.0),)),
               Phase(30.0, (0.5, 1.5), (("azure-code", 0.5), ("azure-conv", 0.5))))


def test_same_seed_same_workload_and_another_seed_another():
    a, b = (build_phased(SWITCH, 1.0, 3, TRACES) for _ in range(2))
    c = build_phased(SWITCH, 1.0, 4, TRACES)
    wa, wb = a.workload, b.workload
    assert np.array_equal(wa.arrival_s, wb.arrival_s)
    assert np.array_equal(wa.input_len, wb.input_len) and np.array_equal(a.phase, b.phase)
    assert wa.hash_ids == wb.hash_ids
    assert not np.array_equal(wa.arrival_s[:50], c.workload.arrival_s[:50])


def test_phases_keep_their_traces_lengths():
    ph = build_phased(SWITCH, 1.0, 0, TRACES)
    w = ph.workload
    assert np.all(np.diff(w.arrival_s) >= 0)
    for j in range(len(w)):
        name = TRACE_ORDER[ph.trace[j]]
        base = {"azure-code": 1000, "azure-conv": 2000, "mooncake": 3000}[name]
        assert base <= w.input_len[j] < base + 400  # one of its own trace's prompts
        assert w.output_len[j] == w.input_len[j] - base + 1  # with that request's output
        assert name in dict(SWITCH.phases[ph.phase[j]].mix)  # in a phase that carries it
    # a pure phase holds its trace only
    assert set(TRACE_ORDER[k] for k in ph.trace[ph.phase == 1]) == {"mooncake"}


def test_rate_follows_the_profile():
    sp = _spec(Phase(100.0, (0.0, 2.0), (("azure-conv", 1.0),)),
               Phase(100.0, (1.0, 1.0), (("azure-code", 0.25), ("azure-conv", 0.75))))
    assert sp.rate_rps("azure-conv", 50.0, 2.0) == pytest.approx(2.0 * 1.0 * 20.0)
    assert sp.rate_rps("azure-code", 150.0) == pytest.approx(0.25 * 10.0)
    scale = 3.0
    ph = build_phased(sp, scale, 0, TRACES)
    t, tr = ph.workload.arrival_s, ph.trace
    conv, code = TRACE_ORDER.index("azure-conv"), TRACE_ORDER.index("azure-code")

    def count(lo, hi, k):
        return int(np.count_nonzero((t >= lo) & (t < hi) & (tr == k)))

    # the ramp 0 -> 2 over [0, 100): 1/4 of its arrivals in the first half, 3/4 in the second
    for lo, hi, k, mean in ((0, 50, conv, scale * 20 * 50 * 0.5),
                            (50, 100, conv, scale * 20 * 50 * 1.5),
                            (100, 200, conv, scale * 0.75 * 20 * 100),
                            (100, 200, code, scale * 0.25 * 10 * 100)):
        assert abs(count(lo, hi, k) - mean) < 5 * np.sqrt(mean)
    # a higher scale: the same points closer together, so more arrivals in every span
    more = build_phased(sp, 2 * scale, 0, TRACES)
    assert len(more.workload) > 1.8 * len(ph.workload)


def test_hash_ids_of_different_traces_never_collide():
    ph = build_phased(SWITCH, 1.0, 0, TRACES)
    w = ph.workload
    by_trace: dict[int, set[int]] = {}
    for j, hs in enumerate(w.hash_ids):
        by_trace.setdefault(int(ph.trace[j]), set()).update(hs)
    conv, moon = TRACE_ORDER.index("azure-conv"), TRACE_ORDER.index("mooncake")
    # both synthetic traces use raw ids 0..110; offset per trace they are disjoint
    assert by_trace[conv] and by_trace[moon] and not by_trace[conv] & by_trace[moon]
    assert by_trace[TRACE_ORDER.index("azure-code")] == set()  # Azure: no hashes
    # equal ids within a trace stay equal (the prefix cache's sharing is kept)
    assert min(by_trace[moon]) >> HASH_SHIFT == moon + 1


def test_part_is_a_phases_requests_at_their_times():
    ph = build_phased(SWITCH, 1.0, 0, TRACES)
    part = ph.part(1)
    sel = ph.phase == 1
    assert np.array_equal(part.arrival_s, ph.workload.arrival_s[sel])
    assert np.array_equal(part.input_len, ph.workload.input_len[sel])
    assert np.all((part.arrival_s >= 30.0) & (part.arrival_s < 60.0))


def test_repeated_and_validation():
    two = SWITCH.repeated(2)
    assert two.duration_s == 2 * SWITCH.duration_s and len(two.phases) == 6
    with pytest.raises(ValueError, match="sum to 1"):
        _spec(Phase(10.0, (1.0, 1.0), (("azure-conv", 0.5),)))
    with pytest.raises(ValueError, match="reference rate"):
        _spec(Phase(10.0, (1.0, 1.0), (("sharegpt", 1.0),)))
    with pytest.raises(ValueError):
        build_phased(SWITCH, 0.0, 0, TRACES)


def test_committed_workloads():
    specs = load_specs()
    assert {"daily-drift", "prefill-decode-switch"} <= set(specs)
    drift = spec("daily-drift")
    loads = [p.load for p in drift.phases]
    assert len(loads) >= 6 and all(a[1] == b[0] for a, b in zip(loads, loads[1:], strict=False))
    assert len({p.dominant() for p in drift.phases}) >= 2  # the mix drifts, not only the rate
    switch = spec("prefill-decode-switch")
    kinds = [p.dominant() == "azure-conv" for p in switch.phases]
    assert all(a != b for a, b in zip(kinds, kinds[1:], strict=False))  # decode <-> prefill
    with pytest.raises(ValueError, match="unknown phased workload"):
        spec("nope")
