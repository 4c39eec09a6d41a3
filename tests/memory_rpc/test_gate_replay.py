"""scripts/eval_gate.py replays the gate as ingest runs it: for turns ingested one at a
time, the replay's decisions are the daemon's."""

from __future__ import annotations

import numpy as np

from scripts.eval_gate import load, replay
from sidecar.memory.ingest.gate import DEFAULT_CONFIG
from tests.memory_rpc.conftest import Harness, hash_embed


async def test_replay_matches_ingest(harness: Harness) -> None:
    for conv in load()[:3]:
        said: list[bool] = []
        for i, text in enumerate(conv.texts):
            msg = {"id": f"t{i}", "role": "user", "content": text}
            out = await harness.call(
                "ingest",
                {"sessionId": conv.id, "userId": conv.id, "messages": [msg], "explain": True},
            )
            said.append(out["messages"][0]["durable"])
        vectors = np.asarray(await hash_embed(conv.texts, "document"), dtype=np.float32)
        assert replay(conv.texts, vectors, DEFAULT_CONFIG) == said, conv.id
        assert any(said) and not all(said)
