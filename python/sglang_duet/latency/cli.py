"""`python -m sglang_duet.latency explain`: one batch's prediction, operator by operator."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import numpy as np

from .batch import Batch
from .calibration import Calibration
from .hardware import HARDWARE, get_hardware
from .model import MODELS, resolve_model
from .predictor import LatencyModel

_PREFILL = re.compile(r"^(\d+)(?:@(\d+))?$")
_DECODE = re.compile(r"^(\d+)x(\d+)$")
JSON_KEYS = ("total_s", "token_ops_s", "attention_s", "comm_s", "lm_head_s", "host_s", "flops",
             "bytes")


class UsageError(Exception):
    """Bad user input: reported as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line instead of usage + message
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_prefill(spec: str) -> tuple[int, int]:
    m = _PREFILL.match(spec.strip())
    if m is None or int(m.group(1)) == 0:
        raise UsageError(f"bad --prefill {spec!r}; accepted: Q or Q@C with Q >= 1 (e.g. 8192, "
                         "2048@4096)")
    return int(m.group(1)), int(m.group(2) or 0)


def parse_decode(spec: str) -> tuple[int, int]:
    m = _DECODE.match(spec.strip())
    if m is None or int(m.group(1)) == 0:
        raise UsageError(f"bad --decode {spec!r}; accepted: NxC with N >= 1 (e.g. 8x32768)")
    return int(m.group(1)), int(m.group(2))


def build_batch(prefills: Sequence[str], decodes: Sequence[str]) -> Batch:
    q: list[int] = []
    c: list[int] = []
    for spec in prefills:
        pq, pc = parse_prefill(spec)
        q.append(pq)
        c.append(pc)
    for spec in decodes:
        n, ctx = parse_decode(spec)
        q += [1] * n
        c += [ctx] * n
    if not q:
        raise UsageError("empty batch; give at least one --prefill Q[@C] or --decode NxC")
    return Batch(np.array(q, np.int64), np.array(c, np.int64))


def load_model(name: str, tp: int):
    if name not in MODELS and not Path(name).exists():
        raise UsageError(f"unknown model {name!r}; accepted: {', '.join(sorted(MODELS))} "
                         "or a path to a Hugging Face config.json")
    try:
        return resolve_model(name, tp)
    except (ValueError, OSError) as e:
        raise UsageError(f"model {name!r}: {e}") from None


def format_table(rows: list[dict[str, object]]) -> str:
    total = sum(float(r["seconds"]) for r in rows) or 1.0
    lines = [f"{'operator':<16}{'class':<14}{'count':>6}{'GFLOP':>12}{'GB':>10}"
             f"{'ms':>10}{'share':>8}  bound"]
    for r in rows:
        s = float(r["seconds"])
        lines.append(
            f"{r['name']!s:<16}{r['class']!s:<14}{r['count']!s:>6}{float(r['flops']) / 1e9:>12.1f}"
            f"{float(r['bytes']) / 1e9:>10.3f}{s * 1e3:>10.3f}{s / total:>8.1%}  {r['bound']}"
        )
    return "\n".join(lines)


def cmd_explain(args: argparse.Namespace) -> int:
    try:
        hw = get_hardware(args.hardware)  # a profile name or an alias (h100, a100)
    except ValueError as e:
        raise UsageError(str(e)) from None
    model = load_model(args.model, args.tp)
    if args.sms is not None and not (1 <= args.sms <= hw.num_sms):
        raise UsageError(f"bad --sms {args.sms}; accepted: 1..{hw.num_sms} on {hw.name}")
    cal = None
    if args.calibration:
        try:
            cal = Calibration.load(args.calibration)
        except (ValueError, OSError, TypeError) as e:
            raise UsageError(f"bad --calibration: {e}") from None
    batch = build_batch(args.prefill or (), args.decode or ())
    lm = LatencyModel(hw, model, cal)
    pred = lm.predict(batch, args.sms)
    if args.json:
        print(json.dumps({k: getattr(pred, k) for k in JSON_KEYS}))
        return 0
    sms = hw.usable_sms(args.sms)
    print(f"{model.name} tp={model.tp} on {hw.name}, {sms}/{hw.num_sms} SMs, calibration "
          f"{lm.calibration.name!r}: {batch.n} requests, {batch.tokens} tokens")
    print(format_table(lm.explain(batch, args.sms)))
    print(f"total {pred.total_s * 1e3:.3f} ms  (token ops {pred.token_ops_s * 1e3:.3f}, attention "
          f"{pred.attention_s * 1e3:.3f}, comm {pred.comm_s * 1e3:.3f}, LM head "
          f"{pred.lm_head_s * 1e3:.3f}, host {pred.host_s * 1e3:.3f}); "
          f"{pred.flops / 1e12:.2f} TFLOP, {pred.bytes / 1e9:.2f} GB")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m sglang_duet.latency", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=Parser)
    e = sub.add_parser("explain", help="predict one batch and show the per-operator breakdown")
    e.add_argument("--model", required=True, help=f"one of {', '.join(sorted(MODELS))} or a "
                   "Hugging Face config path")
    e.add_argument("--hardware", required=True, help=f"one of {', '.join(sorted(HARDWARE))}")
    e.add_argument("--tp", type=int, default=1)
    e.add_argument("--sms", type=int, default=None, help="SMs of the partition (default: all)")
    e.add_argument("--calibration", default=None, help="calibration name or JSON path")
    e.add_argument("--prefill", action="append", metavar="Q[@C]",
                   help="one request with q=Q new tokens after C cached (repeatable)")
    e.add_argument("--decode", action="append", metavar="NxC",
                   help="N decode requests with C cached tokens each (repeatable)")
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.set_defaults(func=cmd_explain)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UsageError as e:
        print(f"python -m sglang_duet.latency {args.cmd}: error: {e}", file=sys.stderr)
        return 2
