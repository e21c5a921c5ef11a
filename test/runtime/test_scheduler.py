"""DuetScheduler on real servers: spatial plans and look-ahead decode give exactly the tokens of
aggregated mode and of Hugging Face transformers; aborts, KV-slot accounting, metrics, TP=2."""

from __future__ import annotations

import concurrent.futures as cf
import json
import random
import re
import threading
import time

import pytest
import requests

from helpers.reference import hf_greedy, prompts

pytestmark = pytest.mark.server

MIXED = [3, 9, 31, 64, 65, 100, 150, 220, 17, 48]  # chunked prefill size is 64


def metric(server, name: str, **labels) -> float:
    text = requests.get(server.url + "/metrics", timeout=30).text
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(f"sglang_duet:{name}"):
            continue
        head, _, value = line.rpartition(" ")
        if head.split("{")[0] not in (f"sglang_duet:{name}", f"sglang_duet:{name}_total"):
            continue
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total


def run_all(server, ps, new_tokens, **sampling):
    def one(p):
        return server.generate(p, new_tokens, **sampling)

    with cf.ThreadPoolExecutor(min(64, len(ps))) as ex:
        return list(ex.map(one, ps))


def wait_idle_and_empty(server, timeout=60.0) -> int:
    deadline = time.time() + timeout
    used = server.used_tokens()
    while used and time.time() < deadline:
        time.sleep(0.5)
        used = server.used_tokens()
    return used


class TestSpatialMode:
    def test_50_concurrent_equal_aggregated_and_transformers(self, spatial_server, duet_server):
        ps = prompts(56, MIXED, seed=3)
        # duet_server is shared by the session: its counts are compared before/after its run
        ref_before = {m: metric(duet_server, "iterations", mode=m) for m in ("spatial",
                                                                            "aggregated")}
        spatial = [r["output_ids"] for r in run_all(spatial_server, ps, 10, ignore_eos=True)]
        aggregated = [r["output_ids"] for r in run_all(duet_server, ps, 10, ignore_eos=True)]
        assert spatial == aggregated
        for p, got in list(zip(ps, spatial, strict=True))[:12]:
            assert got == hf_greedy(p, 10)
        # The plans really were spatial, with look-ahead; the reference really was aggregated.
        assert metric(spatial_server, "iterations", mode="spatial") > 0
        steps = metric(spatial_server, "spatial_decode_steps")
        assert steps > metric(spatial_server, "iterations", mode="spatial")
        assert metric(duet_server, "iterations", mode="spatial") == ref_before["spatial"]
        assert metric(duet_server, "iterations", mode="aggregated") > ref_before["aggregated"]

    def test_lookahead_stops_exactly_like_k1(self, spatial_server, duet_server):
        """max_tokens not multiples of 4, stop strings and stop tokens (EOS-like) inside the k
        steps: the same tokens and text as step-by-step decoding; surplus slots released."""
        ps = prompts(24, MIXED, seed=4)
        free = [r["output_ids"] for r in run_all(duet_server, ps, 14, ignore_eos=True)]
        cases = []
        rng = random.Random(0)
        for p, out in zip(ps, free, strict=True):
            kind = len(cases) % 3
            if kind == 0:
                cases.append((p, {"max_new_tokens": rng.choice([1, 2, 3, 5, 6, 7, 9, 10, 11])}))
            elif kind == 1:
                cases.append((p, {"max_new_tokens": 14, "stop_token_ids": [out[rng.randrange(
                    1, 9)]]}))
            else:
                text = duet_server.generate(p, 14, ignore_eos=True)["text"]
                stop = text[len(text) // 3: len(text) // 3 + 2]
                cases.append((p, {"max_new_tokens": 14, "stop": [stop] if stop.strip() else
                                  ["\n"]}))

        def one(server, case):
            p, sp = case
            sp = dict(sp)
            n = sp.pop("max_new_tokens")
            r = server.generate(p, n, **sp)
            return r["output_ids"], r["text"], r["meta_info"]["finish_reason"]

        with cf.ThreadPoolExecutor(24) as ex:
            k4 = list(ex.map(lambda c: one(spatial_server, c), cases))
            k1 = list(ex.map(lambda c: one(duet_server, c), cases))
        assert k4 == k1
        stopped = [r for r in k4 if r[2]["type"] == "stop"]
        assert len(stopped) >= 6  # stop strings / tokens really fired inside the runs
        assert wait_idle_and_empty(spatial_server) == 0
        assert "leak" not in spatial_server.log(tail=0).lower()


    def test_penalties_fall_back_to_k1_counted_on_metrics(self, spatial_server, duet_server):
        """Sampling penalties need per-step output counts: spatial plans run them with k = 1,
        the same tokens as aggregated mode, and /metrics counts each fallback by reason."""
        ps = prompts(12, MIXED, seed=8)
        reason = "penalties"
        before = metric(spatial_server, "lookahead_limited", reason=reason)
        sp = {"ignore_eos": True, "frequency_penalty": 0.5}
        got = [r["output_ids"] for r in run_all(spatial_server, ps, 9, **sp)]
        assert got == [r["output_ids"] for r in run_all(duet_server, ps, 9, **sp)]
        assert metric(spatial_server, "lookahead_limited", reason=reason) > before
        assert wait_idle_and_empty(spatial_server) == 0


class TestAborts:
    def test_20_percent_disconnects(self, spatial_server):
        ps = prompts(200, MIXED, seed=5)
        rng = random.Random(1)
        abort = set(rng.sample(range(200), 40))
        done, aborted, errors = [], [], []

        def one(i):
            body = {"input_ids": ps[i], "stream": True,
                    "sampling_params": {"max_new_tokens": 24, "temperature": 0,
                                        "ignore_eos": True}}
            try:
                with requests.post(spatial_server.url + "/generate", json=body, stream=True,
                                   timeout=300) as r:
                    chunks = 0
                    for line in r.iter_lines():
                        if line.startswith(b"data:") and line != b"data: [DONE]":
                            chunks += 1
                            if i in abort and chunks == 2:
                                aborted.append(i)
                                return  # closes the connection mid-stream
                        if line == b"data: [DONE]":
                            done.append(i)
                            return
            except requests.RequestException as e:
                errors.append((i, e))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(200)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
        assert not any(t.is_alive() for t in threads)  # nothing hangs
        assert not errors
        assert sorted(done) == sorted(set(range(200)) - set(aborted))
        assert len(aborted) == 40
        assert wait_idle_and_empty(spatial_server) == 0
        # Still serving afterwards.
        assert spatial_server.generate(ps[0], 3, ignore_eos=True)["meta_info"][
            "completion_tokens"] == 3


@pytest.fixture(scope="class")
def tiny_slo_servers(tiny_slo_server, sized_server):
    """The two TestAdaptive servers (the conftest's session fixtures say what each is)."""
    return {"tiny": tiny_slo_server, "sized": sized_server}


class TestAdaptive:
    def test_tiny_slo_uses_both_modes(self, tiny_slo_servers):
        srv = tiny_slo_servers["tiny"]  # both modes must appear
        for burst in range(3):
            run_all(srv, prompts(6, [150, 20, 90], seed=10 + burst), 12, ignore_eos=True)
        assert metric(srv, "iterations", mode="aggregated") > 0
        assert metric(srv, "iterations", mode="spatial") > 0
        modes = re.findall(r'duet-plan \{.*?"mode": "(\w+)"', srv.log(tail=0))
        assert {"aggregated", "spatial"} <= set(modes)


    def test_slo_sized_mixed_batches_run_exactly(self, tiny_slo_servers, duet_server):
        """#23 item 6: SLO-sized mixed batches (a prefill chunk the latency model sized to meet
        tau) on a real server give the tokens of plain aggregated mode and of transformers, stop
        and abort mid-run, and give the KV pool back (the `sized` server)."""
        srv = tiny_slo_servers["sized"]
        log = srv.plan_log
        longs, shorts = prompts(3, [50], seed=1), prompts(6, [150, 120, 90], seed=2)
        out: dict = {}

        def run(key, p, n, **kw):
            out[key] = srv.generate(p, n, **{"ignore_eos": True, **kw})["output_ids"]

        for i, lp in enumerate(longs):  # prompts arrive while a long request decodes
            t = threading.Thread(target=run, args=(("L", i), lp, 400))
            t.start()
            time.sleep(0.3)
            for j, sp in enumerate(shorts[2 * i:2 * i + 2]):
                run(("S", 2 * i + j), sp, 6)
            t.join(timeout=300)
        # mid-run: a stop token id inside a long answer, and a client gone mid-stream
        stop_at = out[("L", 0)][10]
        cut = threading.Thread(target=run, args=(("stop",), longs[0], 400),
                               kwargs={"stop_token_ids": [stop_at], "ignore_eos": False})
        cut.start()
        body = {"input_ids": longs[1], "stream": True,
                "sampling_params": {"max_new_tokens": 400, "temperature": 0, "ignore_eos": True}}
        with requests.post(srv.url + "/generate", json=body, stream=True, timeout=300) as r:
            for n, _ in enumerate(r.iter_lines()):
                if n == 1:
                    run(("S", "abort"), shorts[0], 6)  # sized beside it, then the client leaves
                if n > 20:
                    break
        cut.join(timeout=300)

        reasons = [json.loads(x)["reason"] for x in open(log + ".tp0.dp0")]
        assert sum("SLO-sized" in r for r in reasons) >= 3, sorted(set(reasons))
        ref = {k: duet_server.generate(p, 6, ignore_eos=True)["output_ids"]
               for k, p in enumerate(shorts)}
        for k in range(6):
            assert out[("S", k)] == ref[k]
        assert out[("S", "abort")] == ref[0]
        for k in (0, 3):
            assert out[("S", k)] == hf_greedy(shorts[k], 6)
        for i, lp in enumerate(longs):
            assert out[("L", i)] == duet_server.generate(lp, 400, ignore_eos=True)["output_ids"]
        got, first = out[("stop",)], out[("L", 0)].index(stop_at)  # (ignore_eos off: EOS may
        assert 0 < len(got) <= first + 1 and got == out[("L", 0)][:len(got)]  # come first)
        assert wait_idle_and_empty(srv) == 0


class TestTensorParallel:
    def test_tp2_equals_tp1_and_ranks_agree(self, tp2_server, duet_server):
        ps = prompts(12, MIXED, seed=6)
        tp2 = [r["output_ids"] for r in run_all(tp2_server, ps, 8, ignore_eos=True)]
        tp1 = [r["output_ids"] for r in run_all(duet_server, ps, 8, ignore_eos=True)]
        assert tp2 == tp1
        with open(tp2_server.plan_log + ".tp0.dp0") as f0, open(
                tp2_server.plan_log + ".tp1.dp0") as f1:
            r0 = [json.loads(x) for x in f0]
            r1 = [json.loads(x) for x in f1]
        for r in r0 + r1:  # each rank's own wall time; everything decided is the same
            assert r.pop("measured_s") > 0 and r.pop("end_s") > 0
        assert r0 and r0 == r1
        assert any(p["mode"] == "spatial" for p in r0)


class TestBadRequests:
    @pytest.mark.parametrize(
        "path, body, needle",
        [
            ("/generate", "{bad json", "JSON"),
            ("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": -3}},
             "max_new_tokens"),
            ("/generate", {"text": "hi", "foo": 1}, "unknown field"),
            ("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 2, "temprature": 0}},
             "unknown sampling parameter"),
            ("/generate", {"text": "word " * 5000, "sampling_params": {"max_new_tokens": 2}},
             "context length"),
            ("/v1/completions", {"model": "default", "prompt": "hi", "max_tokens": -1},
             "max_tokens"),
            ("/v1/completions", {"model": "default", "prompt": "hi", "max_token": 4},
             "unknown field"),
            ("/v1/chat/completions", {"model": "default", "messages": [
                {"role": "user", "content": "x"}], "tempreature": 0}, "unknown field"),
        ],
    )
    def test_4xx_with_reason_and_still_serving(self, duet_server, path, body, needle):
        data = body if isinstance(body, str) else json.dumps(body)
        r = requests.post(duet_server.url + path, data=data,
                          headers={"Content-Type": "application/json"}, timeout=60)
        assert 400 <= r.status_code < 500, r.text
        assert needle.lower() in r.text.lower()
        assert requests.get(duet_server.url + "/health", timeout=30).status_code == 200

