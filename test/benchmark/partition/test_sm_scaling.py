"""benchmark/partition/sm_scaling.py exits with a clear message where it cannot run."""

from __future__ import annotations

import pytest

from benchmark.partition import sm_scaling


def test_exits_with_reason_without_gpu(capsys, tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device exists")
    assert sm_scaling.main(["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "cannot run here" in err and "no CUDA device" in err
    assert not list(tmp_path.iterdir())


def test_cli_args_round_trip():
    import argparse

    p = argparse.ArgumentParser()
    sm_scaling.BenchArgs.add_cli_args(p)
    args = sm_scaling.BenchArgs.from_cli_args(p.parse_args(["--matmul-n", "4096"]))
    assert args.matmul_n == 4096 and args.copy_mib == 1024


def test_sizes_never_round_past_the_device():
    """H100/H200: 132 SMs is no multiple of 8; every size leaves a split's minimum over."""
    sizes = sm_scaling.scaling_sizes(132, 8, 8)
    assert sizes[0] == 8 and sizes[-1] == 120
    assert all(s % 8 == 0 and 132 - s >= 8 for s in sizes)
    assert sm_scaling.scaling_sizes(132, 8, 2)[-1] == 124
