"""CPU serving settings: explicit flags win, TP thread binding."""

from __future__ import annotations

import argparse

from sglang_duet.cpu import CPU_SETTINGS, apply_cpu_settings, bind_cpu_threads


def test_settings_fill_only_what_the_user_did_not_give():
    ns = argparse.Namespace(**{k: None for k in CPU_SETTINGS})
    ns.max_total_tokens = 999
    applied = apply_cpu_settings(ns, {"max_total_tokens"})
    assert "max_total_tokens" not in applied and ns.max_total_tokens == 999
    assert ns.device == "cpu" and ns.attention_backend == "torch_native"
    assert set(applied) == set(CPU_SETTINGS) - {"max_total_tokens"}


def test_thread_binding_splits_cores_per_rank():
    env: dict[str, str] = {}
    assert bind_cpu_threads(1, env) is None and env == {}
    value = bind_cpu_threads(2, env)
    assert value == env["SGLANG_CPU_OMP_THREADS_BIND"]
    assert len(value.split("|")) == 2


def test_thread_binding_keeps_user_value():
    env = {"SGLANG_CPU_OMP_THREADS_BIND": "0|1"}
    assert bind_cpu_threads(2, env) is None and env["SGLANG_CPU_OMP_THREADS_BIND"] == "0|1"
