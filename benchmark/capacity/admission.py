"""The admission knob, tuned last: each policy's capacity in every order its users can pick.

``python -m benchmark.capacity.admission --case mooncake-qwen3-8b-tp1 [--policies ...]``

Every system here admitted first come, first served in the sweeps (`sweep.py`); issue #48 asks
for the order as one more knob. It is tuned as the last knob of the coordinate descent, from
each policy's committed best setting (`<case>.json`, ``policies.<p>.best.setting``: the other
knobs at their best):

* sglang-chunked, sglang-default, sglang-pdmux: SGLang 0.5.17's ``--schedule-policy`` (``fcfs``,
  ``lpm``, ``dfs-weight``, ``lof``: `sglang_duet.sim.schedule`), and as a reference row, not a
  tuned value, ``hrrn`` (SGLang after 0.5.17);
* duet: ``--duet-admission`` (``fcfs``, ``deadline``, ``sjf``: `sglang_duet.policy.admission`);
* the others (vLLM's FCFS scheduler, Dynamo, the paper's scheme): their one order, re-run.

Each (policy, order) capacity is found from the committed capacity by galloping (steps of 2.5%,
doubling while the run passes, or halving down while it fails) and bisection to 2.5%
(`search.find_capacity`'s tolerance), on the sweep's arrivals and run length. The best order of
each policy then gets the run-length check (twice the requests; `search.run_length`: the longer
run's figure where it falls by more than 5%). At every capacity the fairness columns are kept
(`sim.steady`: P99 and max TTFT, the longest-prompt tenth's TTFT attainment).

Output: ``benchmark/results/capacity/admission/<case>.{json,md}``; `summary.py` reads each
policy's best order from there. Requests per second; seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from benchmark.stamp import write_result

from .search import CACHE, Cluster, Point, Setting, evaluate, passes, run_length
from .sweep import FINE_TOL, _pool_map

__all__ = ["ORDERS", "REFERENCE", "admission_case", "gallop"]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "benchmark", "results", "capacity")
OUT = os.path.join(RESULTS, "admission")

SGLANG = ("schedule_policy", ("fcfs", "lpm", "dfs-weight", "lof"))
ORDERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "sglang-chunked": SGLANG, "sglang-default": SGLANG, "sglang-pdmux": SGLANG,
    "duet": ("duet_admission", ("fcfs", "deadline", "sjf")),
}
REFERENCE: dict[str, tuple[str, str]] = {p: ("schedule_policy", "hrrn") for p in
                                         ("sglang-chunked", "sglang-default", "sglang-pdmux")}
FAIRNESS = ("attainment", "ttft_p99_s", "ttft_max_s", "long_tenth_attainment")


def gallop(cl: Cluster, s: Setting, requests: int, start: float, tol: float = FINE_TOL
           ) -> tuple[float, list[Point]]:
    """Highest passing QPS near ``start`` (within ``tol``), and every point run; 0.0 when even
    ``start / 64`` fails."""
    pts: list[Point] = []

    def ok(q: float) -> bool:
        p = evaluate(cl, s, q, requests)
        pts.append(p)
        return passes(p, cl.target)

    step = 1.0 + tol
    if ok(start):
        lo, hi = start, start * step
        while ok(hi):
            lo, step = hi, step * step
            hi = lo * step
    else:
        hi, lo = start, start / step
        while not ok(lo):
            if lo < start / 64:
                return 0.0, pts
            hi, step = lo, step * step
            lo = hi / step
    while hi / lo > 1.0 + tol:
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return round(lo, 4), pts


def _at(pts: list[Point], qps: float) -> dict[str, Any]:
    """The fairness columns of the point run at ``qps`` (the capacity)."""
    for p in pts:
        if abs(p.qps - qps) < 1e-4:
            st = p.metrics["steady"]
            return {k: st.get(k) for k in FAIRNESS}
    return {}


def _one(args: tuple[Cluster, str, dict[str, Any], str, str, float, int]
         ) -> tuple[str, str, dict[str, Any]]:
    cl, policy, best, field, order, start, requests = args
    s = Setting(policy, tuple(sorted({**best, field: order}.items())) if field else
                tuple(sorted(best.items())))
    cap, pts = gallop(cl, s, requests, start)
    return policy, order, {"setting": dict(s.knobs), "capacity_qps": cap, **_at(pts, cap),
                           "runs": len(pts)}


def _length(args: tuple[Cluster, str, dict[str, Any], float, int]) -> tuple[str, dict[str, Any]]:
    cl, policy, setting, cap, requests = args
    s = Setting(policy, tuple(sorted(setting.items())))
    long_cap, pts = gallop(cl, s, 2 * requests, cap)
    return policy, {**run_length(cap, long_cap, 2 * requests), **_at(pts, long_cap)}


def admission_case(case: str, policies: list[str] | None = None, jobs: int = 2,
                   quiet: bool = False) -> dict[str, Any]:
    """Every policy of the committed sweep ``case`` in each of its orders (module docstring)."""
    with open(os.path.join(RESULTS, f"{case}.json")) as f:
        sweep = json.load(f)
    cl = Cluster(**sweep["config"]["cluster"])
    n = int(sweep["config"]["requests"])
    CACHE.open(RESULTS)
    t0 = time.perf_counter()
    pols = [p for p in sweep["policies"] if policies is None or p in policies]
    tasks = []
    for p in pols:
        best, cap = sweep["policies"][p]["best"]["setting"], sweep["policies"][p]["best"][
            "capacity_qps"]
        field, orders = ORDERS.get(p, ("", ("fcfs",)))
        tasks += [(cl, p, best, field, o, cap, n) for o in orders]
        if p in REFERENCE:
            tasks.append((cl, p, best, *REFERENCE[p], cap, n))
    out: dict[str, dict[str, Any]] = {p: {"orders": {}} for p in pols}

    def got(item: tuple[str, str, dict[str, Any]]) -> None:
        p, o, r = item
        out[p]["orders"][o] = r
        if not quiet:
            sys.stderr.write(f"  {p:<15} {o:<11} {r['capacity_qps']:<8g} ({r['runs']} runs)\n")

    _pool_map(_one, tasks, jobs, got)
    checks = []
    for p in pols:
        field, orders = ORDERS.get(p, ("", ("fcfs",)))
        rows = out[p]["orders"]
        best = max(orders, key=lambda o: (rows[o]["capacity_qps"], o == orders[0]))
        out[p]["best_order"] = best
        checks.append((cl, p, rows[best]["setting"], rows[best]["capacity_qps"], n))
        if p in REFERENCE:
            out[p]["reference"] = {"order": REFERENCE[p][1], "note": "SGLang after 0.5.17",
                                   **rows.pop(REFERENCE[p][1])}

    def checked(item: tuple[str, dict[str, Any]]) -> None:
        p, chk = item
        rows = out[p]["orders"][out[p]["best_order"]]
        out[p]["length_check"] = chk
        out[p]["capacity_qps"] = chk["long_qps"] if chk["sets_figure"] else rows["capacity_qps"]

    _pool_map(_length, checks, jobs, checked)
    return {"case": case, "cluster": sweep["config"]["cluster"], "requests": n,
            "sweep_commit": sweep["stamp"]["commit"], "policies": out,
            "wall_s": round(time.perf_counter() - t0, 1)}


def table(res: dict[str, Any]) -> str:
    """Markdown: each policy's orders, capacity and fairness columns."""
    lines = [f"# Admission order: {res['case']}", "",
             "Capacity (req/s) per order, each policy at its best setting for the other knobs; "
             "fairness columns at that capacity (`benchmark/capacity/admission.py`).", "",
             "| policy | order | capacity | attainment | P99 TTFT (s) | max TTFT (s) | "
             "longest tenth in SLO |", "|---|---|---:|---:|---:|---:|---:|"]
    for p, r in res["policies"].items():
        rows = dict(r["orders"])
        if "reference" in r:
            rows[r["reference"]["order"] + " (after 0.5.17)"] = r["reference"]
        for o, x in rows.items():
            mark = " **best**" if o == r["best_order"] else ""
            lines.append(f"| {p} | {o}{mark} | {x['capacity_qps']:g} | {x.get('attainment')} | "
                         f"{x.get('ttft_p99_s')} | {x.get('ttft_max_s')} | "
                         f"{x.get('long_tenth_attainment')} |")
    lines += ["", "Run-length check of each best order (twice the requests):", ""]
    for p, r in res["policies"].items():
        c = r["length_check"]
        lines.append(f"* {p}: {r['capacity_qps']:g} req/s ({r['best_order']}; "
                     f"{'the longer run sets it' if c['sets_figure'] else 'holds'})")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmark.capacity.admission",
                                 description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--case", action="append", required=True,
                    help="a committed sweep, e.g. mooncake-qwen3-8b-tp1 (repeatable)")
    ap.add_argument("--policies", default=None, help="comma-separated (default: every one)")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    pols = args.policies.split(",") if args.policies else None
    for case in args.case:
        if not os.path.exists(os.path.join(RESULTS, f"{case}.json")):
            print(f"--case: no committed sweep {case!r} in {RESULTS}", file=sys.stderr)
            return 2
    os.makedirs(OUT, exist_ok=True)
    for case in args.case:
        res = admission_case(case, pols, args.jobs)
        path = os.path.join(OUT, f"{case}.json")
        if pols is not None and os.path.exists(path):  # keep the other policies' rows
            with open(path) as f:
                old = json.load(f)
            res["policies"] = {**old.get("policies", {}), **res["policies"]}
        write_result(path, res)
        with open(os.path.join(OUT, f"{case}.md"), "w") as f:
            f.write(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
