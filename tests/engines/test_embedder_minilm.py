"""The default embedder (int8 all-MiniLM-L6-v2 from the installed packages)."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.config import EmbeddingSettings
from sidecar.engines import Embedder, EngineError, InvalidInputError, resolve_embedding
from sidecar.engines.embedding_spec import EmbeddingSpec

from .conftest import DATA


def test_spec_identity(minilm_spec: EmbeddingSpec) -> None:
    assert minilm_spec.profile == "all-minilm-l6-v2"
    assert minilm_spec.dimensions == 384
    assert minilm_spec.max_context_tokens == 128
    assert minilm_spec.normalize is True
    assert minilm_spec.pooling == "mean"
    assert not minilm_spec.supports_matryoshka
    assert len(minilm_spec.fingerprint) == 64
    ident = minilm_spec.identity()
    assert "modelPath" not in ident and "tokenizerPath" not in ident
    assert str(minilm_spec.model.path) not in json.dumps(ident)


def test_fingerprint_needs_no_session_and_is_stable() -> None:
    spec = resolve_embedding()
    emb = Embedder(spec)
    try:
        assert emb.fingerprint == resolve_embedding().fingerprint
        assert emb.status()["state"] == "unloaded"  # computed from hashes only
    finally:
        emb.close()


def test_fingerprint_is_path_independent(minilm_spec: EmbeddingSpec, tmp_path: Path) -> None:
    """Moving the install (same bytes elsewhere) keeps the fingerprint."""
    shutil.copy(minilm_spec.model.path, tmp_path / "model.onnx")
    (tmp_path / "tokenizer.json").write_bytes(minilm_spec.tokenizer.read_bytes())
    (tmp_path / "embedding.json").write_text(
        json.dumps(
            {
                "profile": "all-minilm-l6-v2",
                "model": "model.onnx",
                "tokenizer": "tokenizer.json",
                "outputName": "last_hidden_state",
                "pooling": "mean",
            }
        )
    )
    moved = resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tmp_path)))
    assert moved.model.path != minilm_spec.model.path
    assert moved.fingerprint == minilm_spec.fingerprint


def test_embed_shapes_normalization_and_truncation(minilm: Embedder) -> None:
    long_text = " ".join(f"word{i}" for i in range(400))
    res = minilm.embed_sync(["hello world", long_text], "document")
    assert res.vectors.shape == (2, 384)
    assert res.vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(res.vectors, axis=1), 1.0, atol=1e-5)
    assert res.truncated == [False, True]
    assert res.model == "all-minilm-l6-v2" and res.dims == 384


def test_truncation_boundary_is_128_tokens(minilm: Embedder) -> None:
    # "a" is one token; [CLS] + 126 + [SEP] = 128 fits, 127 does not.
    fits = minilm.embed_sync([" ".join(["a"] * 126)]).truncated
    over = minilm.embed_sync([" ".join(["a"] * 127)]).truncated
    assert fits == [False] and over == [True]


def test_truncated_text_equals_its_first_128_tokens(minilm: Embedder) -> None:
    words = [f"w{i % 50}" for i in range(1000)]
    full = minilm.embed_sync([" ".join(words)]).vectors[0]
    head = minilm.embed_sync([" ".join(words[:200])]).vectors[0]
    assert float(full @ head) > 0.9999


def test_one_megabyte_text_is_truncated_quickly(minilm: Embedder) -> None:
    text = ("lorem ipsum dolor sit amet " * 40000)[:1_000_000]
    start = time.perf_counter()
    res = minilm.embed_sync([text])
    assert time.perf_counter() - start < 5.0
    assert res.truncated == [True]
    # The cheap pre-cut gives exactly what the full tokenization would.
    ref = minilm.embed_sync([text[:5000]]).vectors[0]
    assert float(res.vectors[0] @ ref) > 0.9999


def test_giant_single_word_text_is_handled(minilm: Embedder) -> None:
    res = minilm.embed_sync(["x" * 300_000])
    assert res.vectors.shape == (1, 384)


def test_query_and_document_are_identical_without_prefixes(minilm: Embedder) -> None:
    q = minilm.embed_sync(["the cat"], "query").vectors[0]
    d = minilm.embed_sync(["the cat"], "document").vectors[0]
    assert np.allclose(q, d)


@pytest.mark.parametrize("bad", ["", "   ", "\n\t "])
def test_empty_text_is_an_error(minilm: Embedder, bad: str) -> None:
    with pytest.raises(InvalidInputError, match=r"texts\[1\] is empty"):
        minilm.embed_sync(["ok", bad])


def test_invalid_inputs(minilm: Embedder) -> None:
    with pytest.raises(InvalidInputError, match="must be a string"):
        minilm.embed_sync(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="list of strings"):
        minilm.embed_sync("a single string")
    with pytest.raises(InvalidInputError, match="kind"):
        minilm.embed_sync(["ok"], "passage")
    assert minilm.embed_sync([]).vectors.shape == (0, 384)


def test_lone_surrogates_are_replaced(minilm: Embedder) -> None:
    bad = minilm.embed_sync(["caf\udce9 ok"]).vectors[0]
    good = minilm.embed_sync(["caf\ufffd ok"]).vectors[0]
    assert np.allclose(bad, good)


def test_batch_equals_single(minilm: Embedder) -> None:
    texts = ["short", "a much longer sentence about the daemon's socket path and config", "hi"]
    batch = minilm.embed_sync(texts).vectors
    single = np.stack([minilm.embed_sync([t]).vectors[0] for t in texts])
    assert np.allclose(batch, single, atol=1e-4)


def test_paraphrases_rank_above_distractors(minilm: Embedder) -> None:
    triples = json.loads((DATA / "paraphrase_pairs.json").read_text())["triples"]
    assert len(triples) >= 30
    failures = []
    for t in triples:
        v = minilm.embed_sync([t["anchor"], t["paraphrase"], t["distractor"]], "document").vectors
        if not float(v[0] @ v[1]) > float(v[0] @ v[2]):
            failures.append(t["anchor"])
    assert failures == []


# --- async API and micro-batching -----------------------------------------------------------------
async def test_async_embed_matches_sync(minilm: Embedder) -> None:
    res = await minilm.embed(["hello there"], "query")
    assert np.allclose(res.vectors, minilm.embed_sync(["hello there"], "query").vectors, atol=1e-5)
    one = await minilm.embed_one("hello there")
    assert one.shape == (384,)


async def test_concurrent_requests_are_coalesced(minilm: Embedder) -> None:
    texts = [f"concurrent request number {i}" for i in range(12)]
    before = minilm.batcher.stats.batches
    results = await asyncio.gather(*(minilm.embed([t]) for t in texts))
    batches = minilm.batcher.stats.batches - before
    assert batches < len(texts)  # same-iteration submissions share one ONNX run
    expected = minilm.embed_sync(texts).vectors
    for i, r in enumerate(results):
        assert np.allclose(r.vectors[0], expected[i], atol=1e-4)


async def test_requests_arriving_during_a_run_form_the_next_batch(minilm: Embedder) -> None:
    long_texts = [" ".join(f"w{j}" for j in range(120))] * 32
    dispatched = minilm.batcher.stats.batches
    first = asyncio.ensure_future(minilm.embed(long_texts))

    async def first_batch_running() -> None:
        # The batcher has no event for "a batch started"; its counter is polled, under a
        # deadline, instead of sleeping a fixed time and hoping the batch runs by then.
        while minilm.batcher.stats.batches == dispatched:  # noqa: ASYNC110
            await asyncio.sleep(0.0005)

    await asyncio.wait_for(first_batch_running(), 5)
    before = minilm.batcher.stats.batches
    rest = [asyncio.ensure_future(minilm.embed([f"late {i}"])) for i in range(6)]
    await asyncio.gather(first, *rest)
    assert minilm.batcher.stats.batches - before <= 2


class _GatedSession:
    """The real ONNX session; its ``run`` first waits until the event loop has run a
    callback while the model was about to run. If inference ran on the loop thread, the
    loop could not run that callback and the wait would time out."""

    def __init__(self, inner: Any, loop: asyncio.AbstractEventLoop, entered: asyncio.Event) -> None:
        self.inner = inner
        self.loop = loop
        self.entered = entered
        self.loop_ran = threading.Event()

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.loop.call_soon_threadsafe(self.entered.set)
        if not self.loop_ran.wait(10):
            raise AssertionError("the event loop did not run while the model was running")
        return self.inner.run(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_event_loop_is_not_blocked(minilm: Embedder) -> None:
    texts = [" ".join(f"token{j}" for j in range(120)) for _ in range(64)]
    await minilm.embed(["load the model first"])
    entered = asyncio.Event()
    with minilm.slot.lease() as loaded:
        real = (loaded.session, loaded.lane_session)
        gates = [_GatedSession(s, asyncio.get_running_loop(), entered) for s in real if s]
        loaded.session = gates[0]  # type: ignore[assignment]
        if loaded.lane_session is not None:
            loaded.lane_session = gates[1]  # type: ignore[assignment]
    try:
        task = asyncio.ensure_future(minilm.embed(texts))
        await asyncio.wait_for(entered.wait(), 10)  # the loop runs while the model runs
        for gate in gates:
            gate.loop_ran.set()
        result = await task
    finally:
        with minilm.slot.lease() as loaded:
            loaded.session, loaded.lane_session = real
    assert len(result.vectors) == len(texts)


async def test_cancelled_request_does_not_break_others(minilm: Embedder) -> None:
    a = asyncio.ensure_future(minilm.embed(["alpha"]))
    b = asyncio.ensure_future(minilm.embed(["beta"]))
    a.cancel()
    res = await b
    assert res.vectors.shape == (1, 384)
    with pytest.raises(asyncio.CancelledError):
        await a
    assert (await minilm.embed(["gamma"])).vectors.shape == (1, 384)


async def test_bad_request_in_batch_does_not_fail_the_others(minilm: Embedder) -> None:
    good = asyncio.ensure_future(minilm.embed(["fine"]))
    with pytest.raises(InvalidInputError):
        await minilm.embed([""])
    assert (await good).vectors.shape == (1, 384)


def test_sync_api_from_threads_alongside(minilm: Embedder) -> None:
    out: list[np.ndarray] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            out.append(minilm.embed_sync([f"thread {i}"]).vectors[0])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(out) == 4


def test_closed_embedder_refuses(minilm_spec: EmbeddingSpec) -> None:
    emb = Embedder(minilm_spec)
    emb.close()

    async def go() -> None:
        await emb.embed(["x"])

    with pytest.raises(EngineError, match="closed"):
        asyncio.run(go())


async def test_parallel_lanes_give_the_same_vectors(minilm_spec: EmbeddingSpec) -> None:
    emb = Embedder(minilm_spec, lanes=2)
    try:
        assert emb.status()["batching"]["lanes"] == 2
        texts = [f"lane request number {i} about the garden" for i in range(8)]
        results = await asyncio.gather(*(emb.embed([t], "query") for t in texts))
        assert emb.batcher.stats.parallel_batches >= 2
        expected = emb.embed_sync(texts, "query").vectors
        for i, r in enumerate(results):
            assert np.allclose(r.vectors[0], expected[i], atol=1e-4)
    finally:
        emb.close()


def test_pool_threads_do_not_spin_unless_asked(minilm_spec: EmbeddingSpec) -> None:
    for spin, expected in ((False, "0"), (True, None)):
        emb = Embedder(minilm_spec, lanes=2, spin=spin)
        try:
            emb.embed_sync(["load the sessions"], "query")
            with emb.slot.lease() as loaded:
                sessions = [loaded.session, loaded.lane_session]
                for sess in sessions:
                    assert sess is not None
                    entries = sess.get_session_options().get_session_config_entry
                    if expected is None:
                        with pytest.raises(Exception):  # noqa: B017 - unset entry raises
                            entries("session.intra_op.allow_spinning")
                    else:
                        assert entries("session.intra_op.allow_spinning") == expected
            assert emb.status()["batching"]["spin"] is spin
        finally:
            emb.close()
