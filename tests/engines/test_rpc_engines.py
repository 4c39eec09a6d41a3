"""embed / summarize through the JSON-RPC dispatcher (in process, real engines)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.api import build_registry
from sidecar.api.core import health_of
from sidecar.app import App
from sidecar.config import load_settings
from sidecar.engines import EngineHub
from sidecar.server.dispatch import Dispatcher

from .conftest import TINY_T5


class Client:
    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.next_id = 0

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        frame = json.dumps(
            {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        ).encode()

        async def send(data: bytes) -> None:
            return None

        out = await self.dispatcher.handle_frame(frame, 1, send)
        assert out is not None
        reply: dict[str, Any] = json.loads(out)
        assert reply["id"] == self.next_id
        return reply


async def _client(env: dict[str, str]) -> tuple[Client, App]:
    settings = load_settings(env=env)
    app = App(settings)
    app.provide(EngineHub, EngineHub.from_settings(settings.embedding, settings.summarizer))
    await app.start()
    return Client(Dispatcher(app, build_registry())), app


@pytest.fixture
async def rpc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Client]:
    monkeypatch.chdir(tmp_path)
    client, app = await _client(
        {
            "LIBRAVDB_DATA_DIR": str(tmp_path / "data"),
            "LIBRAVDB_SUMMARIZER_MODEL_PATH": str(TINY_T5),
        }
    )
    yield client
    await app.close()


async def test_embed(rpc: Client) -> None:
    reply = await rpc.call("embed", {"texts": ["hello world", "x " * 400], "kind": "query"})
    res = reply["result"]
    assert res["dims"] == 384 and res["model"] == "all-minilm-l6-v2"
    assert res["truncated"] == [False, True]
    vecs = np.array(res["vectors"])
    assert vecs.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert len(res["fingerprint"]) == 64


async def test_embed_default_kind_and_errors(rpc: Client) -> None:
    assert "result" in await rpc.call("embed", {"texts": ["ok"]})
    empty = await rpc.call("embed", {"texts": ["ok", "  "]})
    assert empty["error"]["code"] == -32009 and "texts[1]" in empty["error"]["message"]
    bad_kind = await rpc.call("embed", {"texts": ["ok"], "kind": "passage"})
    assert bad_kind["error"]["code"] == -32602
    missing = await rpc.call("embed", {})
    assert missing["error"]["code"] == -32602
    too_many = await rpc.call("embed", {"texts": ["a"] * 1025})
    assert too_many["error"]["code"] == -32009


async def test_summarize_methods(rpc: Client) -> None:
    turns = ["Remember my name is Alex.", "I work on the search team.", "Thanks!"]
    auto = (await rpc.call("summarize", {"texts": turns, "maxTokens": 8}))["result"]
    assert auto["method"] == "seq2seq" and 0 < auto["tokens"] <= 8
    assert 0 < auto["confidence"] <= 1 and auto["fallbackReason"] is None
    ext = (await rpc.call("summarize", {"texts": turns, "method": "extractive"}))["result"]
    assert ext["method"] == "extractive" and ext["summary"]
    assert set(ext) >= {"summary", "method", "confidence", "tokens"}
    err = await rpc.call("summarize", {"texts": ["", " "]})
    assert err["error"]["code"] == -32009
    err = await rpc.call("summarize", {"texts": turns, "method": "magic"})
    assert err["error"]["code"] == -32602
    for density in (0, -0.5, 1.5):
        err = await rpc.call("summarize", {"texts": turns, "density": density})
        assert err["error"]["code"] == -32009 and "density" in err["error"]["message"]


async def test_status_reports_engines(rpc: Client) -> None:
    await rpc.call("embed", {"texts": ["warm"]})
    status = (await rpc.call("status"))["result"]
    models = status["models"]
    assert models["embedder"]["state"] == "ready"
    assert models["embedder"]["profile"] == "all-minilm-l6-v2"
    assert len(models["embedder"]["fingerprint"]) == 64 and models["embedder"]["dims"] == 384
    assert models["summarizer"]["profile"] == "tiny-t5"
    assert status["embeddingProfile"] == "all-minilm-l6-v2"
    health = (await rpc.call("health"))["result"]
    assert health["ok"] is True


async def test_broken_seq2seq_is_degraded_not_failed(tmp_path: Path) -> None:
    import shutil

    d = tmp_path / "t5"
    shutil.copytree(TINY_T5, d)
    manifest = json.loads((d / "summarizer.json").read_text())
    manifest["sha256"] = {}
    (d / "summarizer.json").write_text(json.dumps(manifest))
    (d / "encoder_model.onnx").write_bytes(b"junk")
    client, app = await _client(
        {"LIBRAVDB_DATA_DIR": str(tmp_path / "data"), "LIBRAVDB_SUMMARIZER_MODEL_PATH": str(d)}
    )
    try:
        res = (await client.call("summarize", {"texts": ["a b", "b c", "c d"]}))["result"]
        assert res["method"] == "extractive" and "encoder_model.onnx" in res["fallbackReason"]
        states = app.component_states()
        assert states["summarizer"].state == "degraded"
        assert health_of(app).ok
    finally:
        await app.close()


async def test_unconfigured_engine_is_a_model_unavailable_error(tmp_path: Path) -> None:
    client, app = await _client(
        {
            "LIBRAVDB_DATA_DIR": str(tmp_path / "data"),
            "LIBRAVDB_EMBEDDING_BACKEND": "onnx-local",
            "LIBRAVDB_EMBEDDING_MODEL": str(tmp_path / "missing"),
        }
    )
    try:
        err = await client.call("embed", {"texts": ["x"]})
        assert err["error"]["code"] == -32004
        assert "missing" in err["error"]["message"]
        health = (await client.call("health"))["result"]
        assert health["ok"] is False and "embedder" in health["message"]
    finally:
        await app.close()
