"""Compaction with the real engines: MiniLM embedder and the tiny T5 seq2seq fixture.

High-gating clusters are routed to the seq2seq summarizer. The tiny T5 is random, so its
drafts preserve nothing of the cluster: the preservation gate swaps each for an extractive
summary, and the record keeps both confidences. Emergency auto-compaction
(extractive_only) never runs the model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.api import build_registry
from sidecar.app import App
from sidecar.config import load_settings
from sidecar.engines import EngineHub
from sidecar.memory.compaction.autocompact import Pressure
from sidecar.memory.compaction.compactor import CompactionOptions
from sidecar.memory.service import MemoryService
from sidecar.server.dispatch import Dispatcher
from sidecar.services import install_services
from tests.support import current_store

TINY_T5 = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_t5"


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    settings = load_settings(
        flags={
            "data_dir": str(tmp_path / "data"),
            **current_store().flags(tmp_path / "data"),
            "summarizer.model": str(TINY_T5),
            "summarizer.backend": "onnx-local",
            "compaction.auto": False,
        },
        env={},
    )
    app = App(settings)
    install_services(app)
    await app.start()
    try:
        yield app
    finally:
        await app.close()


def _seq2seq_uses(app: App) -> int:
    seq = app.service(EngineHub).summarizer.seq2seq
    assert seq is not None, "the tiny T5 is configured"
    return int(seq.slot.snapshot()["uses"])


async def _turns(app: App, sid: str, n: int) -> None:
    dispatcher = Dispatcher(app, build_registry())

    async def send(_line: bytes) -> None:
        return None

    for i in range(n):
        meta: dict[str, Any] = {
            "role": "user" if i % 2 == 0 else "assistant",
            "ts": 1000 + i,
            "sessionId": sid,
            "gating_score": 0.9,  # technical, specific turns: routed to seq2seq
        }
        text = f"the deploy of service {i} failed with ERR_LOCK_TIMEOUT in migrate.py step {i}"
        params = {"sessionId": sid, "id": f"{sid}:t{i:03d}", "text": text, "metadata": meta}
        frame = {"jsonrpc": "2.0", "id": i, "method": "insert_session_turn", "params": params}
        reply = json.loads(
            await dispatcher.handle_frame(json.dumps(frame).encode(), 1, send) or b""
        )
        assert reply["result"] == {"ok": True}


async def test_high_gating_clusters_go_to_seq2seq_and_weak_drafts_are_swapped(app: App) -> None:
    mem = app.service(MemoryService)
    await _turns(app, "s", 16)
    out = await mem.compact("s", CompactionOptions.from_settings(app.settings, target_size=4))
    assert out.did_compact and out.summary_ids
    recs = await mem.store.get_many("session_summary:s", out.summary_ids)
    assert len(recs) == len(out.summary_ids)
    assert _seq2seq_uses(app) >= len(recs)  # every cluster was sent to the model
    for r in recs:
        meta = r.metadata
        assert meta["confidence_nomic"] < 0.5  # that preserved little of the cluster
        assert meta["method"] == "extractive"  # so the gate swapped in an extractive one
        assert r.text and meta["summary_tokens"] < meta["input_tokens"]
    assert out.summary_method == "extractive"


async def test_emergency_compaction_skips_seq2seq(app: App) -> None:
    mem = app.service(MemoryService)
    assert mem._auto_options(Pressure.SOFT) is None
    opts = mem._auto_options(Pressure.EMERGENCY)
    assert opts is not None and opts.extractive_only
    await _turns(app, "e", 16)
    out = await mem.compact("e", opts)
    assert out.did_compact and out.summary_method == "extractive"
    assert _seq2seq_uses(app) == 0  # the model was never run
