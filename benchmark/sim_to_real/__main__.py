"""python -m benchmark.sim_to_real [--qps 0.5,1,2,4] [--systems ...] [--reuse RESULTS.json]"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from dataclasses import fields

from benchmark.sim_to_real.pipeline import RESULTS_DIR, Config, run
from benchmark.sim_to_real.real import REAL_SYSTEMS


def parse(argv: list[str] | None = None) -> Config:
    d = Config()
    p = argparse.ArgumentParser(prog="python -m benchmark.sim_to_real", description=__doc__)
    p.add_argument("--qps", default=",".join(f"{q:g}" for q in d.qps),
                   help="comma-separated load points (req/s), light to saturation")
    p.add_argument("--systems", default=",".join(d.systems),
                   help=f"comma-separated, from {','.join(REAL_SYSTEMS)}")
    p.add_argument("--run-s", type=float, default=d.run_s,
                   help="a point replays qps x this many requests, clipped to "
                   "[--min-requests, --max-requests]")
    p.add_argument("--min-requests", type=int, default=d.min_requests)
    p.add_argument("--max-requests", type=int, default=d.max_requests)
    p.add_argument("--model", default="", help="model dir (default: the embedded cpu-bench)")
    p.add_argument("--scale", type=float, default=d.scale, help="trace length scale")
    p.add_argument("--chunk", type=int, default=d.chunk,
                   help="--chunked-prefill-size of sglang-chunked and duet-aggregated")
    p.add_argument("--kv-tokens", type=int, default=d.kv_tokens,
                   help="--max-total-tokens of every server and the simulator's KV pool")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--tag", default=d.tag)
    p.add_argument("--out-dir", default=RESULTS_DIR)
    p.add_argument("--work-dir", default=None, help="server logs, plan logs, bench output")
    p.add_argument("--quiet-cores", type=float, default=d.quiet_cores,
                   help="before each point wait for other jobs to use at most this many cores")
    p.add_argument("--quiet-wait-s", type=float, default=d.quiet_wait_s,
                   help="... for up to this many seconds (0: no wait)")
    p.add_argument("--nice", type=int, default=d.nice,
                   help="autogroup niceness of the servers and clients while measured (root; "
                   "0: unchanged)")
    p.add_argument("--no-host-probe", action="store_true",
                   help="skip the tiny-model replay that measures the host share")
    p.add_argument("--reuse", default="", help="re-simulate the real runs of this results JSON "
                   "(no server is started) with its fitted profiles, or, when --work-dir is its "
                   "work dir, with profiles fitted again from the logs there")
    a = p.parse_args(argv)
    cfg = Config(qps=[float(q) for q in a.qps.split(",") if q.strip()], run_s=a.run_s,
                 min_requests=a.min_requests, max_requests=a.max_requests,
                 systems=[s for s in a.systems.split(",") if s], model=a.model, scale=a.scale,
                 chunk=a.chunk, kv_tokens=a.kv_tokens, seed=a.seed, tag=a.tag,
                 out_dir=a.out_dir, reuse=a.reuse,
                 quiet_cores=a.quiet_cores, quiet_wait_s=a.quiet_wait_s, nice=a.nice,
                 host_probe=not a.no_host_probe)
    unknown = set(cfg.systems) - set(REAL_SYSTEMS)
    if unknown:
        p.error(f"unknown systems {sorted(unknown)}; choose from {', '.join(REAL_SYSTEMS)}")
    if cfg.reuse:  # the workload must be the one that ran
        with open(cfg.reuse) as f:
            old = json.load(f)["config"]
        for fl in fields(Config):
            if fl.name not in ("reuse", "tag", "out_dir"):
                setattr(cfg, fl.name, old.get(fl.name, getattr(cfg, fl.name)))
    cfg.work_dir = a.work_dir  # type: ignore[attr-defined]
    return cfg


def main(argv: list[str] | None = None) -> int:
    # a SIGTERM (or SIGINT, even when started in the background) unwinds, so servers are stopped
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: sys.exit(143))
    cfg = parse(argv)
    results = run(cfg, work=getattr(cfg, "work_dir", None))
    print("\n".join(f"[sim_to_real] wrote {p}" for p in results["outputs"]))
    v = results["verdict"]["all"]
    print(f"[sim_to_real] targets met: {v['met']}/{v['targeted']}")
    return 0 if all(e.get("status") == "ran" for e in results["systems"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
