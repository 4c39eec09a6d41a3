from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sidecar.config import EmbeddingSettings, SummarizerSettings, load_settings
from sidecar.engines import EngineHub, ModelUnavailableError

from .conftest import TINY_EMBED, TINY_T5


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Asset discovery looks at ./.models and ./models of cwd and its ancestors.
    monkeypatch.chdir(tmp_path)


async def test_default_hub() -> None:
    settings = load_settings(env={})
    hub = EngineHub.from_settings(settings.embedding, settings.summarizer)
    try:
        emb = hub.require_embedder()
        assert emb.dims == 384 and len(emb.fingerprint) == 64
        assert hub.health() == {"ok": True, "message": "ok"}
        await hub.start()  # preload=True by default
        for _ in range(200):
            if emb.slot.state.value == "ready":
                break
            await asyncio.sleep(0.02)
        st = hub.status()
        assert st["embedder"]["state"] == "ready"
        assert st["embedder"]["profile"] == "all-minilm-l6-v2"
        assert st["embedder"]["fingerprint"] == emb.fingerprint
        assert st["embedder"]["dims"] == 384
        assert st["embedder"]["compute"]["matmul"] == "int8"  # docs/engines.md
        assert st["summarizer"]["defaultMethod"] == "extractive"
        assert st["summarizer"]["seq2seq"]["state"] == "disabled"
        assert "summarizer.json" in st["summarizer"]["seq2seq"]["reason"]
        res = await hub.summarizer.summarize(["alpha beta", "beta gamma", "gamma delta"])
        assert res.method == "extractive"
    finally:
        await hub.close()


async def test_env_settings_reach_the_engines() -> None:
    env = {
        "LIBRAVDB_EMBEDDING_BACKEND": "onnx-local",
        "LIBRAVDB_EMBEDDING_MODEL": str(TINY_EMBED),
        "LIBRAVDB_EMBEDDING_PRELOAD": "false",
        "LIBRAVDB_SUMMARIZER_BACKEND": "onnx-local",
        "LIBRAVDB_SUMMARIZER_MODEL_PATH": str(TINY_T5),
        "LIBRAVDB_SUMMARIZER_MAX_NEW_TOKENS": "5",
        "LIBRAVDB_SUMMARIZER_IDLE_UNLOAD_S": "42",
        "LIBRAVDB_EMBEDDING_LANES": "1",
        "LIBRAVDB_EMBEDDING_INT8_MATMUL": "false",
    }
    settings = load_settings(env=env)
    hub = EngineHub.from_settings(settings.embedding, settings.summarizer)
    try:
        await hub.start()
        assert hub.require_embedder().lanes == 1
        assert hub.require_embedder().spin is False  # the default: pool threads sleep
        assert hub.require_embedder().int8_matmul is False
        assert hub.summarizer.seq2seq is not None
        assert hub.summarizer.seq2seq.slot.idle_unload_s == 42
        st = hub.status()
        assert st["embedder"]["state"] == "unloaded"
        assert st["embedder"]["dims"] == 768
        assert st["summarizer"]["seq2seq"]["state"] == "unloaded"
        res = await hub.summarizer.summarize(["the deploy runs on friday", "thanks"])
        assert res.method == "seq2seq"
        assert 0 < res.tokens <= 5
        assert hub.status()["summarizer"]["seq2seq"]["state"] == "ready"
        vec = await hub.require_embedder().embed(["x"], "query")
        assert vec.vectors.shape == (1, 768)
        assert hub.status()["embedder"]["compute"]["reason"] == "disabled by embedding.int8_matmul"
    finally:
        await hub.close()


async def test_broken_embedder_config_is_reported_not_raised() -> None:
    hub = EngineHub.from_settings(
        EmbeddingSettings(backend="onnx-local", model="/nonexistent/dir"), SummarizerSettings()
    )
    try:
        health = hub.health()
        assert health["ok"] is False and "/nonexistent/dir" in health["message"]
        assert hub.status()["embedder"]["state"] == "failed"
        with pytest.raises(ModelUnavailableError, match=r"embedding\.json"):
            hub.require_embedder()
        # The summarizer still works (lexical extractive).
        res = await hub.summarizer.summarize(["one two", "two three"])
        assert res.method == "extractive" and res.model == "lexical"
    finally:
        await hub.close()


async def test_failed_load_turns_health_red(tmp_path: Path) -> None:
    import shutil

    d = tmp_path / "emb"
    shutil.copytree(TINY_EMBED, d)
    import json

    manifest = json.loads((d / "embedding.json").read_text())
    manifest["sha256"] = {}
    (d / "embedding.json").write_text(json.dumps(manifest))
    (d / "model.onnx").write_bytes(b"corrupt")
    hub = EngineHub.from_settings(
        EmbeddingSettings(backend="onnx-local", model=str(d), preload=True), SummarizerSettings()
    )
    try:
        await hub.start()
        emb = hub.require_embedder()
        for _ in range(200):
            if emb.slot.state.value == "failed":
                break
            await asyncio.sleep(0.02)
        health = hub.health()
        assert health["ok"] is False and "model.onnx" in health["message"]
    finally:
        await hub.close()


async def test_bad_summarizer_config_is_reported() -> None:
    hub = EngineHub.from_settings(
        EmbeddingSettings(preload=False), SummarizerSettings(backend="ollama-local")
    )
    try:
        st = hub.status()["summarizer"]
        assert st["seq2seq"]["state"] == "disabled"
        assert "not implemented" in st["seq2seq"]["reason"]
        res = await hub.summarizer.summarize(["a b c", "c d e"], method="seq2seq")
        assert res.method == "extractive" and "not implemented" in (res.fallback_reason or "")
    finally:
        await hub.close()


async def test_idle_unload_task() -> None:
    hub = EngineHub.from_settings(
        EmbeddingSettings(idle_unload_s=0.2, preload=False), SummarizerSettings()
    )
    try:
        await hub.start()
        emb = hub.require_embedder()
        await emb.embed(["warm"])
        assert emb.slot.state.value == "ready"
        for _ in range(100):
            if emb.slot.state.value == "unloaded":
                break
            await asyncio.sleep(0.05)
        assert emb.slot.state.value == "unloaded"
        assert (await emb.embed(["again"])).vectors.shape == (1, 384)
    finally:
        await hub.close()


async def test_ensure_ready_and_loading_health() -> None:
    hub = EngineHub.from_settings(EmbeddingSettings(preload=False), SummarizerSettings())
    try:
        emb = hub.require_embedder()
        assert hub.states()["embedder"].state == "unloaded"
        emb.preload()
        seen = set()
        for _ in range(5000):  # the ONNX session takes far longer than one poll
            seen.add(hub.states()["embedder"].state)
            if "ready" in seen:
                break
            await asyncio.sleep(0.001)
        assert "loading" in seen
        await emb.ensure_ready()
        states = hub.states()
        assert states["embedder"].state == "ready"
        assert states["embedder"].fingerprint == emb.fingerprint
        assert states["summarizer"].profile == "extractive"
        assert await hub.counts() == {}
    finally:
        await hub.close()
