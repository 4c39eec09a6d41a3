"""The compaction barrier as a host sees it: search and assemble caches that were warm
before a compaction serve its summaries right after it, and a forget empties them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.memory_rpc.conftest import make_harness


def _chat(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"m{i:03d}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"note {i}: the greenhouse tomatoes need watering on day {i}",
            "ts": 10_000 + i,
        }
        for i in range(n)
    ]


async def test_search_and_assemble_see_a_compaction_at_once(tmp_path: Path) -> None:
    h, close = await make_harness(tmp_path, **{"compaction.auto": False})
    try:
        await h.call("ingest", {"sessionId": "s", "userId": "u", "messages": _chat(30)})
        query = {"query": "greenhouse tomatoes watering", "userId": "u", "sessionId": "s"}
        before = await h.call("search", {**query, "scopes": ["summary"]})
        assert before["hits"] == []  # warm cache, no summary yet
        warm = await h.call("assemble", {"sessionId": "s", "userId": "u", "tokenBudget": 4000})
        assert not any(i["kind"] == "summary" for i in warm["selected"])

        res = await h.call("compact", {"sessionId": "s", "targetSize": 6})
        assert res["didCompact"]
        after = await h.call("search", {**query, "scopes": ["summary"], "k": 50})
        assert {hit["id"] for hit in after["hits"]} <= set(res["summaryIds"])
        assert after["hits"], "the new summaries are served without waiting for a reload"
        covered = {t for hit in after["hits"] for t in hit["turnIds"]}
        assert covered and covered <= {f"m{i:03d}" for i in range(30)}

        await h.call("forget", {"userId": "u", "includeSessions": True})
        gone = await h.call("search", {**query, "k": 50})
        assert gone["hits"] == []
    finally:
        await close()
