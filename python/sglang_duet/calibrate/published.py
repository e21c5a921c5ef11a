"""Published GPU measurements (benchmark/latency_model/published/reference.csv) as samples.

Each row is one measurement someone else published, with its source; its README says how
end-to-end figures were turned into iteration times. `read_published` checks every row (a row
without a source is an error, not a gap); `PublishedRow.sample` turns a row the model can be
held to into a calibration `Sample`, and `PublishedRow.excluded` says why the others cannot be:
bounds and ratios, several iterations, fp8, time-to-first-token with the request path in it.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass

import numpy as np

from ..latency.batch import Batch
from ..latency.model import MODELS, ModelSpec
from .samples import Sample

REQUIRED = ("id", "model", "gpu", "precision", "tp", "phase", "prefill_tokens", "decode_batch",
            "context_tokens", "iteration_ms", "end_to_end", "source")
# Llama-3-8B has Llama-3.1-8B's shape (meta-llama config.json: 32 layers, 4096 hidden, 8 KV
# heads, 14336 MLP, 128256 vocab); "LLaMA 7B" of the TensorRT-LLM tables is Llama-2-7B
# (meta-llama/Llama-2-7b-hf config.json: 32 layers, 4096 hidden, 32 heads = 32 KV heads of
# 128, 11008 MLP, 32000 vocab).
SHAPES: dict[str, ModelSpec] = {
    "llama-3-8b": MODELS["llama-3.1-8b"],
    "llama-2-7b": ModelSpec("llama-2-7b", 32, 4096, 32, 32, 128, 11008, 32000, False, 2),
}
_STEPS = re.compile(r"/\s*(\d+)\s+tokens per chunk")  # multi-step scheduling (README: lam-*)


@dataclass(frozen=True)
class PublishedRow:
    id: str
    model: str
    gpu: str
    precision: str
    tp: int
    phase: str  # prefill or decode
    prefill_tokens: int
    decode_batch: int
    context_tokens: int
    iteration_ms: float | None
    end_to_end: bool
    metric: str
    conversion: str
    notes: str
    source: str

    def shape(self) -> ModelSpec | None:
        spec = SHAPES.get(self.model) or MODELS.get(self.model)
        return spec.sharded(self.tp) if spec is not None else None

    def batch(self) -> Batch:
        """The iteration: a prefill of `prefill_tokens` after `context_tokens` (of
        `decode_batch` such prompts when that is set), or `decode_batch` decodes each with
        `context_tokens` cached."""
        if self.phase == "prefill":
            n = max(1, self.decode_batch)
            return Batch([self.prefill_tokens] * n, [self.context_tokens] * n)
        return Batch.decode(self.decode_batch, self.context_tokens)

    def cpu_share(self) -> float:
        """CPU-scheduled iterations per measured pass: 0 for engine-level timings (no serving
        loop), 1/N when the server ran N decode steps per scheduler call, else 1."""
        if not self.end_to_end:
            return 0.0
        m = _STEPS.search(self.conversion)
        return 1.0 / int(m.group(1)) if m else 1.0

    def excluded(self) -> str | None:
        """Why the model cannot be held to this row as one iteration; None if it can."""
        text = f"{self.metric} {self.notes}".upper()
        if self.iteration_ms is None:
            return "no absolute time (a ratio)"
        if "INEQUALITY" in text:
            return "a bound, not a value"
        if "MULTI-ITERATION" in self.conversion.upper() or "NOT A SINGLE ITERATION" in text:
            return "several iterations (chunked prefill of a whole prompt)"
        if self.precision not in ("bf16", "fp16"):
            return f"{self.precision}: the hardware profiles hold bf16/fp16 rates only"
        if "TTFT" in text:
            return "time to first token: the request path (HTTP, tokenizer, queue) is in it"
        if self.shape() is None:
            return f"no shape for model {self.model!r}"
        return None

    def sample(self) -> Sample:
        spec = self.shape()
        if spec is None or self.iteration_ms is None:
            raise ValueError(f"{self.id}: {self.excluded()}")
        return Sample(self.gpu, spec, self.tp, None, self.batch(), self.iteration_ms / 1e3,
                      cpu_share=self.cpu_share())


def _int(raw: str) -> int:
    return int(raw) if raw.strip() else 0


def read_published(path: str | os.PathLike) -> list[PublishedRow]:
    """Rows of a published-measurements CSV; ValueError naming the line of a bad row (missing
    source, unknown phase, bad number)."""
    out: list[PublishedRow] = []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = set(REQUIRED) - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing columns {', '.join(sorted(missing))}")
        for lineno, r in enumerate(reader, start=2):
            try:
                out.append(_row(r))
            except ValueError as e:
                raise ValueError(f"{path}:{lineno}: {e}") from None
    if not out:
        raise ValueError(f"{path}: no rows")
    return out


def _row(r: dict[str, str]) -> PublishedRow:
    rid = (r.get("id") or "").strip()
    if not (r.get("source") or "").strip():
        raise ValueError(f"row {rid or '?'} has no source")
    phase = r["phase"].strip()
    if phase not in ("prefill", "decode"):
        raise ValueError(f"row {rid}: phase {phase!r}; accepted: prefill, decode")
    ms = (r.get("iteration_ms") or "").strip()
    row = PublishedRow(
        rid, r["model"].strip(), r["gpu"].strip(), r["precision"].strip(), int(r["tp"]), phase,
        _int(r["prefill_tokens"]), _int(r["decode_batch"]), _int(r["context_tokens"]),
        float(ms) if ms else None, r["end_to_end"].strip() == "yes",
        r.get("metric") or "", r.get("conversion") or "", r.get("notes") or "", r["source"])
    if row.iteration_ms is not None and not row.iteration_ms > 0:
        raise ValueError(f"row {rid}: iteration_ms must be > 0")
    if (phase == "prefill" and row.prefill_tokens < 1) or (phase == "decode"
                                                            and row.decode_batch < 1):
        raise ValueError(f"row {rid}: a {phase} row needs its batch shape")
    return row


def usable(rows: list[PublishedRow], gpus: tuple[str, ...] | None = None) -> list[PublishedRow]:
    """Rows the model can be held to (optionally only on `gpus`)."""
    return [r for r in rows if r.excluded() is None and (gpus is None or r.gpu in gpus)]


def chunk_chain(prompt: int, chunk: int) -> list[Batch]:
    """The iterations of one prompt's chunked prefill: chunks of `chunk` tokens, each after the
    tokens before it."""
    starts = np.arange(0, prompt, chunk)
    return [Batch.prefill(int(min(chunk, prompt - s)), int(s)) for s in starts]
