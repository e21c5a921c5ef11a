"""A batch of requests as (q, c) arrays, with the model-independent sums precomputed once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain

import numpy as np


@dataclass(frozen=True, eq=False)
class Batch:
    """Requests of one forward iteration.

    q[i]: new tokens of request i this iteration (a prefill chunk, or 1 for a decode);
    c[i]: tokens of request i already in the KV cache; sample[i]: whether row i produces a token
    (runs through the LM head). Default `sample`: every request with q > 0 samples.

    Rows with q == 1 use the decode attention kernel, longer rows the prefill kernel. The derived
    arrays below are computed at construction so repeated predictions (e.g. one per SM split)
    pay only for the model-dependent arithmetic.
    """

    q: np.ndarray
    c: np.ndarray
    sample: np.ndarray | None = None
    # derived (not init arguments)
    n: int = field(init=False)
    tokens: int = field(init=False)  # sum(q): rows of every token-level operator
    n_sample: int = field(init=False)  # rows of the LM head
    n_decode: int = field(init=False)
    is_decode: np.ndarray = field(init=False, repr=False)
    qf: np.ndarray = field(init=False, repr=False)  # q as float64
    kvf: np.ndarray = field(init=False, repr=False)  # c + q: keys each request's kernel reads
    attended: np.ndarray = field(init=False, repr=False)  # sum over new tokens of keys attended
    attended_sum: float = field(init=False)
    kv_sum: float = field(init=False)

    def __post_init__(self) -> None:
        q = np.asarray(self.q, dtype=np.int64).reshape(-1)
        c = np.asarray(self.c, dtype=np.int64).reshape(-1)
        if q.shape != c.shape:
            raise ValueError(f"q and c differ in length: {q.size} vs {c.size}")
        if q.size and (q.min() < 0 or c.min() < 0):
            raise ValueError("q and c must be >= 0")
        if self.sample is None:
            sample = q > 0
        else:
            sample = np.asarray(self.sample, dtype=bool).reshape(-1)
            if sample.shape != q.shape:
                raise ValueError("sample must have one entry per request")
        qf = q.astype(np.float64)
        cf = c.astype(np.float64)
        # Causal attention with a cache: new token j (0-based) sees c + j + 1 keys.
        attended = qf * cf + qf * (qf + 1.0) * 0.5
        kvf = np.where(q > 0, cf + qf, 0.0)  # a row with no new tokens runs no kernel
        is_decode = q == 1
        derived = {
            "q": q,
            "c": c,
            "sample": sample,
            "n": int(q.size),
            "tokens": int(q.sum()),
            "n_sample": int(np.count_nonzero(sample)),
            "n_decode": int(np.count_nonzero(is_decode)),
            "is_decode": is_decode,
            "qf": qf,
            "kvf": kvf,
            "attended": attended,
            "attended_sum": float(attended.sum()),
            "kv_sum": float(kvf.sum()),
        }
        for key, value in derived.items():
            object.__setattr__(self, key, value)  # NOTE: derived, set once; the batch is frozen

    def __len__(self) -> int:
        return self.n

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[int, int]]) -> Batch:
        seq = pairs if isinstance(pairs, Sequence) else list(pairs)
        # fromiter: ~2x faster than np.asarray on a list of tuples
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

    def concat(self, other: Batch) -> Batch:
        return Batch(
            np.concatenate([self.q, other.q]),
            np.concatenate([self.c, other.c]),
            np.concatenate([self.sample, other.sample]),
        )

    def pairs(self) -> list[tuple[int, int]]:
        return list(zip(self.q.tolist(), self.c.tolist(), strict=True))


BatchLike = Batch | Sequence[tuple[int, int]]


def as_batch(batch: BatchLike | None) -> Batch:
    """A Batch from a Batch, a sequence of (q, c) pairs, or None (empty)."""
    if isinstance(batch, Batch):
        return batch
    if batch is None:
        return Batch.from_pairs(())
    return Batch.from_pairs(batch)
