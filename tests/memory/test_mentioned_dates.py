"""Relative dates in a turn are resolved against when it was said (ingest stores them),
and temporal questions match what a turn talks about, not only when it was said."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from sidecar.memory.core.temporal import mentioned_windows, plan_temporal
from tests.memory_rpc.conftest import make_harness


def ms(y: int, m: int, d: int) -> int:
    return int(datetime(y, m, d, 12, tzinfo=UTC).timestamp() * 1000)


def day(stamp: int) -> str:
    return datetime.fromtimestamp(stamp / 1000, tz=UTC).strftime("%Y-%m-%d")


def test_relative_dates_resolve_against_the_turn() -> None:
    said = ms(2023, 5, 8)
    [yesterday] = mentioned_windows("I went to the support group yesterday.", said)
    assert (day(int(yesterday[0])), yesterday[2]) == ("2023-05-07", "day")
    [last_month] = mentioned_windows("Last month I finally visited Rome.", ms(2023, 6, 20))
    assert day(int(last_month[0])) == "2023-05-01" and last_month[2] == "month"
    assert mentioned_windows("I like tea.", said) == []
    assert mentioned_windows("May I ask something?", said) == []  # the modal, not the month
    assert mentioned_windows("yesterday", 0) == []


def test_mention_affinity() -> None:
    plan = plan_temporal("Where did I go in May 2023?", ms(2023, 7, 1))
    rome = mentioned_windows("Last month I finally visited Rome.", ms(2023, 6, 20))
    assert plan.mention_affinity(rome) == 1.0
    # said on 20 June: outside May and the mention slack, so the time alone is weaker
    assert plan.affinity(ms(2023, 6, 20)) < 1.0
    far = mentioned_windows("Two years ago I lived in Oslo.", ms(2023, 6, 20))
    assert 0.0 <= plan.mention_affinity(far) < 0.5
    assert plan.mention_affinity([["bad"]]) == 0.0


@pytest.mark.usefixtures("store_target")  # both store backends
async def test_ingest_stores_mentions_and_assemble_uses_them(tmp_path: Path) -> None:
    h, close = await make_harness(tmp_path, **{"compaction.auto": False})
    try:
        rpc = h.call
        turns = [
            {
                "id": "r1",
                "role": "user",
                "content": "I went on a trip to Rome last month.",
                "ts": ms(2023, 6, 20),
            },
            {
                "id": "r2",
                "role": "user",
                "content": "I went on a trip to the garden centre.",
                "ts": ms(2023, 3, 2),
            },
        ]
        await rpc("ingest", {"sessionId": "s", "userId": "u", "messages": turns})
        got = (await rpc("memory.get", {"userId": "u", "collection": "turns:u", "id": "s:r1"}))[
            "record"
        ]
        assert [day(int(w[0])) for w in got["metadata"]["mentions"]] == ["2023-05-01"]
        out = await rpc(
            "assemble",
            {
                "sessionId": "new",
                "userId": "u",
                "prompt": "Where did I go on a trip in May 2023?",
                "tokenBudget": 4000,
            },
        )
        times = {
            x["turnIds"][0]: float(x["reason"].split("time=")[1].split()[0])
            for x in out["selected"]
        }
        # r1 was said in June about May: its time matches through what it mentions
        assert times["r1"] == 1.0 and times["r2"] < 0.5, out["selected"]
    finally:
        await close()
