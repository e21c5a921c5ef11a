"""A batch of requests as (q, c) arrays; its model-independent sums are computed on first use."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain

import numpy as np

_SMALL = 24  # below this many rows, Python integer loops beat numpy's per-call overhead
_PY_STATS = 160  # below this many decodes, sum/min/max of a list beat three numpy reductions


class KernelRows:
    """The rows of one attention kernel (decode: q == 1; prefill: q >= 2) as exact integer sums.

    The sums are Python ints, so they do not depend on row order: a batch predicts the same, bit
    for bit, however it was assembled (built from pairs, concatenated, reordered). Treat as
    immutable; `memo` holds per-model derivations.
    """

    __slots__ = ("n", "q", "kv", "attended", "q_rows", "c_rows", "c_min", "c_max", "memo")

    def __init__(self, n: int, q: int, kv: int, attended: int,
                 q_rows: Sequence[int] | np.ndarray, c_rows: Sequence[int] | np.ndarray,
                 c_min: int = 0, c_max: int = 0) -> None:
        self.n = n  # rows
        self.q = q  # sum of q
        self.kv = kv  # sum of c + q: keys the kernel reads
        self.attended = attended  # sum of q*c + q*(q+1)/2: keys attended by the new tokens
        self.q_rows = q_rows  # per-row q and c (for the rare mixed-bound split)
        self.c_rows = c_rows
        self.c_min = c_min  # extreme contexts (the decode rows' compute/memory ratio grows
        self.c_max = c_max  # with c)
        self.memo: dict = {}

    def __repr__(self) -> str:
        return (f"KernelRows(n={self.n}, q={self.q}, kv={self.kv}, attended={self.attended}, "
                f"c_min={self.c_min}, c_max={self.c_max})")

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


_ONES: dict[tuple[int, type], np.ndarray] = {}


def _ones(n: int, dtype: type) -> np.ndarray:
    """A shared read-only array of n ones (decode batches' q and sample)."""
    arr = _ONES.get((n, dtype))
    if arr is None:
        if len(_ONES) > 256:
            _ONES.clear()
        arr = _ONES[(n, dtype)] = np.ones(n, dtype)
        arr.flags.writeable = False
    return arr


def _decode_rows(c: np.ndarray) -> KernelRows:
    """Decode rows (q = 1) with cached contexts `c`: attended = keys read = c + 1."""
    n = int(c.size)
    if not n:
        return NO_ROWS
    kv = int(c.sum()) + n
    return KernelRows(n, n, kv, kv, _ones(n, np.int64), c, int(c.min()), int(c.max()))


def _rows_py(qs: list[int], cs: list[int]) -> tuple[KernelRows, KernelRows]:
    if qs and 1 not in qs and 0 not in qs:  # prefill chunks only (the usual small batch)
        sq = sum(qs)
        att = sum([qi * ci + qi * (qi + 1) // 2 for qi, ci in zip(qs, cs, strict=True)])
        return NO_ROWS, KernelRows(len(qs), sq, sum(cs) + sq, att, qs, cs, min(cs), max(cs))
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
    is_pre = q > 1
    n_pre = int(np.count_nonzero(is_pre))
    if n_pre == 0 and q.min() == 1:  # decodes only
        return _decode_rows(c), NO_ROWS
    dec = _decode_rows(c[q == 1])
    if n_pre == 0:
        return dec, NO_ROWS
    pq, pc = q[is_pre], c[is_pre]
    if n_pre < _SMALL:  # a few prefill chunks among many decodes
        return dec, _rows_py(pq.tolist(), pc.tolist())[1]
    sq = int(pq.sum())
    att = int((pq * pc).sum()) + int((pq * (pq + 1) // 2).sum())
    pre = KernelRows(int(pq.size), sq, int(pc.sum()) + sq, att, pq, pc, int(pc.min()),
                     int(pc.max()))
    return dec, pre


@dataclass(frozen=True, eq=False, init=False)
class Batch:
    """Requests of one forward iteration.

    q[i]: new tokens of request i this iteration (a prefill chunk, or 1 for a decode);
    c[i]: tokens of request i already in the KV cache; sample[i]: whether row i produces a token
    (runs through the LM head). Default `sample`: every request with q > 0 samples.

    Rows with q == 1 use the decode attention kernel, longer rows the prefill kernel. Derived
    values (sums, per-row arrays) are computed on first use and kept, so repeated predictions
    (e.g. one per SM split) pay only for the model-dependent arithmetic. `LatencyModel` keeps its
    per-batch preparation in `memo` (keyed per model instance). Treat the arrays as read-only.
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
        d = self.__dict__  # NOTE: set once here; the batch is frozen afterwards
        if q.size < _SMALL:  # few rows (prefill chunks): scan them once in Python
            ql, cl = q.tolist(), c.tolist()
            if ql and (min(ql) < 0 or min(cl) < 0):
                raise ValueError("q and c must be >= 0")
            d["kernels"] = _rows_py(ql, cl)  # the cached_property's slot
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
        if q.size < _SMALL:
            d["n_sample"] = sum(sample.tolist())
        d["q"], d["c"], d["sample"], d["memo"] = q, c, sample, {}

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
    def decode_steps(cls, contexts: Sequence[int] | np.ndarray, offset: int = 0) -> Batch:
        """One decode step (q = 1, sampling) of each request, with ``contexts[i] + offset``
        tokens cached. Equal to ``Batch(ones, contexts + offset)``, built faster."""
        if isinstance(contexts, list) and 0 < len(contexts) < _PY_STATS:
            # few requests: Python's sum/min/max beat numpy's per-call overhead; the sums are
            # the same integers either way
            n = len(contexts)
            c = np.frombuffer(array("q", contexts), np.int64)  # faster than np.array on ints
            if offset:
                c = c + offset
            kv = sum(contexts) + n * offset + n
            dec = KernelRows(n, n, kv, kv, _ones(n, np.int64), c, min(contexts) + offset,
                             max(contexts) + offset)
        else:
            if isinstance(contexts, list) and contexts:
                c = np.frombuffer(array("q", contexts), np.int64)
            else:
                c = np.asarray(contexts, dtype=np.int64).reshape(-1)
            if offset:
                c = c + offset
            n = int(c.size)
            dec = _decode_rows(c)
        if n and dec.c_min < 0:
            raise ValueError("q and c must be >= 0")
        return cls._trusted(_ones(n, np.int64), c, _ones(n, bool), kernels=(dec, NO_ROWS), n=n,
                            n_sample=n)

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
