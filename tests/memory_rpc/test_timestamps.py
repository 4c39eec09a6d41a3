"""Timestamps outside the accepted range (epoch milliseconds, 1970-01-01 to 9999-12-31)
are refused with -32009 and a message that says the range, at every entry that takes one:
v2 ``ingest``, v1 writes and dream promotions whose metadata carries a numeric ``ts``, and
``import``. A
microsecond ``ts`` at ingest used to fail with -32603 (``year 55969 is out of range``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest

from protocol.codes import ErrorCode
from sidecar.store.errors import InvalidInput
from sidecar.store.timestamps import TS_MAX_MS
from tests.memory_rpc.conftest import Harness

MICROS = 1_704_067_200_000_000  # 2024-01-01 in microseconds: the year 55969 as ms
INVALID = int(ErrorCode.INVALID_INPUT)


def _turn(mid: str, ts: Any) -> dict[str, Any]:
    return {"id": mid, "role": "user", "content": f"I moved to Leeds {mid}", "ts": ts}


@pytest.mark.parametrize(
    ("ts", "words"),
    [
        (MICROS, "looks like microseconds"),
        (MICROS * 1000, "looks like nanoseconds"),
        (TS_MAX_MS + 1, "9999-12-31T23:59:59.999Z"),
        (-1, "1970-01-01"),
        (2**63, "outside the accepted range"),
    ],
)
async def test_ingest_refuses_a_ts_outside_the_range(harness: Harness, ts: int, words: str) -> None:
    err = await harness.call(
        "ingest",
        {"sessionId": "s", "userId": "u", "messages": [_turn("a", 1), _turn("b", ts)]},
        error=True,
    )
    assert err["code"] == INVALID
    assert err["message"].startswith("messages[1].ts ")
    assert words in err["message"] and "epoch milliseconds" in err["message"]
    listed = await harness.call("memory.list", {"namespace": "u", "scope": "history"})
    assert listed["records"] == []  # nothing of the batch was written


async def test_ingest_takes_both_ends_of_the_range(harness: Harness) -> None:
    out = await harness.call(
        "ingest",
        {"sessionId": "s", "userId": "u", "messages": [_turn("a", 0), _turn("b", TS_MAX_MS)]},
    )
    assert out["ingested"] == 2
    listed = await harness.call("memory.list", {"namespace": "u", "scope": "history"})
    assert sorted(r["ts"] for r in listed["records"]) == [0, TS_MAX_MS]


@pytest.mark.parametrize(
    "method",
    ["insert_text", "insert_session_turn"],
)
@pytest.mark.parametrize("ts", [MICROS, str(MICROS), -2.5, float(TS_MAX_MS + 1)])
async def test_v1_writes_refuse_a_metadata_ts_outside_the_range(
    harness: Harness, method: str, ts: Any
) -> None:
    params: dict[str, Any] = {"id": "r1", "text": "the boiler service is on the ninth"}
    params |= {"collection": "user:u1"} if method == "insert_text" else {"sessionId": "s1"}
    err = await harness.call(method, {**params, "metadata": {"ts": ts}}, error=True)
    assert err["code"] == INVALID
    assert "metadata.ts" in err["message"] and "epoch milliseconds" in err["message"]
    # a ts the store does not read as a time (a date string) is kept as the reference did
    ok = await harness.call(method, {**params, "metadata": {"ts": "2024-01-01"}})
    assert ok == {"ok": True}
    ok = await harness.call(method, {**params, "metadata": {"ts": TS_MAX_MS}})
    assert ok == {"ok": True}


@pytest.mark.parametrize("method", ["dream.promote", "promote_dream_entries"])
async def test_dream_promotion_refuses_an_entry_dated_outside_the_range(
    harness: Harness, method: str
) -> None:
    entry = {
        "text": "The user waters the allotment every evening in summer.",
        "score": 0.9,
        "recallCount": 3,
        "uniqueQueries": 3,
        "metadata": {"ts": MICROS},
    }
    params = {"userId": "u1", "sourceDoc": "diary.md", "entries": [entry]}
    err = await harness.call(method, params, error=True)
    assert err["code"] == INVALID
    assert err["message"].startswith("entries[0].metadata.ts ")
    assert "looks like microseconds" in err["message"]
    entry["metadata"] = {"ts": 1_704_067_200_000}
    await harness.call(method, params)  # accepted in range


def _export(records: list[dict[str, Any]]) -> list[str]:
    head = {"kind": "header", "format": "libravdb-store", "version": 1, "fingerprint": ""}
    lines = [head, {"kind": "collection", "name": "user:u1"}, *records, {"kind": "end"}]
    return [json.dumps(line) + "\n" for line in lines]


@pytest.mark.parametrize(
    ("record", "words"),
    [
        ({"metadata": {"ts": MICROS}}, "metadata.ts"),
        ({"metadata": {"ts": 1}, "created_ms": -86_400_000}, "created_ms"),
        ({"created_ms": TS_MAX_MS + 1}, "created_ms"),
    ],
)
async def test_import_refuses_a_record_dated_outside_the_range(
    harness: Harness, record: dict[str, Any], words: str
) -> None:
    store = harness.memory.store.store
    good = {"kind": "record", "collection": "user:u1", "id": "ok", "text": "fine"}
    bad = {"kind": "record", "collection": "user:u1", "id": "bad", "text": "odd", **record}
    with pytest.raises(InvalidInput) as caught:
        await asyncio.to_thread(store.import_ndjson, _export([good, bad]), embed=_embed)
    message = str(caught.value)
    assert message.startswith("line 4: ") and words in message
    assert "epoch milliseconds" in message
    assert store.get("user:u1", "bad") is None


def _embed(texts: list[str]) -> Any:
    return np.ones((len(texts), 32), dtype=np.float32)
