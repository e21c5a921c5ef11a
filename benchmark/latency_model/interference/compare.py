"""Every published point of points.csv next to the model's value for the same quantity."""

from __future__ import annotations

from sglang_duet.latency import Calibration, LatencyModel, get_hardware
from sglang_duet.latency.interference import PUBLISHED

from .fit import MUX_DECODE_SMS, copy_share, mux_grid, mux_models, points

Row = dict[str, object]


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f}%"


def grids(cal: Calibration) -> dict[str, dict[str, tuple]]:
    """(decode, prefill) slowdown arrays of MuxWise's grid per GPU and model, published model."""
    out: dict[str, dict[str, tuple]] = {}
    for hw, sms in MUX_DECODE_SMS.items():
        out[hw] = {name: mux_grid(LatencyModel(get_hardware(hw), m, cal, "published"), sms)
                   for name, m in mux_models().items()}
    return out


def by_decode_sms(g: dict[str, dict[str, tuple]]) -> dict[str, dict[str, list[float]]]:
    """Largest modelled decode slowdown per decode partition (Fig. 11's x-axis), per GPU/model."""
    return {hw: {name: [round(float(v), 4) for v in s_d.max(axis=0)]
                 for name, (s_d, _) in models.items()} for hw, models in g.items()}


def compare(cal: Calibration) -> tuple[list[Row], dict]:
    g = grids(cal)
    pts = {p["id"]: p for p in points()}
    rows: list[Row] = []

    def add(pid: str, model: str, model_value: float | None, verdict: str) -> None:
        p = pts[pid]
        rows.append({"id": pid, "gpu": p["gpu"], "metric": p["metric"], "use": p["use"],
                     "published": p["published"] or p["relation"], "relation": p["relation"],
                     "model": model, "model_value": model_value, "verdict": verdict})

    for hw, pid in (("a100-80g", "mux-a100"), ("h100-sxm", "mux-h100")):
        want = float(pts[pid]["published"])
        got = {name: float(s_d.max()) for name, (s_d, _) in g[hw].items()}
        err = max(abs(v - want) for v in got.values())
        add(pid, " / ".join(f"{k} {_pct(v)}" for k, v in got.items()), max(got.values()),
            f"fit; worst residual {100 * err:.1f} points")
    lo = {hw: min(float(s_d.min()) for s_d, _ in m.values()) for hw, m in g.items()}
    add("mux-min", " / ".join(f"{hw} {_pct(v)}" for hw, v in lo.items()), min(lo.values()),
        "reproduced" if max(lo.values()) < 0.01 else
        "not reproduced: at constant efficiencies the model counts a 1K-token TP-8 prefill as "
        "compute-bound; light co-runs are overstated by this floor")
    pre = {hw: max(float(s_p.max()) for _, s_p in m.values()) for hw, m in g.items()}
    dec = {hw: max(float(s_d.max()) for s_d, _ in m.values()) for hw, m in g.items()}
    add("mux-prefill", " / ".join(f"{hw} {_pct(v)}" for hw, v in pre.items()),
        max(pre.values()), "not reproduced: the model's prefill side is Bullet's GEMM bound, "
        "below MuxWise's decode maxima")
    b = PUBLISHED["a100-80g"].prefill_bandwidth
    bound = float(pts["bul-gemm"]["published"])
    shares = (0.4, 0.3, 0.2, 0.1)
    got_b = [b * copy_share("a100-80g", s) for s in shares]
    add("bul-gemm", ", ".join(f"copy on {int(100 * s)}%: {_pct(v)}" for s, v in
                              zip(shares, got_b, strict=True)), got_b[0],
        "fit at 40% (B rounded to 4 digits); below the bound at every smaller copy"
        if max(got_b) <= bound * 1.001 else "exceeds the bound")
    add("bul-order", " / ".join(f"{hw} decode {_pct(dec[hw])} vs prefill {_pct(pre[hw])}"
                                for hw in g), None,
        "reproduced" if all(dec[hw] > pre[hw] for hw in g) else "not reproduced")
    add("bul-spread", "-", None, "noise floor: read residuals against it")
    h, a = PUBLISHED["h100-sxm"], PUBLISHED["a100-80g"]
    add("he-power", f"clock {h.clock:.3f} of A = {h.decode:.3f} (H100), {a.decode:.3f} (A100)",
        h.clock, "input (the clock term, per unit x_p)")
    h100 = get_hardware("h100-sxm")
    f20 = h100.bandwidth_fraction(int(0.2 * h100.num_sms))
    add("duet-fig3", f"bandwidth share of 26 SMs alone: {f20:.2f}", f20, "input (hardware.py)")
    a100 = get_hardware("a100-80g")
    p_gemv = a100.bandwidth_fraction(int(0.2 * a100.num_sms)) / (1 + min(a.decode * 0.8,
                                                                          a.decode_max))
    add("nano-gemv", f"memory-bound kernel on 20% of the SMs next to a GEMM at x_p = 0.8: "
        f"P = {p_gemv:.2f}", p_gemv, "out of scope: NanoFlow's kernels share SMs")
    add("mps-h200", "-", None, "out of scope: MPS without SM partitions")
    add("gc-5060", "-", None, "context: disjoint partitions, latency-bound victim")
    return rows, {"decode_slowdown_by_decode_sms": by_decode_sms(g),
                  "decode_sms": {hw: list(s) for hw, s in MUX_DECODE_SMS.items()}}
