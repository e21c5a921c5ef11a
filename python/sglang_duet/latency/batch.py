"""A batch of requests as (q, c) arrays; its model-independent sums are computed on first use."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain

import numpy as np

_SMALL = 24  # below this many rows, Python integer loops beat numpy's per-call overhead


@dataclass(frozen=True, slots=True)
class KernelRows:
    """The rows of one attention kernel (decode: q == 1; prefill: q >= 2) as exact integer sums.

    The sums are Python ints, so they do not depend on row order: a batch predicts the same, bit
    for bit, however it was assembled (built from pairs, concatenated, reordered).
    """

    n: int
    q: int  # sum of q
    kv: int  # sum of c + q: keys the kernel reads
    attended: int  # sum of q*c + q*(q+1)/2: keys attended by the new tokens
    q_rows: Sequence[int] | np.ndarray  # per-row q and c (for the rare mixed-bound split)
    c_rows: Sequence[int] | np.ndarray
    c_min: int = 0
    c_max: int = 0

    def merged(self, other: KernelRows) -> KernelRows:
        if not other.n:
            return self
        if not self.n:
            return other
        return KernelRows(
            self.n + other.n, self.q + other.q, self.kv + other.kv,
            self.attended + other.attended,
            np.concatenate([np.asarray(self.q_rows, np.int64), np.asarray(other.q_rows, np.int64)]),
            np.concatenate([np.asarray(self.c_rows, np.int64), np.asarray(other.c_rows, np.int64)]),
            min(self.c_min, other.c_min), max(self.c_max, other.c_max),
        )  # fmt: skip


NO_ROWS = KernelRows(0, 0, 0, 0, (), ())


def _decode_rows(c: np.ndarray) -> KernelRows:
    """Decode rows (q = 1) with cached contexts `c`: attended = keys read = c + 1."""
    n = int(c.size)
    if not n:
        return NO_ROWS
    kv = int(c.sum()) + n
    return KernelRows(n, n, kv, kv, np.ones(n, np.int64), c, int(c.min()), int(c.max()))


def _rows_py(qs: list[int], cs: list[int]) -> tuple[KernelRows, KernelRows]:
    dq: list[int] = []
    dc: list[int] = []
    pq: list[int] = []
    pc: list[int] = []
    for qi, ci in zip(qs, cs, strict=True):
        if qi == 1:
            dq.append(qi)
            dc.append(ci)
        elif qi > 1:
            pq.append(qi)
            pc.append(ci)
    dec = NO_ROWS
    if dc:
        kv = sum(dc) + len(dc)
        dec = KernelRows(len(dc), len(dc), kv, kv, dq, dc, min(dc), max(dc))
    pre = NO_ROWS
    if pc:
        att = sum(qi * ci + qi * (qi + 1) // 2 for qi, ci in zip(pq, pc, strict=True))
        sq = sum(pq)
        pre = KernelRows(len(pc), sq, sum(pc) + sq, att, pq, pc, min(pc), max(pc))
    return dec, pre


def kernel_rows(q: np.ndarray, c: np.ndarray) -> tuple[KernelRows, KernelRows]:
    """(decode rows, prefill rows) of a batch; rows with q == 0 run no kernel."""
    if q.size < _SMALL:
        return _rows_py(q.tolist(), c.tolist())
    is_dec = q == 1
    dec = _decode_rows(c[is_dec])
    is_pre = q > 1
    if not is_pre.any():
        return dec, NO_ROWS
    pq, pc = q[is_pre], c[is_pre]
    sq = int(pq.sum())
    att = int((pq * pc).sum()) + int((pq * (pq + 1) // 2).sum())
    pre = KernelRows(int(pq.size), sq, int(pc.sum()) + sq, att, pq, pc, int(pc.min()),
                     int(pc.max()))
    return dec, pre


@dataclass(frozen=True, eq=False)
class Batch:
    """Requests of one forward iteration.

    q[i]: new tokens of request i this iteration (a prefill chunk, or 1 for a decode);
    c[i]: tokens of request i already in the KV cache; sample[i]: whether row i produces a token
    (runs through the LM head). Default `sample`: every request with q > 0 samples.

    Rows with q == 1 use the decode attention kernel, longer rows the prefill kernel. Derived
    values (sums, per-row arrays) are computed on first use and kept, so repeated predictions
    (e.g. one per SM split) pay only for the model-dependent arithmetic. `LatencyModel` keeps its
    per-batch preparation in `memo` (keyed per model instance).
    """

    q: np.ndarray
    c: np.ndarray
    sample: np.ndarray | None = None
    memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

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
        object.__setattr__(self, "q", q)  # NOTE: normalised once; the batch is frozen
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "sample", sample)

    # --- derived, computed on first use --------------------------------------------------------
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
        dec, pre = self.kernels
        return dec.q + pre.q

    @cached_property
    def n_sample(self) -> int:
        """Rows of the LM head."""
        return int(np.count_nonzero(self.sample))

    @cached_property
    def n_decode(self) -> int:
        return self.kernels[0].n

    @cached_property
    def is_decode(self) -> np.ndarray:
        return self.q == 1

    @cached_property
    def qf(self) -> np.ndarray:
        """q as float64."""
        return self.q.astype(np.float64)

    @cached_property
    def kvf(self) -> np.ndarray:
        """c + q: keys each request's kernel reads (0 for a row with no new tokens)."""
        return np.where(self.q > 0, self.c + self.qf, 0.0)

    @cached_property
    def attended(self) -> np.ndarray:
        """Per row, the sum over new tokens of keys attended (token j sees c + j + 1 keys)."""
        qf = self.qf
        return qf * self.c.astype(np.float64) + qf * (qf + 1.0) * 0.5

    @cached_property
    def attended_sum(self) -> float:
        dec, pre = self.kernels
        return float(dec.attended + pre.attended)

    @cached_property
    def kv_sum(self) -> float:
        dec, pre = self.kernels
        return float(dec.kv + pre.kv)

    def __len__(self) -> int:
        return self.n

    # --- constructors --------------------------------------------------------------------------
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

    @classmethod
    def decode_steps(cls, contexts: Sequence[int] | np.ndarray) -> Batch:
        """One decode step (q = 1, sampling) of each request, with `contexts[i]` tokens cached.
        Equal to ``Batch(ones, contexts)``, built without the general path's scans."""
        c = np.asarray(contexts, dtype=np.int64).reshape(-1)
        n = int(c.size)
        dec = _decode_rows(c)
        if n and dec.c_min < 0:
            raise ValueError("q and c must be >= 0")
        return cls._trusted(dec.q_rows if n else np.ones(0, np.int64), c, np.ones(n, bool),
                            kernels=(dec, NO_ROWS), n=n, n_sample=n)

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
            np.concatenate([self.q, other.q]),
            np.concatenate([self.c, other.c]),
            np.concatenate([self.sample, other.sample]),
            kernels=(d1.merged(d2), p1.merged(p2)),
            n_sample=self.n_sample + other.n_sample,
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
