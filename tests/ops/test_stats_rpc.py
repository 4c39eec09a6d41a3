"""memory.stats through the real dispatcher and store (hash embedder): every count is
checked against what other RPCs report about the same records (ingest's explain,
compact, memory.list, authored.ingest), and the timeline against the records' own ts."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from protocol.codes import ErrorCode
from sidecar.memory.lifecycle.stats import timeline
from tests.memory_rpc.conftest import Harness, hash_embed, make_harness

pytestmark = pytest.mark.usefixtures("store_target")  # both store backends

JAN = 1_704_067_200_000  # 2024-01-01T00:00:00Z
FEB = 1_706_745_600_000  # 2024-02-01
MAR = 1_709_251_200_000  # 2024-03-01
DAY = 86_400_000
FACTS = [
    "Hi! I'm Dana, I work as a nurse in Leeds.",
    "My sister Maya is visiting next month from Toronto.",
    "We are planning a trip to the Lake District together.",
    "I need a vegetarian dinner plan for the week.",
    "My favourite cuisine is Thai food with lots of basil.",
    "I'm allergic to peanuts, never suggest recipes with them.",
    "I cycle to the hospital every morning along the canal.",
    "My cat Biscuit is fourteen years old and very lazy.",
    "I usually cook on Sunday for the whole week ahead.",
    "Remind me that the boiler service is on the ninth.",
    "I'm learning Portuguese for a holiday in Porto.",
    "My running club meets on Thursday evenings by the river.",
    "The dentist appointment moved to Friday at half past three.",
    "Our team at the ward switched to twelve hour night shifts.",
    "I bought a second hand piano and I'm practising scales daily.",
    "My grandmother's recipe for lemon drizzle cake uses yoghurt.",
    "The allotment plot number is forty two near the gate.",
    "I prefer trains to flights when travelling to Scotland.",
    "My laptop is an old ThinkPad that needs a new battery.",
    "The book club is reading a novel about Icelandic fishermen.",
]
DOC = "---\ncore: true\n---\n# Rules\n\n- Always cite the source of a medical claim.\n"


def _chat(prefix: str, texts: list[str], start: int, step: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, text in enumerate(texts):
        ts = start + i * step
        out.append({"id": f"{prefix}u{i}", "role": "user", "content": text, "ts": ts})
        out.append(
            {"id": f"{prefix}a{i}", "role": "assistant", "content": f"Noted {i}.", "ts": ts + 1}
        )
    return out


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    flags: dict[str, Any] = {"compaction.auto": False, "compaction.max_active_summaries": 2}
    harness, close = await make_harness(tmp_path, **flags)
    try:
        yield harness
    finally:
        await close()


async def _listed(h: Harness, ns: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for scope in ("durable", "history", "summary", "elevated", "dream"):
        page = await h.call(
            "memory.list",
            {"namespace": ns, "scope": scope, "limit": 500, "includeSuperseded": True},
        )
        assert page["nextCursor"] == ""
        out += [{**r, "scope": scope} for r in page["records"]]
    return out


def _months(records: list[dict[str, Any]]) -> list[tuple[str, int]]:
    stamps = [r["ts"] for r in records]
    counts = Counter(
        dt.datetime.fromtimestamp(ts / 1000, tz=dt.UTC).strftime("%Y-%m") for ts in stamps
    )
    rows, _ = timeline(stamps, "month")
    assert {r.label for r in rows} >= set(counts)
    return [(r.label, counts.get(r.label, 0)) for r in rows]


async def test_stats_match_what_the_other_methods_report(h: Harness) -> None:
    rpc = h.call
    half = len(FACTS) // 2
    dana = _chat("d", FACTS[:half], JAN + DAY, DAY) + _chat("e", FACTS[half:], MAR + DAY, DAY)
    explained = await rpc(
        "ingest", {"sessionId": "d1", "userId": "dana", "messages": dana, "explain": True}
    )
    durable = [m["id"] for m in explained["messages"] if m["durable"]]
    assert len(durable) >= 2
    compacted = await rpc("compact", {"sessionId": "d1", "force": True, "targetSize": 4})
    assert compacted["didCompact"] is True
    await rpc(
        "memory.update",
        {"namespace": "dana", "collection": "user:dana", "id": f"d1:{durable[0]}", "text": "x"},
    )
    await rpc(
        "ingest", {"sessionId": "b1", "userId": "bo", "messages": _chat("b", FACTS[:2], FEB, DAY)}
    )
    await rpc(
        "ingest",
        {"sessionId": "b2", "userId": "bo", "messages": _chat("c", FACTS[2:3], FEB + 9 * DAY, DAY)},
    )
    doc = await rpc("authored.ingest", {"sourceDoc": "rules.md", "text": DOC})

    out = await rpc("memory.stats")
    assert [n["namespace"] for n in out["namespaces"]] == ["bo", "dana"]
    assert out["bucket"] == "month"
    assert out["authored"] == {
        "documents": 1,
        "hard": doc["hard"],
        "soft": doc["soft"],
        "variant": doc["variant"],
    }
    assert doc["hard"] == 1
    disk = out["disk"]
    assert disk["databaseBytes"] > 0
    assert disk["totalBytes"] == disk["databaseBytes"] + disk["walBytes"] + disk["indexBytes"]

    bo, dana_stats = out["namespaces"]
    listed = await _listed(h, "dana")
    by_scope = Counter(r["scope"] for r in listed)
    summaries = [r for r in listed if r["scope"] == "summary"]
    levels = Counter(int(r["metadata"]["level"]) for r in summaries)
    assert max(levels) >= 2, "max_active_summaries 2 condenses a level up"
    assert len(summaries) == len(compacted["summaryIds"])
    assert dana_stats == {
        "namespace": "dana",
        "records": len(listed),
        "durable": len(durable),
        "superseded": 1,
        "history": len(dana),
        "summary": len(summaries),
        "elevated": by_scope["elevated"],
        "dream": 0,
        "sessions": 1,
        "depth": max(levels),
        "summaryLevels": [{"level": k, "count": levels[k]} for k in sorted(levels)],
        "firstTs": min(r["ts"] for r in listed),
        "lastTs": max(r["ts"] for r in listed),
        "timeline": dana_stats["timeline"],
        "earlier": 0,
        "outOfRange": 0,
    }
    rows = [(b["label"], b["records"]) for b in dana_stats["timeline"]]
    assert rows == _months(listed)
    assert rows[:3] == [
        ("2024-01", Counter(r["ts"] < FEB for r in listed)[True]),
        ("2024-02", 0),
        ("2024-03", len([r for r in listed if MAR <= r["ts"] < MAR + 31 * DAY])),
    ]
    assert sum(b["records"] for b in dana_stats["timeline"]) == len(listed)

    bo_listed = await _listed(h, "bo")
    assert (bo["history"], bo["sessions"], bo["summary"], bo["depth"]) == (6, 2, 0, 0)
    assert bo["records"] == len(bo_listed) and bo["summaryLevels"] == []
    assert [(b["label"], b["records"]) for b in bo["timeline"]] == [("2024-02", len(bo_listed))]

    one = await rpc("memory.stats", {"userId": "bo", "bucket": "week"})
    assert [n["namespace"] for n in one["namespaces"]] == ["bo"]
    weeks = [(b["label"], b["records"]) for b in one["namespaces"][0]["timeline"]]
    # 2024-02-01 is a Thursday of ISO week 5; the second session lands in week 6
    assert [w for w, _ in weeks] == ["2024-W05", "2024-W06"]
    assert sum(n for _, n in weeks) == len(bo_listed)


async def test_an_unknown_namespace_is_all_zeros_and_bad_input_is_refused(h: Harness) -> None:
    out = await h.call("memory.stats", {"namespace": "nobody"})
    (ns,) = out["namespaces"]
    assert ns["records"] == 0 and ns["timeline"] == [] and ns["firstTs"] is None
    err = await h.call("memory.stats", {"namespace": "a/b"}, error=True)
    assert err["code"] == int(ErrorCode.INVALID_INPUT)
    err = await h.call("memory.stats", {"bucket": "year"}, error=True)
    assert err["code"] == int(ErrorCode.INVALID_PARAMS)


@pytest.mark.sqlite_only("no store: the timeline alone")
def test_timeline_keeps_the_newest_buckets_and_counts_the_rest_as_earlier() -> None:
    stamps = [JAN + i * DAY for i in range(300)] + [JAN]
    rows, earlier = timeline(stamps, "day")
    assert len(rows) == 260 and rows[-1].records == 1 and rows[0].label == "2024-02-10"
    assert earlier == 41 and sum(r.records for r in rows) + earlier == len(stamps)


LAST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, the last accepted ts


async def _store_bad_ts(h: Harness, ns: str, stamps: list[int]) -> None:
    """Records dated outside the accepted range, as a store written before ingest checked
    ts holds them (put straight into the store: every entry refuses them now)."""
    store = h.memory.store
    vec = (await hash_embed(["bad"], "document"))[0]
    for i, ts in enumerate(stamps):
        await store.put(f"turns:{ns}", f"bad{i}", text="bad", metadata={"ts": ts}, vector=vec)


async def test_a_record_dated_9999_or_past_it_does_not_break_stats(h: Harness) -> None:
    """One record in the year 9999 made memory.stats fail with -32603 for every namespace
    (OverflowError): the timeline stops at the last accepted instant, and records stored
    with a ts outside the range are counted apart, not charted."""
    await h.call(
        "ingest", {"sessionId": "b1", "userId": "bo", "messages": _chat("b", FACTS[:2], FEB, DAY)}
    )
    await h.call(
        "ingest",
        {
            "sessionId": "z1",
            "userId": "zed",
            "messages": [
                {"id": "z0", "role": "user", "content": FACTS[3], "ts": JAN},
                {"id": "z1", "role": "user", "content": FACTS[4], "ts": LAST_MS},
            ],
        },
    )
    await _store_bad_ts(h, "zed", [LAST_MS + 1, 1_704_067_200_000_000, -5, 2**62])
    listed = await _listed(h, "zed")
    dated = Counter(r["ts"] for r in listed)
    assert set(dated) == {JAN, LAST_MS, LAST_MS + 1, 1_704_067_200_000_000, -5, 2**62}
    for bucket in ("month", "week", "day"):
        out = await h.call("memory.stats", {"bucket": bucket})
        bo, zed = out["namespaces"]
        assert bo["outOfRange"] == 0 and bo["timeline"]
        assert zed["records"] == len(listed) and zed["history"] == 6
        assert zed["outOfRange"] == 4
        assert (zed["firstTs"], zed["lastTs"]) == (JAN, LAST_MS)
        rows = zed["timeline"]
        assert len(rows) == 260 and rows[-1]["records"] == dated[LAST_MS]
        assert (
            rows[-1]["label"]
            == {"month": "9999-12", "week": "9999-W52", "day": "9999-12-31"}[bucket]
        )
        assert zed["earlier"] == dated[JAN] and sum(r["records"] for r in rows) == dated[LAST_MS]


async def test_a_day_timeline_over_eight_thousand_years_keeps_260_rows(h: Harness) -> None:
    """A day bucket over a wide range built one row per day of the span before keeping 260
    (16 s and +430 MB from 1970 to 9999): now only the rows kept are built."""
    await h.call(
        "ingest",
        {
            "sessionId": "w1",
            "userId": "wide",
            "messages": [
                {"id": "w0", "role": "user", "content": FACTS[0], "ts": 0},
                {"id": "w1", "role": "user", "content": FACTS[1], "ts": LAST_MS},
            ],
        },
    )
    dated = Counter(r["ts"] for r in await _listed(h, "wide"))
    assert set(dated) == {0, LAST_MS}
    out = await h.call("memory.stats", {"namespace": "wide", "bucket": "day"})
    (ns,) = out["namespaces"]
    rows = ns["timeline"]
    assert len(rows) == 260 and ns["earlier"] == dated[0] and ns["outOfRange"] == 0
    assert [r["label"] for r in rows[-4:]] == [
        "9999-12-28",
        "9999-12-29",
        "9999-12-30",
        "9999-12-31",
    ]
    assert [r["records"] for r in rows[-4:]] == [0, 0, 0, dated[LAST_MS]]
    assert rows[-1]["startMs"] - rows[0]["startMs"] == 259 * DAY


@pytest.mark.sqlite_only("no store: the timeline alone")
def test_week_and_month_keys_start_where_the_calendar_does() -> None:
    epoch_week, _ = timeline([0, 4 * DAY - 1], "week")  # Thursday 1970-01-01 .. Sunday
    assert [(r.label, r.start_ms, r.records) for r in epoch_week] == [("1970-W01", -3 * DAY, 2)]
    months, _ = timeline([JAN, FEB - 1, FEB, MAR + 40 * DAY], "month")
    assert [(r.label, r.start_ms, r.records) for r in months] == [
        ("2024-01", JAN, 2),
        ("2024-02", FEB, 1),
        ("2024-03", MAR, 0),
        ("2024-04", MAR + 31 * DAY, 1),
    ]
    assert timeline([-1, LAST_MS + 1], "day") == ([], 0)
