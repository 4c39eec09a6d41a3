from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sidecar.assembly.dream_query import is_dream_query
from sidecar.memory.core.temporal import DAY_MS, TimeWindow, plan_temporal

NOW = int(datetime(2023, 8, 15, 12, tzinfo=UTC).timestamp() * 1000)


def ms(y: int, m: int, d: int) -> int:
    return int(datetime(y, m, d, tzinfo=UTC).timestamp() * 1000)


def windows(query: str) -> list[tuple[str, str, str]]:
    def day(x: int) -> str:
        return datetime.fromtimestamp(x / 1000, UTC).date().isoformat()

    return [
        (day(w.start_ms), day(w.end_ms), w.granularity) for w in plan_temporal(query, NOW).windows
    ]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Who did Maria have dinner with on May 3, 2023?", [("2023-05-03", "2023-05-04", "day")]),
        ("What did Gina find on 1 February, 2023?", [("2023-02-01", "2023-02-02", "day")]),
        ("What did I buy on 2023-05-03?", [("2023-05-03", "2023-05-04", "day")]),
        ("What happened on the 3rd of June 2023?", [("2023-06-03", "2023-06-04", "day")]),
        ("What setback did Melanie face in October 2023?", [("2023-10-01", "2023-11-01", "month")]),
        ("How many times did I swim in 2022?", [("2022-01-01", "2023-01-01", "year")]),
        ("in May I visited?", [("2023-05-01", "2023-06-01", "month")]),
        ("May 5th plans", [("2023-05-05", "2023-05-06", "day")]),
        ("What did I do yesterday?", [("2023-08-14", "2023-08-15", "day")]),
        ("What did we discuss last week?", [("2023-08-07", "2023-08-14", "week")]),
        ("What happened 3 days ago?", [("2023-08-12", "2023-08-13", "day")]),
        ("What did I do last Tuesday?", [("2023-08-08", "2023-08-09", "day")]),
        (
            "What did John do the week before August 3, 2023?",
            [("2023-07-27", "2023-08-03", "week")],
        ),
        (
            "What is the name of the puppy she got two weeks before August 11, 2023?",
            [("2023-07-28", "2023-08-04", "week")],
        ),
        ("What did I do the day after July 4, 2023?", [("2023-07-05", "2023-07-06", "day")]),
        ("after June 2023 what changed", [("2023-07-01", "2023-08-15", "month")]),
        ("Since January, how many books?", [("2023-01-01", "2023-08-15", "month")]),
        ("What did I buy before March 3, 2023?", [("2022-12-03", "2023-03-03", "month")]),
    ],
)
def test_date_anchors(query: str, expected: list[tuple[str, str, str]]) -> None:
    assert windows(query) == expected


@pytest.mark.parametrize(
    "query",
    [
        "You may want 2 apples",
        "What is the capital of France?",
        "The first draft may be 20 pages",
    ],
)
def test_no_anchor(query: str) -> None:
    assert plan_temporal(query, NOW).windows == ()


def test_content_query_drops_anchors() -> None:
    plan = plan_temporal(
        "What new activity did Maria start recently, as mentioned on 3 June, 2023?", NOW
    )
    assert "June" not in plan.content_query and "2023" not in plan.content_query
    assert "new activity did Maria start" in plan.content_query
    assert "as mentioned" in plan.content_query
    assert plan_temporal("What did I do?", NOW).content_query == "What did I do?"


def test_kinds_order_and_slots() -> None:
    p = plan_temporal("Which came first, Caroline adopting a dog or moving to Sweden?", NOW)
    assert "first" in p.kinds and p.order == "asc"
    assert p.slots == (("carolin", "adopt", "dog"), ("mov", "sweden"))
    p = plan_temporal("How many weeks passed between Maria adopting Coco and Shadow?", NOW)
    assert "how_long" in p.kinds
    assert p.slots == (("maria", "adopt", "coco"), ("shadow",))
    p = plan_temporal("How many days after the concert did I buy the guitar?", NOW)
    assert p.slots == (("concert",), ("buy", "guitar"))
    p = plan_temporal("When was the last time I called mom?", NOW)
    assert p.order == "desc" and "when" in p.kinds
    # "first" in ordinary phrasing is not an ordering question (reference B14)
    p = plan_temporal("What kind of dance piece did the team perform to win first place?", NOW)
    assert p.order is None and not p.active
    assert plan_temporal("When did John have his first firefighter call-out?", NOW).order == "asc"
    assert plan_temporal("Did I go to the gym or the pool first?", NOW).slots == (
        ("go", "gym"),
        ("pool",),
    )


def test_affinity() -> None:
    p = plan_temporal("What did Maria do on May 3, 2023?", NOW, mention_slack_days=3)
    assert p.active
    assert p.affinity(ms(2023, 5, 3) + 3600_000) == 1.0
    assert p.affinity(ms(2023, 5, 5)) == 1.0  # mentioned within the slack after the day
    far = p.affinity(ms(2023, 6, 3))
    near = p.affinity(ms(2023, 5, 8))
    assert 0.0 < far < near < 1.0
    assert p.affinity(None) == 0.0
    assert plan_temporal("no dates here", NOW).affinity(ms(2023, 5, 3)) == 0.0
    times = [
        ms(2023, 5, 3),
        ms(2023, 5, 5),
        ms(2023, 6, 3),
        ms(2023, 5, 8),
        None,
        0,
        ms(2022, 1, 1),
    ]
    assert p.affinities(times).tolist() == pytest.approx([p.affinity(t) for t in times])
    assert plan_temporal("no dates", NOW).affinities(times).tolist() == [0.0] * len(times)


def test_time_window_distance() -> None:
    w = TimeWindow(1000, 2000, "day")
    assert w.distance_ms(1500) == 0
    assert w.distance_ms(500) == 500
    assert w.distance_ms(2500) == 501
    assert w.distance_ms(2500, mention_slack_ms=DAY_MS) == 0


@pytest.mark.parametrize(
    "query",
    [
        "What did I dream about last night?",
        "tell me about my dreams",
        "I had a nightmare, what was it about?",
        "Do you remember the dream I told you about?",
        "dream journal entries from this week",
        "Did I dream about the ocean?",
        "What was my recurring dream?",
        "What was the nightmare about?",
        "Did I have nightmares last week?",
        "I had a dream last night about the sea, what did it mean?",
        "what happened in the dream I had on Monday?",
        "any strange dreams recently?",
    ],
)
def test_dream_queries(query: str) -> None:
    assert is_dream_query(query)


@pytest.mark.parametrize(
    "query",
    [
        "my dream job is being a pilot",
        "it was a dream come true",
        "I'd never dream of it",
        "We listened to Dream Theater",
        "What is your dream car?",
        "the American dream",
        "how do I deploy the service?",
        "a nightmare of a commute",
        "the traffic was a total nightmare",
        # aspirations, not sleep (regression: these all counted as dream questions)
        "My dream is to open a bakery by the sea",
        "What are my dreams and goals for next year?",
        "what was my dream salary again?",
        "summarize my dream project plan",
        "Does Melanie have a dream to become a painter?",
        "I had a dream meeting with the CEO, how did it go?",
        "What are her hopes and dreams?",
    ],
)
def test_not_dream_queries(query: str) -> None:
    assert not is_dream_query(query)
