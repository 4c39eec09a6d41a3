"""Summarizer facade: method selection, fallbacks (never failing the caller), cancellation."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from sidecar.config import SummarizerSettings
from sidecar.engines import (
    CancelledError,
    Embedder,
    InvalidInputError,
    Seq2SeqSummarizer,
    Summarizer,
    resolve_summarizer,
)
from sidecar.engines.seq2seq import spec_from_manifest

from .conftest import TINY_T5, edit_manifest

TURNS = [
    "What did we decide about the retry policy for failed requests?",
    "We decided to retry three times with a backoff of one, two and four seconds.",
    "Please do not use mutexes in the hot path.",
    "Use channels or atomic counters instead.",
]


@pytest.fixture
def with_t5(minilm: Embedder) -> Summarizer:
    seq = Seq2SeqSummarizer(spec_from_manifest(TINY_T5 / "summarizer.json"))
    return Summarizer(minilm, seq)


@pytest.fixture
def extractive_only(minilm: Embedder) -> Summarizer:
    return Summarizer(minilm, None, seq2seq_unavailable="not configured in test")


async def test_auto_uses_seq2seq(with_t5: Summarizer, t5_expected: dict[str, Any]) -> None:
    case = next(c for c in t5_expected["cases"] if c["name"] == "four-turns")
    res = await with_t5.summarize(case["turns"], max_tokens=case["maxNewTokens"])
    assert res.method == "seq2seq"
    assert res.summary == case["text"]
    assert res.tokens == len(case["outputIds"])
    assert res.confidence == pytest.approx(case["confidence"], abs=1e-4)
    assert res.fallback_reason is None
    assert res.source_indices == [0, 1, 2, 3]
    assert res.model == "tiny-t5-random"
    sync = with_t5.summarize_sync(case["turns"], max_tokens=case["maxNewTokens"])
    assert sync == res


async def test_explicit_extractive(with_t5: Summarizer) -> None:
    res = await with_t5.summarize(TURNS, method="extractive")
    assert res.method == "extractive" and res.fallback_reason is None
    assert res.tokens == len(res.summary.split())
    assert 0 < res.confidence <= 1
    assert res.source_indices == sorted(res.source_indices)
    assert len(res.source_indices) == 2  # ceil(4 * 0.4)


async def test_auto_without_seq2seq_is_extractive(extractive_only: Summarizer) -> None:
    res = await extractive_only.summarize(TURNS)
    assert res.method == "extractive" and res.fallback_reason is None


async def test_requested_seq2seq_unavailable_falls_back(extractive_only: Summarizer) -> None:
    res = await extractive_only.summarize(TURNS, method="seq2seq")
    assert res.method == "extractive"
    assert res.fallback_reason is not None and "not configured in test" in res.fallback_reason


async def test_seq2seq_load_failure_falls_back(minilm: Embedder, tiny_t5_copy: Path) -> None:
    edit_manifest(tiny_t5_copy / "summarizer.json", sha256={})
    (tiny_t5_copy / "decoder_model.onnx").write_bytes(b"garbage")
    spec = resolve_summarizer(SummarizerSettings(model=str(tiny_t5_copy)))
    assert spec is not None
    summ = Summarizer(minilm, Seq2SeqSummarizer(spec))
    res = await summ.summarize(TURNS)
    assert res.method == "extractive"
    assert res.fallback_reason is not None
    assert "seq2seq failed" in res.fallback_reason and "decoder_model.onnx" in res.fallback_reason
    status = summ.status()["seq2seq"]
    assert status["state"] == "failed" and "decoder_model.onnx" in status["reason"]
    # The sync path falls back the same way.
    assert summ.summarize_sync(TURNS).method == "extractive"


async def test_seq2seq_empty_output_falls_back(minilm: Embedder) -> None:
    seq = Seq2SeqSummarizer(spec_from_manifest(TINY_T5 / "summarizer.json"))
    summ = Summarizer(minilm, seq)
    with seq.slot.lease() as model:
        # Make the first token the model would emit count as end-of-sequence: no output.
        prompt = model.build_prompt(TURNS)
        model.eos_id = model.generate(prompt.ids, 1).ids[0]
    res = await summ.summarize(TURNS)
    assert res.method == "extractive"
    assert res.fallback_reason is not None and "empty output" in res.fallback_reason


async def test_unexpected_model_fault_falls_back(
    minilm: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression: a fault outside generate() (prompt building, decoding) escaped as a plain
    # exception and failed the caller instead of falling back.
    seq = Seq2SeqSummarizer(spec_from_manifest(TINY_T5 / "summarizer.json"))
    summ = Summarizer(minilm, seq)
    with seq.slot.lease() as model:

        def broken(turns: Any) -> Any:
            raise RuntimeError("tokenizer exploded")

        monkeypatch.setattr(model, "build_prompt", broken)
    res = await summ.summarize(TURNS)
    assert res.method == "extractive"
    assert res.fallback_reason is not None
    assert "RuntimeError: tokenizer exploded" in res.fallback_reason
    assert summ.summarize_sync(TURNS).method == "extractive"


async def test_without_embedder_uses_lexical() -> None:
    summ = Summarizer(None, None)
    res = await summ.summarize(TURNS)
    assert res.method == "extractive" and res.model == "lexical"
    assert res.fallback_reason is not None and "lexical" in res.fallback_reason


async def test_input_errors(with_t5: Summarizer) -> None:
    with pytest.raises(InvalidInputError):
        await with_t5.summarize(["", "  "])
    with pytest.raises(InvalidInputError):
        await with_t5.summarize(TURNS, method="abstractive")
    with pytest.raises(InvalidInputError):
        await with_t5.summarize(TURNS, max_tokens=0)
    with pytest.raises(InvalidInputError):
        await with_t5.summarize("one string")
    with pytest.raises(InvalidInputError):
        with_t5.summarize_sync([], method="extractive")


async def test_invalid_utf8_and_huge_turn(with_t5: Summarizer) -> None:
    res = await with_t5.summarize(["caf\udce9 " * 10, "word " * 200_000], max_tokens=5)
    assert res.method == "seq2seq" and res.truncated
    ext = await with_t5.summarize(["caf\udce9 ok", "word " * 200_000], method="extractive")
    assert "\ufffd" in ext.summary or "word" in ext.summary


async def test_task_cancellation_stops_the_decoder(minilm: Embedder) -> None:
    seq = Seq2SeqSummarizer(spec_from_manifest(TINY_T5 / "summarizer.json"))
    summ = Summarizer(minilm, seq, max_new_tokens=100_000)
    started = threading.Event()
    with seq.slot.lease() as model:
        eos = model.eos_id
        model.eos_id = -1  # never stops by itself before the 512-token cap
        generate = model.generate

        def traced(*args: Any, **kwargs: Any) -> Any:
            started.set()
            return generate(*args, **kwargs)

        model.generate = traced  # type: ignore[method-assign]
    task = asyncio.create_task(summ.summarize(["the deploy runs on friday"] * 3))
    assert await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The worker thread notices the token and frees the executor for the next call.
    with seq.slot.lease() as model:
        model.eos_id = eos
        model.generate = generate  # type: ignore[method-assign]
    res = await asyncio.wait_for(summ.summarize(TURNS, max_tokens=4), timeout=10)
    assert res.method == "seq2seq"


async def test_cancel_token(with_t5: Summarizer) -> None:
    ev = threading.Event()
    ev.set()
    with pytest.raises(CancelledError):
        await with_t5.summarize(TURNS, cancel=ev)
    with pytest.raises(CancelledError):
        await with_t5.summarize(TURNS, method="extractive", cancel=ev)


def test_status_shape(with_t5: Summarizer, extractive_only: Summarizer) -> None:
    st = with_t5.status()
    assert st["defaultMethod"] == "seq2seq"
    assert st["seq2seq"]["family"] == "tiny-t5-random" and st["seq2seq"]["kvCache"] is True
    assert st["extractive"]["state"] == "ready"
    st2 = extractive_only.status()
    assert st2["defaultMethod"] == "extractive"
    assert st2["seq2seq"] == {"state": "disabled", "reason": "not configured in test"}
