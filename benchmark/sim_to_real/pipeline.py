"""The whole comparison: requests -> real servers -> CPU profile fit -> simulator -> report."""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field, replace

from benchmark.serving.convert import PromptBuilder, model_max_len
from benchmark.sim_to_real import report
from benchmark.sim_to_real.cpu_meter import set_autogroup_nice
from benchmark.sim_to_real.host import host_shares
from benchmark.sim_to_real.profile import fit_profile, write_hardware
from benchmark.sim_to_real.real import REAL_SYSTEMS, run_system
from benchmark.sim_to_real.samples import busy_in_window, plan_log_samples
from benchmark.sim_to_real.sglang_log import log_samples
from benchmark.sim_to_real.simulate import simulate_point
from benchmark.sim_to_real.workload import LoadPoint, build_point, to_workload, write_point
from benchmark.stamp import ROOT, write_result
from sglang_duet.calibrate.samples import write_samples
from sglang_duet.sim.kvcache import PAGE_SIZE

RESULTS_DIR = os.path.join(str(ROOT), "benchmark", "results", "sim_to_real")


@dataclass
class Config:
    qps: list[float] = field(default_factory=lambda: [0.5, 1.0, 2.0, 4.0])
    run_s: float = 30.0  # a point replays about qps x run_s requests ...
    min_requests: int = 20  # ... at least this many,
    max_requests: int = 40  # ... at most this many
    systems: list[str] = field(default_factory=lambda: list(REAL_SYSTEMS))
    model: str = ""  # "" -> the embedded cpu-bench model
    scale: float = 0.1
    chunk: int = 128
    kv_tokens: int = 2048  # --max-total-tokens of every server: binds only near saturation
    seed: int = 0
    tag: str = "cpu"
    out_dir: str = RESULTS_DIR
    reuse: str = ""  # a results JSON: re-simulate its real runs with its profile, no servers
    quiet_cores: float = 0.5  # before each point, wait for other jobs to use at most this ...
    quiet_wait_s: float = 60.0  # ... for up to this long (cpu_meter.wait_for_quiet)
    nice: int = -10  # autogroup niceness of servers and clients (0: unchanged), see run()
    host_probe: bool = True  # also replay one point on the tiny model (host share, host.py)
    repeat: bool = True  # replay duet's points twice: the real side's own run-to-run spread
    probe_qps: float = 2.0  # that point (one of `qps`)

    def points(self) -> list[LoadPoint]:
        return [LoadPoint(q, max(self.min_requests, min(self.max_requests, round(q * self.run_s))))
                for q in self.qps]


def rel(path: str) -> str:
    """A path as stored in the results (relative to the repository root)."""
    return os.path.relpath(path, str(ROOT))


def absolute(path: str) -> str:
    return path if os.path.isabs(path) else os.path.join(str(ROOT), path)


def model_dir(cfg: Config) -> str:
    if cfg.model:
        return cfg.model
    from sglang_duet.tiny_model import default_model_path

    return str(default_model_path(size="cpu-bench"))


def _requests(cfg: Config, model: str, work: str) -> dict[float, tuple[str, list]]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    builder = PromptBuilder(tok, cfg.seed)
    pool = max(p.num_requests for p in cfg.points())
    out = {}
    for p in cfg.points():
        rows, _ = build_point(p, tok, cfg.scale, model_max_len(model), cfg.seed, pool, builder)
        out[p.qps] = (write_point(rows, work, f"qps{p.qps:g}"), rows)
    return out


def _kv_flag(cfg: Config) -> tuple[str, ...]:
    return ("--max-total-tokens", str(cfg.kv_tokens))


def _prefix(cfg: Config) -> str:
    return os.path.join(cfg.out_dir, cfg.tag)


def run(cfg: Config, progress=print, work: str | None = None) -> dict:
    """The comparison. On this shared 2-core machine other jobs otherwise take the server's
    core at random moments (a one-thread forward then runs 3-25x slower, `cpu_meter`), which
    no simulator of a dedicated machine can replay: with `cfg.nice` < 0 each server's session
    and this process's (the bench_serving clients) get that autogroup niceness while they
    run (`cpu_meter.set_autogroup_nice`), restored at the end."""
    old = set_autogroup_nice("self", cfg.nice) if cfg.nice and not cfg.reuse else None
    try:
        return _run(cfg, progress, work)
    finally:
        if old is not None:
            set_autogroup_nice("self", old)


def _run(cfg: Config, progress, work: str | None) -> dict:
    model = model_dir(cfg)
    work = work or tempfile.mkdtemp(prefix="duet_sim_to_real_")
    os.makedirs(work, exist_ok=True)
    os.makedirs(cfg.out_dir, exist_ok=True)
    reqs = _requests(cfg, model, work)
    prefix = _prefix(cfg)
    if cfg.reuse:  # the real runs of an earlier results JSON
        with open(cfg.reuse) as f:
            old = json.load(f)
        drop = ("comparison", "schedule_comparison", "sim", "repeatability")
        systems = {k: {kk: vv for kk, vv in v.items() if kk not in drop}
                   for k, v in old["systems"].items()}
        profile = old["profile"]
        measured = old.get("measured") or old.get("stamp")  # when the real runs were made
        logs = sorted(glob.glob(os.path.join(work, "plan_duet-aggregated.tp*")))
        if logs and "duet-aggregated" in systems:  # its work dir is here: fit again
            systems["duet-aggregated"]["plan_logs"] = logs
            profile = {**_analyse(model, systems, work, prefix, progress),
                       "host_share": old["profile"].get("host_share")}
    else:
        measured = None
        systems = {}
        for name in sorted(cfg.systems, key=lambda n: n != "duet-aggregated"):  # duet first
            points = [(q, len(rows), path) for q, (path, rows) in reqs.items()]
            systems[name] = run_system(REAL_SYSTEMS[name], model, cfg.chunk, points, work,
                                       progress, cfg.seed, extra=_kv_flag(cfg),
                                       quiet=(cfg.quiet_cores, cfg.quiet_wait_s),
                                       nice=cfg.nice,
                                       passes=2 if cfg.repeat and name == "duet-aggregated"
                                       else 1)
        profile = _analyse(model, systems, work, prefix, progress)
        if cfg.host_probe and cfg.probe_qps in reqs and systems.get("duet-aggregated"):
            profile["host_share"] = _host_probe(cfg, reqs[cfg.probe_qps], systems, work,
                                                progress)
    for entry in systems.values():  # temporary paths stay out of the results
        if isinstance(entry.get("plan_logs"), list):
            entry["plan_logs"] = len(entry["plan_logs"])
        entry["command"] = (entry.get("command") or "").replace(model, "MODEL")
    results = {"config": asdict(cfg), "profile": profile, "systems": systems}
    if measured:
        results["measured"] = measured
    if profile.get("calibration"):
        _simulate(cfg, results, reqs, progress)
    results["verdict"] = report.verdict(results)
    write_result(prefix + ".json", results)
    with open(prefix + ".md", "w") as f:
        f.write(report.markdown(results, cfg.tag))
    results["outputs"] = [prefix + ".json", prefix + ".md"]
    return results


def _analyse(model: str, systems: dict, work: str, prefix: str, progress) -> dict:
    """The profiles (duet's plan log, each system's SGLang log) and duet's measured busy time
    per iteration kind, from the work dir of the real runs."""
    profile = _fit(model, systems, prefix, progress)
    if profile.get("calibration"):
        profile["per_system"] = _fit_logs(systems, work, profile, prefix, progress)
    duet = systems.get("duet-aggregated") or {}
    for run in duet.get("runs", []) + duet.get("repeat_runs", []):
        if run.get("window") and duet.get("plan_logs"):
            run["busy_s"] = busy_in_window(duet["plan_logs"], tuple(run["window"]))
    return profile


def _fit(model: str, systems: dict, prefix: str, progress) -> dict:
    """The CPU profile from duet's plan logs: hardware JSON, the model's config.json, the
    samples CSV and the fitted calibration JSON, all next to the results (paths relative)."""
    duet = systems.get("duet-aggregated") or {}
    logs = duet.get("plan_logs") or []
    if not logs:
        return {"error": "no plan log: duet-aggregated did not run"}
    hw = write_hardware(prefix + "_hardware.json")
    cfg_json = shutil.copyfile(os.path.join(model, "config.json"), prefix + "_model.json")
    samples, info = plan_log_samples(logs, hw, cfg_json)
    write_samples(prefix + "_samples.csv", [replace(s, hardware=rel(hw), model=rel(cfg_json))
                                            for s in samples])
    try:
        fit = fit_profile(samples, prefix + "_calibration.json")
    except ValueError as e:
        return {"error": str(e), **info}
    progress(f"[sim_to_real] CPU profile: {len(samples)} iterations, held-out MAPE "
             f"{fit['heldout_mape']:.1%}, host share decode {fit['host_share_decode_median']}")
    fit["calibration"] = rel(fit["calibration"])
    return {"hardware": rel(hw), "model": rel(cfg_json), **info, **fit}


def _host_probe(cfg: Config, point: tuple[str, list], systems: dict, work: str,
                progress) -> dict:
    from sglang_duet.tiny_model import default_model_path

    path, rows = point
    probe_work = os.path.join(work, "host_probe")
    os.makedirs(probe_work, exist_ok=True)
    entry = run_system(REAL_SYSTEMS["duet-aggregated"], str(default_model_path()), cfg.chunk,
                       [(cfg.probe_qps, len(rows), path)], probe_work, progress, cfg.seed,
                       extra=_kv_flag(cfg), quiet=(cfg.quiet_cores, cfg.quiet_wait_s),
                       nice=cfg.nice)
    if entry.get("status") != "ran" or not entry.get("plan_logs"):
        return {"error": entry.get("reason") or "no plan log"}
    shares = host_shares(systems["duet-aggregated"]["plan_logs"], entry["plan_logs"])
    progress(f"[sim_to_real] host share per iteration class: "
             f"{ {k: v['host_share'] for k, v in shares.items()} }")
    return {"qps": cfg.probe_qps, "classes": shares}


def _fit_logs(systems: dict, work: str, profile: dict, prefix: str, progress) -> dict:
    """Each system's own calibration, fitted to the loop periods its SGLang log implies
    (`sglang_log.log_samples`; duet's too, a check of the method against its plan log)."""
    out = {}
    hw, model = absolute(profile["hardware"]), absolute(profile["model"])
    for name, entry in systems.items():
        log = os.path.join(work, f"server_{name}.log")
        if entry.get("status") != "ran" or not os.path.exists(log):
            continue
        with open(log, errors="replace") as f:
            samples = log_samples(f.read(), hw, model, REAL_SYSTEMS[name].mixed,
                                  overlap=REAL_SYSTEMS[name].stock)
        try:
            fit = fit_profile(samples, f"{prefix}_calibration_{name}.json")
        except ValueError as e:
            out[name] = {"error": str(e), "samples": len(samples)}
            continue
        fit["calibration"] = rel(fit["calibration"])
        out[name] = fit
        progress(f"[sim_to_real] {name}: own profile from {len(samples)} logged periods, "
                 f"held-out MAPE {fit['heldout_mape']:.1%}")
    return out


def _simulate(cfg: Config, results: dict, reqs: dict, progress) -> None:
    """Every system on its own profile (its logged periods; duet: its plan log), and as
    variants on duet's profile and, for stock, without the overlap emission rule."""
    prof = results["profile"]
    model, hw, shared = (absolute(prof[k]) for k in ("model", "hardware", "calibration"))
    own = prof.get("per_system") or {}
    for name, entry in results["systems"].items():
        if entry.get("status") != "ran":
            continue
        settings = entry.get("settings", {})
        budget = cfg.chunk if REAL_SYSTEMS[name].chunked else int(
            settings.get("chunked_prefill_size") or 8192)
        kv = int(settings.get("max_total_num_tokens") or cfg.kv_tokens)
        page = settings.get("page_size") if isinstance(settings.get("page_size"), int) else None
        cal = shared if name == "duet-aggregated" or not own.get(name, {}).get(
            "calibration") else absolute(own[name]["calibration"])
        sims: dict[float, dict] = {}
        variants: dict[str, dict[float, dict]] = {}
        for q, (_, rows) in reqs.items():
            wl = to_workload(rows, f"{name} qps {q:g}")
            sims[q] = simulate_point(name, wl, model, hw, cal, budget, kv, page_size=page)
            if cal != shared:
                variants.setdefault("shared", {})[q] = simulate_point(
                    name, wl, model, hw, shared, budget, kv, page_size=page)
            if REAL_SYSTEMS[name].stock:
                variants.setdefault("plain", {})[q] = simulate_point(
                    name, wl, model, hw, cal, budget, kv, overlap_rule=False, page_size=page)
            if page != PAGE_SIZE:  # the simulator's own default page, before it took SGLang's
                variants.setdefault("page16", {})[q] = simulate_point(
                    name, wl, model, hw, cal, budget, kv)
        entry["sim"] = {f"{q:g}": s for q, s in sims.items()}
        entry["sim_budget"], entry["sim_calibration"] = budget, rel(cal)
        entry["comparison"] = report.compare_runs(entry["runs"], sims, variants)
        if entry.get("repeat_runs"):  # the second measurement, compared like the simulator
            again = {r["qps"]: r["metrics"] for r in entry["repeat_runs"] if r.get("metrics")}
            entry["repeatability"] = report.compare_runs(entry["runs"], again)
        entry["schedule_comparison"] = report.compare_schedules(entry["runs"], sims,
                                                                variants.get("page16"))
        ok = [r["ok"] for r in entry["comparison"] if r["ok"] is not None]
        progress(f"[sim_to_real] {name}: {sum(ok)}/{len(ok)} targets met")
