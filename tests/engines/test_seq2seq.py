"""Seq2seq summarizer against the tiny T5 fixture and its recorded reference outputs.

tests/fixtures/tiny_t5 is built by scripts/build_tiny_seq2seq.py (torch + transformers, dev-only);
expected_outputs.json holds the reference framework's greedy token ids and log-probabilities.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from sidecar.config import SummarizerSettings
from sidecar.engines import (
    AssetHashMismatchError,
    AssetNotFoundError,
    CancelledError,
    EngineConfigError,
    ManifestError,
    Seq2SeqSummarizer,
    resolve_summarizer,
)
from sidecar.engines.seq2seq import Seq2SeqModel, spec_from_manifest

from .conftest import TINY_T5, edit_manifest


@pytest.fixture(scope="module")
def t5_model() -> Seq2SeqModel:
    return Seq2SeqModel(spec_from_manifest(TINY_T5 / "summarizer.json"))


def _cases(expected: dict[str, Any]) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = expected["cases"]
    assert len(cases) >= 5
    return cases


def test_fixture_is_small_and_nontrivial(t5_expected: dict[str, Any]) -> None:
    total = sum(p.stat().st_size for p in TINY_T5.iterdir() if p.is_file())
    assert total < 5_000_000
    cases = _cases(t5_expected)
    assert all(len(c["outputIds"]) >= 3 for c in cases)
    assert {c["stoppedBy"] for c in cases} == {"eos", "max"}
    assert any(c["truncated"] for c in cases)


def test_kv_cache_is_available(t5_model: Seq2SeqModel) -> None:
    assert t5_model.kv_cache, t5_model.kv_reason
    assert (t5_model.start_id, t5_model.eos_id) == (0, 1)


def test_prompt_matches_reference(t5_model: Seq2SeqModel, t5_expected: dict[str, Any]) -> None:
    for case in _cases(t5_expected):
        turns = [t.strip() for t in case["turns"] if t.strip()]
        prompt = t5_model.build_prompt(turns)
        assert prompt.ids == case["inputIds"], case["name"]
        assert prompt.turns_used == case["turnsUsed"]
        assert prompt.truncated == case["truncated"]
        assert len(prompt.ids) <= 512


@pytest.mark.parametrize("use_cache", [False, True], ids=["no-cache", "kv-cache"])
def test_greedy_reproduces_reference(
    t5_model: Seq2SeqModel, t5_expected: dict[str, Any], use_cache: bool
) -> None:
    for case in _cases(t5_expected):
        gen = t5_model.generate(case["inputIds"], case["maxNewTokens"], use_cache=use_cache)
        assert gen.ids == case["outputIds"], case["name"]
        assert gen.stopped_by == case["stoppedBy"]
        assert gen.confidence == pytest.approx(case["confidence"], abs=1e-4)
        for got, want in zip(gen.logprobs, case["logprobs"], strict=True):
            assert got == pytest.approx(want, abs=1e-4)


def test_summarizer_output_text(t5_expected: dict[str, Any]) -> None:
    summ = Seq2SeqSummarizer(spec_from_manifest(TINY_T5 / "summarizer.json"))
    case = _cases(t5_expected)[0]
    out = summ.summarize(case["turns"], max_new_tokens=case["maxNewTokens"])
    assert out.text == case["text"]
    assert out.tokens == len(case["outputIds"])
    assert out.confidence == pytest.approx(case["confidence"], abs=1e-4)
    assert out.kv_cache is True
    assert summ.status()["state"] == "ready"


def test_single_huge_turn_keeps_its_tail(t5_model: Seq2SeqModel) -> None:
    words = ["deploy"] * 700 + ["friday"] * 20
    prompt = t5_model.build_prompt([" ".join(words)])
    assert prompt.truncated and prompt.turns_used == 1
    assert len(prompt.ids) == 512
    tok = t5_model.tokenizer
    assert prompt.ids[:2] == tok.encode("summarize:", special=False).ids
    assert prompt.ids[-1] == 1  # </s>
    assert prompt.ids[-21:-1] == [tok.token_id("friday")] * 20


def test_newest_turns_are_kept(t5_model: Seq2SeqModel) -> None:
    turns = [f"turn {i % 10} the deploy runs on friday and the team is happy ." for i in range(80)]
    turns.append("cat")
    prompt = t5_model.build_prompt(turns)
    assert prompt.truncated and 1 < prompt.turns_used < len(turns)
    assert prompt.ids[-2] == t5_model.tokenizer.token_id("cat")


def test_cancellation_stops_decoding(t5_model: Seq2SeqModel) -> None:
    ev = threading.Event()
    ev.set()
    with pytest.raises(CancelledError):
        t5_model.generate([5, 6, 1], 10, cancel=ev)


def test_zero_new_tokens(t5_model: Seq2SeqModel) -> None:
    gen = t5_model.generate([5, 6, 1], 0)
    assert gen.ids == [] and gen.confidence == 0.0


# --- resolution and bad assets ------------------------------------------------------------------
def test_resolve_forms(tiny_t5_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_summarizer(SummarizerSettings(backend="extractive")) is None
    assert resolve_summarizer(SummarizerSettings(profile="extractive")) is None
    assert resolve_summarizer() is None  # bundled without t5-small assets: extractive only
    spec = resolve_summarizer(SummarizerSettings(backend="onnx-local", model=str(tiny_t5_copy)))
    assert spec is not None and spec.decoder_with_past is not None
    spec2 = resolve_summarizer(SummarizerSettings(model=str(tiny_t5_copy / "summarizer.json")))
    assert spec2 is not None and spec2.fingerprint == spec.fingerprint
    models = tmp_path / ".models"
    models.mkdir()
    tiny_t5_copy.rename(models / "t5-small")
    found = resolve_summarizer()
    assert found is not None and found.manifest == models / "t5-small" / "summarizer.json"


def test_resolve_errors(tmp_path: Path) -> None:
    with pytest.raises(EngineConfigError, match="not implemented"):
        resolve_summarizer(SummarizerSettings(backend="ollama-local"))
    with pytest.raises(EngineConfigError, match="not supported"):
        resolve_summarizer(SummarizerSettings(backend="gpt"))
    with pytest.raises(EngineConfigError, match="LIBRAVDB_SUMMARIZER_MODEL_PATH"):
        resolve_summarizer(SummarizerSettings(backend="onnx-local"))
    with pytest.raises(AssetNotFoundError, match=r"summarizer\.json"):
        resolve_summarizer(SummarizerSettings(model=str(tmp_path)))


def test_missing_decoder_file(tiny_t5_copy: Path) -> None:
    (tiny_t5_copy / "decoder_model.onnx").unlink()
    with pytest.raises(AssetNotFoundError, match=r"decoder_model\.onnx"):
        resolve_summarizer(SummarizerSettings(model=str(tiny_t5_copy)))


def test_hash_pin_mismatch(tiny_t5_copy: Path) -> None:
    p = tiny_t5_copy / "encoder_model.onnx"
    data = bytearray(p.read_bytes())
    data[-5] ^= 0x55
    p.write_bytes(bytes(data))
    with pytest.raises(AssetHashMismatchError, match=r"encoder_model\.onnx"):
        resolve_summarizer(SummarizerSettings(model=str(tiny_t5_copy)))


def test_bad_manifest(tiny_t5_copy: Path) -> None:
    edit_manifest(tiny_t5_copy / "summarizer.json", maxContextTokens=4)
    with pytest.raises(ManifestError, match="maxContextTokens"):
        resolve_summarizer(SummarizerSettings(model=str(tiny_t5_copy)))
    edit_manifest(tiny_t5_copy / "summarizer.json", maxContextTokens=512, tokenizer=None)
    with pytest.raises(ManifestError, match="tokenizer"):
        resolve_summarizer(SummarizerSettings(model=str(tiny_t5_copy)))


def test_without_past_decoder_file(tiny_t5_copy: Path, t5_expected: dict[str, Any]) -> None:
    (tiny_t5_copy / "decoder_with_past_model.onnx").unlink()
    edit_manifest(tiny_t5_copy / "summarizer.json", decoderWithPast=None)
    spec = resolve_summarizer(SummarizerSettings(model=str(tiny_t5_copy)))
    assert spec is not None and spec.decoder_with_past is None
    model = Seq2SeqModel(spec)
    assert not model.kv_cache
    case = _cases(t5_expected)[1]
    assert model.generate(case["inputIds"], case["maxNewTokens"]).ids == case["outputIds"]


class _CountingSession:
    """The real decoder session, counting the decoder input tokens of every run."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.fed: list[int] = []

    def run(self, names: Any, feed: dict[str, Any]) -> Any:
        self.fed.append(int(feed["input_ids"].shape[1]))
        return self.inner.run(names, feed)


def test_kv_cache_feeds_one_token_per_step(t5_model: Seq2SeqModel) -> None:
    """With the cache every step after the first feeds only the newest token to the
    decoder-with-past, without it every step re-feeds the whole sequence; the output is
    the same. (What that saves per token is measured by `make bench`, engines section.)"""
    ids = list(range(3, 200)) * 2 + [1]
    decoder, past = t5_model.decoder, t5_model.decoder_past
    try:
        runs = {}
        for use_cache in (True, False):
            full, step = _CountingSession(decoder), _CountingSession(past)
            t5_model.decoder, t5_model.decoder_past = full, step  # type: ignore[assignment]
            gen = t5_model.generate(ids, 32, use_cache=use_cache)
            runs[use_cache] = (gen, full.fed, step.fed)
    finally:
        t5_model.decoder, t5_model.decoder_past = decoder, past
    cached, plain = runs[True], runs[False]
    assert cached[0].ids == plain[0].ids and cached[0].steps == plain[0].steps > 2
    steps = cached[0].steps
    assert cached[1] == [1] and cached[2] == [1] * (steps - 1)
    assert plain[1] == list(range(1, steps + 1)) and plain[2] == []


async def test_async_cancellation_reaches_the_worker(t5_expected: dict[str, Any]) -> None:
    summ = Seq2SeqSummarizer(spec_from_manifest(TINY_T5 / "summarizer.json"))
    with summ.slot.lease() as model:
        model.eos_id = -1  # never stops by itself: only the cancellation can end it
    ev = threading.Event()
    loop = asyncio.get_running_loop()
    fut = loop.run_in_executor(
        None,
        lambda: summ.summarize(
            ["the deploy runs on friday"] * 3, max_new_tokens=10_000, cancel=ev, use_cache=False
        ),
    )
    await asyncio.sleep(0.2)
    ev.set()
    with pytest.raises(CancelledError):
        await fut
