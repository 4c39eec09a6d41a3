"""Forgetting message ids costs reads per session plus per id, not per id and session.

Regression (issue 32): ``forget {messageIds}`` looked every id up in every session of the
namespace, one keyed read each, twice (before and under the locks): in a namespace of
3,000 sessions, 200 ids took 230 s and held a session's ingest lock long enough that an
ingest waited 50 s. The store's reads are counted here (the real store answers them);
durations belong to benchmarks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.memory_rpc.conftest import Call, Harness

SESSIONS = 120
FORGOTTEN = 30


def _count_calls(monkeypatch: pytest.MonkeyPatch, backend: Any, names: list[str]) -> list[int]:
    calls = [0]
    for name in names:
        real: Callable[..., Any] = getattr(backend, name)

        def counted(*args: Any, _real: Callable[..., Any] = real, **kwargs: Any) -> Any:
            calls[0] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(backend, name, counted)
    return calls


async def test_forget_by_message_ids_reads_per_session_not_per_id_and_session(
    harness: Harness, rpc: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(SESSIONS):
        await rpc(
            "ingest",
            {
                "sessionId": f"s{i}",
                "namespace": "big",
                "messages": [{"id": f"m{i}", "role": "user", "content": f"note number {i}"}],
            },
        )
    wanted = [f"m{i}" for i in range(0, SESSIONS, SESSIONS // FORGOTTEN)]
    reads = _count_calls(monkeypatch, harness.memory.store.store, ["get", "get_many"])

    out = await rpc("forget", {"namespace": "big", "messageIds": wanted})

    assert sorted(i["id"] for i in out["items"]) == sorted(wanted)
    assert out["missing"] == []
    # Before: 2 x SESSIONS x len(wanted) keyed reads (7,200 here) to find the turns alone.
    bound = 4 * SESSIONS + 40 * len(wanted)
    assert reads[0] <= bound, (reads[0], bound)
    left = await rpc("list_collection", {"collection": "turns:big"})
    assert len(left["results"]) == SESSIONS - len(wanted)
