"""The pure parts of the UI: escaping, the facts it states about a record, the charts'
geometry, the --http address rules."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from sidecar.ui import charts
from sidecar.ui.address import parse_address
from sidecar.ui.cache import ReadCache
from sidecar.ui.formats import day_bounds, kept_because, parse_ref, ref, score_parts, size, when
from sidecar.ui.html import el, join, raw
from sidecar.ui.security import Guard, check_csrf


def test_text_is_escaped_and_markup_is_not() -> None:
    hostile = '<script>alert("x")</script>'
    page = el("p", hostile, title=hostile)
    assert page == (
        '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;">'
        '&lt;script&gt;alert("x")&lt;/script&gt;</p>'
    )
    assert join(raw("<b>"), "<b>", None, [1, 2.5]) == "<b>&lt;b&gt;12.5"
    assert el("input", disabled=True, hidden=False, value=None) == "<input disabled>"
    assert el("label", "x", for_="q", aria_label="y") == '<label for="q" aria-label="y">x</label>'


def test_why_a_record_was_kept() -> None:
    gate = {
        "gating_score": 0.4123,
        "gating_threshold": 0.21,
        "gating_admitted": True,
        "role": "user",
    }
    assert kept_because("user:a", gate) == "durable: gate score 0.412 >= 0.210"
    assert kept_because("user:a", {**gate, "stated_fact": True}) == (
        "durable: stated as a fact (gate score 0.412)"
    )
    below = {**gate, "gating_score": 0.1, "gating_admitted": False}
    assert kept_because("turns:a", below) == "stored; not durable: gate score 0.100 < 0.210"
    reply = {**below, "role": "assistant"}
    assert kept_because("turns:a", reply) == (
        "stored; not durable: only user messages are (assistant message)"
    )
    assert (
        kept_because("user:a", {"superseded_by": "s:1"}) == "an earlier version, superseded by s:1"
    )
    corrected = {"provenance_class": "user_update", "updated_at": 0, "revision": 2}
    assert kept_because("user:a", corrected) == (
        "corrected by hand on 1970-01-01 00:00 UTC (revision 2)"
    )
    summary = {"level": 2, "method": "extractive", "source_ids": ["x", "y"]}
    assert kept_because("session_summary:s", summary) == (
        "summary, level 2, of 2 item(s) by compaction (extractive)"
    )
    assert kept_because("elevated:user:a", {}).startswith("guidance")
    assert kept_because("dream:a", {}) == "promoted from a dream diary"
    assert kept_because("turns:a", {}) == "stored"
    index_copy = {"gating_score": 0.5, "gating_admitted": True, "role": "user"}
    assert kept_because("turns:a", index_copy) == "durable: gate score 0.500, admitted by the gate"
    index_copy = {**index_copy, "gating_admitted": False}
    assert kept_because("turns:a", index_copy) == (
        "stored; not durable: gate score 0.500, below the gate's threshold"
    )


def test_dates_and_sizes() -> None:
    assert day_bounds("2026-01-05", end=False) == 1_767_571_200_000
    assert day_bounds("2026-01-05", end=True) == 1_767_657_599_999
    assert day_bounds(" ", end=True) is None
    with pytest.raises(ValueError, match="not a date"):
        day_bounds("yesterday", end=False)
    assert when(None) == "undated"
    assert when(1_767_571_200_000) == "2026-01-05 00:00 UTC"
    assert (size(512), size(2048), size(3 * 2**30)) == ("512 B", "2.0 KiB", "3.0 GiB")


def test_record_references_survive_any_id() -> None:
    for collection, record_id in (("user:a", "s1:m1"), ("turns:x", "a/b c%d~v1")):
        assert parse_ref(ref(collection, record_id)) == (collection, record_id)
    with pytest.raises(ValueError):
        parse_ref("no-slash")


def test_score_parts() -> None:
    assert score_parts("retrieval: dense=0.263 bm25=0.00 ctx=0.906") == (
        "retrieval",
        [("dense", "0.263"), ("bm25", "0.00"), ("ctx", "0.906")],
    )
    assert score_parts("dense=0.2 ctx=0.5") == ("", [("dense", "0.2"), ("ctx", "0.5")])
    assert score_parts("hard rule") == ("", [])


def test_charts_scale_to_the_largest_value() -> None:
    svg = charts.columns([("2026-01", 5), ("2026-02", 10), ("2026-03", 0)], title="t")
    assert svg.count('class="bar"') == 3
    assert 'height="180.00"' in svg and 'height="90.00"' in svg and 'height="0.00"' in svg
    assert "2026-01" in svg and "2026-02" in svg and "2026-03" in svg  # first, middle, last
    table = charts.rows([("durable", 4), ("history", 8)], title="t")
    assert 'width="50.00"' in table and 'width="100.00"' in table
    stacked = charts.stacked([("hard", 25), ("tail", 0), ("soft", 25)], 100, title="t")
    assert stacked.count('class="bar') == 2 and 'width="180.00"' in stacked
    # every bar carries its tooltip
    assert svg.count("<title>") == 4 and table.count("<title>") == 2
    assert stacked.count("<title>") == 3 and "hard: 25 tokens" in stacked
    assert charts.columns([], title="t") == '<p class="muted">No dated records.</p>'


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("127.0.0.1:0", "127.0.0.1", 0),
        ("[::1]:8765", "::1", 8765),
        ("LOCALHOST:1", "localhost", 1),
        ("127.9.9.9:80", "127.9.9.9", 80),
    ],
)
def test_loopback_addresses(text: str, host: str, port: int) -> None:
    address = parse_address(text)
    assert (address.host, address.port) == (host, port)


@pytest.mark.parametrize(
    "text", ["0.0.0.0:1", "10.0.0.1:1", "host:1", "127.0.0.1:x", "127.0.0.1:70000", ":1"]
)
def test_other_addresses_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--http"):
        parse_address(text)


def test_the_guard_knows_its_names_and_its_tokens() -> None:
    guard = Guard(port=8765, hosts=parse_address("127.0.0.1:0").names(8765))
    assert guard.host_ok("127.0.0.1:8765") and guard.host_ok("LOCALHOST:8765")
    assert not guard.host_ok("127.0.0.1:8766") and not guard.host_ok("evil.example:8765")
    assert guard.origin_ok("http://localhost:8765")
    assert not guard.origin_ok("http://127.0.0.1:9999") and not guard.origin_ok("null")
    assert guard.token_ok(guard.token) and not guard.token_ok(guard.token + "x")
    assert check_csrf(guard, {"csrf": [guard.csrf]})
    assert not check_csrf(guard, {"csrf": [""]}) and not check_csrf(guard, {})
    assert Guard(port=1, hosts=frozenset()).token != guard.token


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_the_cache_keeps_answers_for_its_ttl() -> None:
    clock = Clock()
    cache = ReadCache(ttl_s=30, size=2, clock=clock)
    calls: list[str] = []

    def loader(key: str) -> Callable[[], Awaitable[str]]:
        async def load() -> str:
            calls.append(key)
            return f"{key}{len(calls)}"

        return load

    assert (await cache.get("a", loader("a")))[0] == "a1"
    assert (await cache.get("a", loader("a")))[0] == "a1"  # kept
    assert (await cache.get("a", loader("a"), fresh=True))[0] == "a2"  # Refresh
    clock.now = 31
    assert (await cache.get("a", loader("a")))[0] == "a3"  # too old
    cache.clear()
    assert (await cache.get("a", loader("a")))[0] == "a4"  # a write went through the UI
    await cache.get("b", loader("b"))
    await cache.get("c", loader("c"))  # past the size: "a", the least recently used, goes
    assert (await cache.get("a", loader("a")))[0] == "a7"
    assert calls == ["a", "a", "a", "a", "b", "c", "a"]
    assert cache.peek("a") == "a7" and cache.peek("b") is None  # "b" went for "a"
    clock.now = 100
    assert cache.peek("a") is None  # too old to show


async def test_the_cache_shares_one_call_and_keeps_no_failure() -> None:
    cache = ReadCache()
    release = asyncio.Event()
    calls = 0

    async def slow() -> int:
        nonlocal calls
        calls += 1
        await release.wait()
        return calls

    first = asyncio.ensure_future(cache.get("k", slow))
    second = asyncio.ensure_future(cache.get("k", slow))
    await asyncio.sleep(0)
    release.set()
    assert [(await first)[0], (await second)[0]] == [1, 1]
    assert calls == 1

    async def broken() -> int:
        raise RuntimeError("daemon gone")

    with pytest.raises(RuntimeError):
        await cache.get("x", broken)
    assert (await cache.get("x", slow))[0] == 2  # the failure was not kept


async def test_a_load_begun_before_a_write_is_not_kept() -> None:
    cache = ReadCache()
    release = asyncio.Event()
    answers = iter(["before the write", "after the write"])

    async def load() -> str:
        await release.wait()
        return next(answers)

    pending = asyncio.ensure_future(cache.get("k", load))
    await asyncio.sleep(0)
    cache.clear()
    release.set()
    assert (await pending)[0] == "before the write"
    assert (await cache.get("k", load))[0] == "after the write"
