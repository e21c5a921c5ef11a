"""A batch of requests as (q, c) arrays; its model-independent sums are computed on first use."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain

import numpy as np

from .fast.rows import NO_ROWS, SMALL, KernelRows, decode_steps, kernel_rows, ones, rows_py


@dataclass(frozen=True, eq=False, init=False)
class Batch:
    """Requests of one forward iteration.

    q[i]: new tokens of request i this iteration (a prefill chunk, or 1 for a decode);
    c[i]: tokens of request i already in the KV cache; sample[i]: whether row i produces a token
    (runs through the LM head). Default `sample`: every request with q > 0 samples.

    Rows with q == 1 use the decode attention kernel, longer rows the prefill kernel. Derived
    values are computed on first use and kept, so repeated predictions (one per SM split) pay
    only for the model-dependent arithmetic; `LatencyModel` keeps its per-batch preparation in
    `memo`, per model instance. Treat the arrays as read-only.
    """

    q: np.ndarray
    c: np.ndarray
    sample: np.ndarray | None = None
    memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __init__(self, q: np.ndarray | Sequence[int], c: np.ndarray | Sequence[int],
                 sample: np.ndarray | Sequence[bool] | None = None) -> None:
        q = np.asarray(q, dtype=np.int64)
        c = np.asarray(c, dtype=np.int64)
        if q.ndim != 1:
            q = q.reshape(-1)
        if c.ndim != 1:
            c = c.reshape(-1)
        if q.shape != c.shape:
            raise ValueError(f"q and c differ in length: {q.size} vs {c.size}")
        d = self.__dict__  # set once here; the batch is frozen afterwards
        if q.size < SMALL:  # few rows (prefill chunks): scan them once in Python
            ql, cl = q.tolist(), c.tolist()
            if ql and (min(ql) < 0 or min(cl) < 0):
                raise ValueError("q and c must be >= 0")
            d["kernels"] = rows_py(ql, cl)  # the cached_property's slot
        elif q.min() < 0 or c.min() < 0:
            raise ValueError("q and c must be >= 0")
        if sample is None:
            sample = q > 0
        else:
            sample = np.asarray(sample, dtype=bool)
            if sample.ndim != 1:
                sample = sample.reshape(-1)
            if sample.shape != q.shape:
                raise ValueError("sample must have one entry per request")
        if q.size < SMALL:
            d["n_sample"] = sum(sample.tolist())
        d["q"], d["c"], d["sample"], d["memo"] = q, c, sample, {}

    @cached_property
    def kernels(self) -> tuple[KernelRows, KernelRows]:
        """(decode rows, prefill rows) as exact integer sums."""
        return kernel_rows(self.q, self.c)

    @cached_property
    def n(self) -> int:
        return int(self.q.size)

    @cached_property
    def tokens(self) -> int:
        """sum(q): rows of every token-level operator."""
        return self.kernels[0].q + self.kernels[1].q

    @cached_property
    def n_sample(self) -> int:
        """Rows of the LM head."""
        return int(np.count_nonzero(self.sample))

    @cached_property
    def n_decode(self) -> int:
        return self.kernels[0].n

    @cached_property
    def attended_sum(self) -> float:
        return float(self.kernels[0].attended + self.kernels[1].attended)

    @cached_property
    def kv_sum(self) -> float:
        return float(self.kernels[0].kv + self.kernels[1].kv)

    def __len__(self) -> int:
        return self.n

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[int, int]]) -> Batch:
        seq = pairs if isinstance(pairs, Sequence) else list(pairs)
        flat = np.fromiter(chain.from_iterable(seq), dtype=np.int64)
        if flat.size != 2 * len(seq):
            raise ValueError("a batch is a sequence of (q, c) pairs")
        arr = flat.reshape(-1, 2)
        return cls(arr[:, 0], arr[:, 1])

    @classmethod
    def decode(cls, n: int, context: int) -> Batch:
        """`n` decode requests, each with `context` tokens cached."""
        return cls(np.ones(n, np.int64), np.full(n, context, np.int64))

    @classmethod
    def prefill(cls, q: int, c: int = 0) -> Batch:
        """One prefill (chunk) of `q` tokens after `c` cached ones."""
        return cls(np.array([q], np.int64), np.array([c], np.int64))

    @classmethod
    def decode_steps(cls, contexts: Sequence[int] | np.ndarray, offset: int = 0) -> Batch:
        """One decode step (q = 1, sampling) of each request, with ``contexts[i] + offset``
        tokens cached: ``Batch(ones, contexts + offset)``, built faster."""
        c, dec = decode_steps(contexts, offset)
        n = int(c.size)
        if n and dec.c_min < 0:
            raise ValueError("q and c must be >= 0")
        return cls._trusted(ones(n, np.int64), c, ones(n, bool), kernels=(dec, NO_ROWS), n=n,
                            n_sample=n)

    @classmethod
    def few(cls, q: list[int], c: list[int], sample: list[bool]) -> Batch:
        """``Batch(q, c, sample)`` from Python lists of equal length (a plan's prefill chunks):
        the same batch, sooner, since a few rows' sums come from the lists themselves."""
        n = len(q)
        if n >= SMALL or len(c) != n or len(sample) != n:
            return cls(q, c, sample)
        if n and (min(q) < 0 or min(c) < 0):
            raise ValueError("q and c must be >= 0")
        return cls._trusted(np.array(q, np.int64), np.array(c, np.int64), np.array(sample, bool),
                            kernels=rows_py(q, c), n=n, n_sample=sum(sample))

    @classmethod
    def _trusted(cls, q: np.ndarray, c: np.ndarray, sample: np.ndarray, **derived: object
                 ) -> Batch:
        """A batch from normalised arrays (int64, int64, bool; equal lengths), skipping checks;
        `derived` pre-fills cached values."""
        b = object.__new__(cls)
        d = b.__dict__
        d["q"], d["c"], d["sample"], d["memo"] = q, c, sample, {}
        d.update(derived)
        return b

    def concat(self, other: Batch) -> Batch:
        (d1, p1), (d2, p2) = self.kernels, other.kernels
        return Batch._trusted(
            np.concatenate([self.q, other.q]), np.concatenate([self.c, other.c]),
            np.concatenate([self.sample, other.sample]),
            kernels=(d1.merged(d2), p1.merged(p2)), n_sample=self.n_sample + other.n_sample)

    def pairs(self) -> list[tuple[int, int]]:
        return list(zip(self.q.tolist(), self.c.tolist(), strict=True))


BatchLike = Batch | Sequence[tuple[int, int]]


def as_batch(batch: BatchLike | None) -> Batch:
    """A Batch from a Batch, a sequence of (q, c) pairs, or None (empty)."""
    if isinstance(batch, Batch):
        return batch
    return Batch.from_pairs(() if batch is None else batch)
