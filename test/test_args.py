"""DuetArgs: the --duet-* flags generated from the dataclass, defaults and every bad value."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from sglang_duet.args import HARDWARE_CHOICES, MODES, PARTITION_BACKENDS, DuetArgError, DuetArgs
from sglang_duet.policy.admission import ADMISSION_ORDERS, AdmissionConfig


def parse(argv: list[str]) -> DuetArgs:
    p = argparse.ArgumentParser()
    DuetArgs.add_cli_args(p)
    return DuetArgs.from_cli_args(p.parse_args(argv))


class TestDefaults:
    def test_defaults(self):
        a = parse([])
        assert a == DuetArgs()
        assert (a.mode, a.tbt_slo_ms, a.partition_backend, a.max_lookahead, a.hardware) == (
            "adaptive", 100.0, "auto", 16, "auto")
        assert a.tbt_slo_s == pytest.approx(0.1)

    def test_every_field_has_a_prefixed_flag_with_help(self):
        p = argparse.ArgumentParser()
        DuetArgs.add_cli_args(p)
        flags = {o for a in p._actions for o in a.option_strings}
        for f in dataclasses.fields(DuetArgs):
            assert DuetArgs.flag(f.name) in flags
            assert f.metadata["help"]

    def test_frozen(self):
        with pytest.raises(dataclasses.FrozenInstanceError):
            DuetArgs().mode = "spatial"  # type: ignore[misc]


class TestParsing:
    @pytest.mark.parametrize("mode", MODES)
    def test_modes(self, mode):
        assert parse(["--duet-mode", mode]).mode == mode

    @pytest.mark.parametrize("backend", PARTITION_BACKENDS)
    def test_backends(self, backend):
        assert parse(["--duet-partition-backend", backend]).partition_backend == backend

    @pytest.mark.parametrize("hw", HARDWARE_CHOICES)
    def test_hardware(self, hw):
        assert parse([f"--duet-hardware={hw}"]).hardware == hw

    def test_numbers_and_bools(self):
        a = parse(["--duet-tbt-slo-ms", "42.5", "--duet-max-lookahead", "2",
                   "--no-duet-online-correction", "--duet-calibration", "x.json"])
        assert (a.tbt_slo_ms, a.max_lookahead, a.online_correction, a.calibration) == (
            42.5, 2, False, "x.json")


class TestAdmission:
    """#48: the admission order's flags, read back as the policy's AdmissionConfig."""

    def test_defaults(self):
        a = parse([])
        assert (a.admission, a.ttft_slo_ms, a.ttft_per_token_ms, a.aging) == (
            "deadline", 10000.0, 0.0, 3.0)

    @pytest.mark.parametrize("order", ADMISSION_ORDERS)
    def test_orders(self, order):
        assert parse(["--duet-admission", order]).admission == order

    def test_config_in_seconds(self):
        a = parse(["--duet-admission", "sjf", "--duet-ttft-slo-ms", "2500",
                   "--duet-ttft-per-token-ms", "0.25", "--duet-aging", "2"])
        assert a.admission_config == AdmissionConfig("sjf", 2.5, 0.00025, 2.0)


class TestBadValues:
    @pytest.mark.parametrize(
        "argv, flag, accepted",
        [
            (["--duet-mode", "fast"], "--duet-mode", "adaptive, aggregated, spatial"),
            (["--duet-partition-backend", "mps"], "--duet-partition-backend",
             "auto, green-ctx, libsmctrl, none"),
            (["--duet-hardware", "b200"], "--duet-hardware", "auto, h100-sxm"),
            (["--duet-tbt-slo-ms", "0"], "--duet-tbt-slo-ms", "must be > 0"),
            (["--duet-tbt-slo-ms", "-5"], "--duet-tbt-slo-ms", "must be > 0"),
            (["--duet-tbt-slo-ms", "soon"], "--duet-tbt-slo-ms", "expected float"),
            (["--duet-max-lookahead", "0"], "--duet-max-lookahead", "must be >= 1"),
            (["--duet-max-lookahead", "2.5"], "--duet-max-lookahead", "expected int"),
            (["--duet-admission", "edf"], "--duet-admission", "fcfs, deadline, sjf"),
            (["--duet-ttft-slo-ms", "0"], "--duet-ttft-slo-ms", "must be > 0"),
            (["--duet-ttft-slo-ms", "inf"], "--duet-ttft-slo-ms", "finite"),
            (["--duet-ttft-per-token-ms", "-0.5"], "--duet-ttft-per-token-ms", "must be >= 0"),
            (["--duet-aging", "0"], "--duet-aging", "must be > 0"),
            (["--duet-aging", "-1"], "--duet-aging", "must be > 0"),
        ],
    )
    def test_message_names_flag_and_accepted_values(self, argv, flag, accepted):
        with pytest.raises(DuetArgError) as e:
            parse(argv)
        assert flag in str(e.value) and accepted in str(e.value)


class TestIssue16Flags:
    """#16 item 8/9: non-finite times rejected, choices from the registries, defaults in --help."""

    @pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "Infinity"])
    def test_non_finite_slo_rejected(self, value):
        with pytest.raises(DuetArgError) as e:
            parse([f"--duet-tbt-slo-ms={value}"])
        assert "--duet-tbt-slo-ms" in str(e.value) and "finite" in str(e.value)

    def test_non_finite_rejected_when_built_directly(self):
        with pytest.raises(DuetArgError, match="finite"):
            DuetArgs(tbt_slo_ms=float("nan"))

    def test_choices_come_from_the_registries(self):
        from sglang_duet.latency import HARDWARE
        from sglang_duet.partition import BACKEND_NAMES
        from sglang_duet.policy import POLICY_MODES

        assert MODES == tuple(POLICY_MODES)
        assert PARTITION_BACKENDS == tuple(BACKEND_NAMES)
        assert set(HARDWARE) <= set(HARDWARE_CHOICES)

    def test_help_shows_every_default(self):
        p = argparse.ArgumentParser()
        DuetArgs.add_cli_args(p)
        text = " ".join(p.format_help().split())
        for f in dataclasses.fields(DuetArgs):
            assert f"default: {f.default}" in text, f.name
