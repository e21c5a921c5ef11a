"""Chunked-prefill batch formation against an independent token-by-token reference."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sglang_duet.policy import PrefillChunk, ReqState, form_chunked_batch, truncate_chunks


def reference_chunked(decodes, waiting, budget):
    """Plain chunked prefill, one token at a time: every decode one token, then prompt tokens
    of the waiting requests in FIFO order while the budget lasts."""
    left = budget - len(decodes)
    lengths: dict[str, int] = {}
    order: list[ReqState] = []
    for req in waiting:
        todo = req.prompt_len - req.computed
        while todo > 0 and left > 0:
            if req.rid not in lengths:
                lengths[req.rid] = 0
                order.append(req)
            lengths[req.rid] += 1
            todo -= 1
            left -= 1
    chunks = tuple(PrefillChunk(r.rid, r.computed, lengths[r.rid]) for r in order)
    return tuple(r.rid for r in decodes), chunks


@st.composite
def requests(draw):
    n_dec = draw(st.integers(0, 40))
    decodes = []
    for i in range(n_dec):
        p = draw(st.integers(1, 5000))
        decodes.append(ReqState(f"d{i}", p, p, draw(st.integers(1, 500))))
    waiting = []
    for i in range(draw(st.integers(0, 10))):
        p = draw(st.integers(1, 20000))
        waiting.append(ReqState(f"w{i}", p, draw(st.integers(0, p)), 0))
    return decodes, waiting


@given(requests(), st.integers(1, 9000))
def test_matches_token_by_token_reference(reqs, budget):
    decodes, waiting = reqs
    assert form_chunked_batch(decodes, waiting, budget) == reference_chunked(
        decodes, waiting, budget
    )


@given(requests(), st.integers(1, 9000))
def test_chunks_respect_remaining_prompt_and_budget(reqs, budget):
    decodes, waiting = reqs
    rids, chunks = form_chunked_batch(decodes, waiting, budget)
    assert rids == tuple(r.rid for r in decodes)
    by_rid = {r.rid: r for r in waiting}
    assert sum(c.length for c in chunks) <= max(0, budget - len(decodes))
    for c in chunks:
        req = by_rid[c.rid]
        assert c.start == req.computed
        assert 1 <= c.length <= req.remaining_prompt
    assert len({c.rid for c in chunks}) == len(chunks)


def test_all_decodes_run_even_beyond_the_budget():
    decodes = [ReqState(f"d{i}", 10, 10, 1) for i in range(5)]
    rids, chunks = form_chunked_batch(decodes, [ReqState("w", 10, 0, 0)], 3)
    assert rids == ("d0", "d1", "d2", "d3", "d4") and chunks == ()


def test_only_the_last_request_is_cut():
    waiting = [ReqState("a", 100, 0, 0), ReqState("b", 300, 50, 0), ReqState("c", 10, 0, 0)]
    _, chunks = form_chunked_batch([ReqState("d", 5, 5, 1)], waiting, 201)
    assert chunks == (PrefillChunk("a", 0, 100), PrefillChunk("b", 50, 100))


@given(
    st.lists(st.integers(1, 3000), min_size=0, max_size=8),
    st.integers(0, 20000),
)
def test_truncate_keeps_a_fifo_prefix(lengths, cap):
    chunks = tuple(PrefillChunk(f"r{i}", 7 * i, n) for i, n in enumerate(lengths))
    out = truncate_chunks(chunks, cap)
    assert sum(c.length for c in out) == min(cap, sum(lengths))
    for i, c in enumerate(out):
        assert c.rid == chunks[i].rid and c.start == chunks[i].start
        assert 1 <= c.length <= chunks[i].length
        if i < len(out) - 1:
            assert c == chunks[i]


def test_chunk_batch_samples_only_complete_chunks_of_the_prefix():
    """A prefix's shortened last chunk no longer completes its prompt, so it samples nothing;
    `chunk_rows` gives the same rows as lists."""
    from sglang_duet.policy.batching import chunk_batch, chunk_rows

    chunks = (PrefillChunk("a", 0, 100), PrefillChunk("b", 50, 300))
    completes = (True, True)
    whole = chunk_batch(chunks, None, completes)
    assert whole.pairs() == [(100, 0), (300, 50)] and whole.sample.tolist() == [True, True]
    prefix = truncate_chunks(chunks, 250)
    cut = chunk_batch(prefix, chunks, completes)
    assert cut.pairs() == [(100, 0), (150, 50)] and cut.sample.tolist() == [True, False]
    assert chunk_rows(prefix, chunks, completes) == ([100, 150], [0, 50], 1)
    # an equal chunk built anew still counts as the whole chunk
    same = (PrefillChunk("a", 0, 100), PrefillChunk("b", 50, 300))
    assert chunk_rows(same, chunks, completes)[2] == 2
