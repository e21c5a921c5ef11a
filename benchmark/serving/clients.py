"""Issue #24 measured on stock SGLang 0.5.17 and sglang-duet (same tiny model, CPU settings):

    python -m benchmark.serving.clients [--rounds 3] [--backends llguidance,outlines]
                                        [--systems stock,sglang-duet] [--no-matrix] [--kits]
                                        [--duet-root PATH]

* idle: each constrained request of `conformance.cases.CONSTRAINED` (and each invalid grammar) sent
  alone to an idle server, once per round with a grammar no earlier request used (so that every
  one compiles), 1 s apart; seconds per request per system and backend, and duet/stock ratios
  of the medians. A request that gets no answer within --timeout-s counts as hung.
* matrix: every single request of `conformance.cases.BAD`, alone, on each system: its status and
  message, and whether the server survived it (a server that died is restarted for the next).
* kits (--kits): SGLang's own server test kits (test/server/test_sglang_kits.py), every test,
  on both systems, with their verdicts.

`--duet-root` starts sglang-duet from another checkout (e.g. one before the fix) for the idle
part. Writes benchmark/results/serving/clients.json (stamped).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time

import requests

from benchmark.stamp import write_result
from sglang_duet.conformance.cases import BAD, CONSTRAINED, INVALID_GRAMMAR
from sglang_duet.local_server import ROOT, Server

RESULTS = os.path.join(ROOT, "benchmark", "results", "serving", "clients.json")
CHUNK = "64"
START_S = 900.0  # a loaded 2-core machine has taken over 240 s to start one server


def start(system: str, args: list[str], root: str | None = None) -> Server:
    """A server of `system` ("stock" or "sglang-duet"); sglang-duet from checkout `root` when
    given (its python/ first on the path)."""
    from sglang_duet.tiny_model import default_model_path

    stock = system == "stock"
    extra = ["--model-path", str(default_model_path())] if stock else []
    env = {"SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "false"} if stock else {}
    if root is not None and not stock:
        env["PYTHONPATH"] = os.pathsep.join([os.path.join(root, "python"), root])
    srv = Server([*extra, "--chunked-prefill-size", CHUNK, *args], stock=stock, env=env)
    return srv.start(timeout=START_S)


def commit_of(root: str | None) -> str | None:
    if root is None:
        return None
    out = subprocess.run(["git", "-C", root, "rev-parse", "--short=12", "HEAD"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or None


def variant(body: dict, k: int) -> dict:
    """`body` with its grammar changed so that round k compiles a grammar of its own."""
    out = copy.deepcopy(body)
    params = out.get("sampling_params")
    if params is not None:
        for key in ("regex", "ebnf", "json_schema"):
            if key in params and params[key] not in ("(", "{not json"):
                params[key] = (params[key] + "x" * k if key == "regex" else
                               params[key].replace('"red"', f'"red{k}"') if key == "ebnf" else
                               params[key].replace('"maxLength": 8', f'"maxLength": {8 + k}'))
    elif "response_format" in out or "tools" in out:
        out["messages"] = [{"role": "user", "content": f"weather {k}?"}]  # new prompt, same grammar
        fmt = out.get("response_format", {})
        if fmt.get("type") == "json_schema":
            fmt["json_schema"]["schema"]["properties"]["city"]["maxLength"] = 8 + k
    return out


def lone(srv: Server, path: str, body: dict, timeout_s: float) -> dict:
    t0 = time.perf_counter()
    try:
        r = requests.post(srv.url + path, json=body, timeout=timeout_s)
        return {"s": round(time.perf_counter() - t0, 3), "status": r.status_code}
    except requests.Timeout:
        return {"s": None, "status": "hung"}
    except requests.RequestException as e:
        return {"s": None, "status": f"cut: {type(e).__name__}"}


def idle(system: str, backend: str, rounds: int, timeout_s: float, root: str | None) -> dict:
    srv = start(system, ["--grammar-backend", backend], root)
    cases = {k: v[0] for k, v in CONSTRAINED.items()} | {k: v[0] for k, v in
                                                         INVALID_GRAMMAR.items()}
    out: dict = {name: [] for name in cases}
    try:
        for k in range(rounds):
            for name, (path, body) in cases.items():
                time.sleep(1.0)  # idle: nothing else in flight, the scheduler asleep
                out[name].append(lone(srv, path, variant(body, k), timeout_s))
    finally:
        srv.stop()
    return out


def matrix(system: str, timeout_s: float) -> dict:
    out, srv = {}, None
    try:
        for name, (path, body, _) in BAD.items():
            if srv is None or srv.proc.poll() is not None:
                srv = start(system, ["--grammar-backend", "llguidance"])
            try:
                r = requests.post(srv.url + path, json=body, timeout=timeout_s)
                status, text = r.status_code, r.text[:300]
            except requests.RequestException as e:
                status, text = "no answer", type(e).__name__
            try:
                srv.proc.wait(timeout=10 if status == "no answer" else 2)
            except Exception:  # noqa: BLE001 - still running: it survived
                pass
            out[name] = {"status": status, "message": text, "survived": srv.proc.poll() is None}
    finally:
        if srv is not None:
            srv.stop()
    return out


def kits(system: str) -> dict:
    from sglang_duet.conformance.kits import run_kits

    srv = start(system, ["--grammar-backend", "llguidance"])
    try:
        return run_kits(srv.url, {})
    finally:
        srv.stop()


def summary(idle_runs: dict) -> dict:
    """duet/stock ratio of the median seconds, per backend and case (None: hung somewhere)."""
    out = {}
    for backend, systems in idle_runs.items():
        if set(systems) != {"stock", "sglang-duet"}:
            continue
        for name in systems["stock"]:
            med = {}
            for system in ("stock", "sglang-duet"):
                runs = systems[system][name]
                times = [r["s"] for r in runs if r["s"] is not None]
                med[system] = statistics.median(times) if len(times) == len(runs) else None
            ratio = (round(med["sglang-duet"] / med["stock"], 2)
                     if None not in med.values() and med["stock"] else None)
            out[f"{backend}/{name}"] = {"median_s": med, "duet_over_stock": ratio}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmark.serving.clients", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--backends", default="llguidance,outlines")
    p.add_argument("--timeout-s", type=float, default=120.0)
    p.add_argument("--no-matrix", action="store_true")
    p.add_argument("--kits", action="store_true")
    p.add_argument("--systems", default="stock,sglang-duet")
    p.add_argument("--duet-root", default=None, help="sglang-duet from this checkout instead")
    p.add_argument("--out", default=RESULTS)
    a = p.parse_args(argv)
    systems = a.systems.split(",")
    result: dict = {"idle": {}, "rounds": a.rounds, "duet_commit": commit_of(a.duet_root)}
    for backend in filter(None, a.backends.split(",")):
        for system in systems:
            result["idle"].setdefault(backend, {})[system] = idle(
                system, backend, a.rounds, a.timeout_s, a.duet_root)
            write_result(a.out, result)  # what is done so far survives a failure later
    result["idle_summary"] = summary(result["idle"])
    for part, run, wanted in (("matrix", lambda s: matrix(s, a.timeout_s), not a.no_matrix),
                              ("kits", kits, a.kits)):
        for system in systems if wanted else ():
            result.setdefault(part, {})[system] = run(system)
            write_result(a.out, result)
    path = write_result(a.out, result)
    print(json.dumps(result["idle_summary"], indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
