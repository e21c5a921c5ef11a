"""SGLang 0.5.17's own server test kits (shipped in its wheel, `sglang/test/kits`) run against any
server URL: the verdict of every kit test. Used by the suite (test/server/test_sglang_kits.py,
against sglang-duet) and by `benchmark.serving.clients --kits` (sglang-duet and stock side by
side). SGLang is imported only when the kits run."""

from __future__ import annotations

import contextlib
import io
import unittest

__all__ = ["kit_classes", "run_kits"]


class _Alive:
    """The kits read `self.process.poll()`; the test checks the real process itself."""

    def poll(self):
        return None


def kit_classes() -> list[type]:
    from sglang.test.kits.abort_timeout_kit import AbortAllMixin
    from sglang.test.kits.basic_api_contract_kit import BasicAPIContractMixin
    from sglang.test.kits.ebnf_constrained_kit import EBNFConstrainedMixin
    from sglang.test.kits.json_constrained_kit import JSONConstrainedMixin
    from sglang.test.kits.matched_stop_kit import MatchedStopMixin
    from sglang.test.kits.regex_constrained_kit import RegexConstrainedMixin

    return [BasicAPIContractMixin, MatchedStopMixin, AbortAllMixin, JSONConstrainedMixin,
            RegexConstrainedMixin, EBNFConstrainedMixin]


def run_kits(url: str, skip: dict[str, str]) -> dict[str, str]:
    """kit.test -> 'pass' | 'fail: ...' | 'error: ...' for every kit test not in `skip`."""
    verdicts = {}
    for mixin in kit_classes():
        case = type(f"Kit{mixin.__name__}", (mixin, unittest.TestCase),
                    {"base_url": url, "process": _Alive(), "model": "default"})
        for test in unittest.TestLoader().loadTestsFromTestCase(case):
            name = test._testMethodName
            if name in skip:
                continue
            result = unittest.TestResult()
            with contextlib.redirect_stdout(io.StringIO()):  # the kits print every response
                test.run(result)
            bad = result.failures or result.errors
            why = bad[0][1].strip().splitlines()[-1][:200] if bad else ""
            kind = "pass" if not bad else "fail" if result.failures else "error"
            verdicts[f"{mixin.__name__}.{name}"] = kind + (f": {why}" if why else "")
    return verdicts
