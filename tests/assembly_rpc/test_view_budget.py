"""The views' memory budget (``cache.max_bytes``) and the ``status.cache`` figures."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sidecar.assembly.view_budget import view_bytes
from sidecar.memory.core import layout as C
from tests.assembly_rpc.test_retrieval_cache import HISTORY, NS, Harness, _harness


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    async for harness in _harness(tmp_path):
        yield harness


@pytest.fixture
async def small(tmp_path: Path) -> AsyncIterator[Harness]:
    # room for about one namespace's views: a second namespace's evicts the first's
    async for harness in _harness(tmp_path, **{"cache.max_bytes": 40_000}):
        yield harness


async def _ask(h: Harness, ns: str, prompt: str) -> None:
    await h.call(
        "assemble", {"sessionId": "fresh", "namespace": ns, "prompt": prompt, "tokenBudget": 4000}
    )


async def _ingest(h: Harness, ns: str) -> None:
    msgs = [
        {"id": f"{ns}-{tid}", "role": role, "content": text, "ts": 1_700_000_000_000 + j}
        for j, (tid, role, text) in enumerate(HISTORY * 3)
    ]
    await h.call("ingest", {"sessionId": f"s-{ns}", "namespace": ns, "messages": msgs})


async def test_status_shows_the_cache(h: Harness) -> None:
    await h.ingest("s1", HISTORY)
    before = (await h.call("status"))["cache"]
    assert before["maxBytes"] == 1 << 30
    await h.ask("Where does Biscuit play?")
    first = (await h.call("status"))["cache"]
    assert first["views"] >= 2 and first["bytes"] > 0
    assert first["loads"] > before["loads"] and first["loadMs"] >= 0
    await h.ask("What breed is Biscuit?")  # nothing changed: every view is a hit
    second = (await h.call("status"))["cache"]
    assert second["loads"] == first["loads"]
    assert second["hits"] >= first["hits"] + second["views"] - 1
    assert second["evictions"] == 0
    # the figure is the sum of the views' estimates
    views = h.retrieval._colls.values()
    assert second["bytes"] == sum(view_bytes(v) for v in views)


async def test_least_recently_used_views_are_dropped_past_the_budget(small: Harness) -> None:
    h = small
    for ns in ("a", "b"):
        await _ingest(h, ns)
    await _ask(h, "a", "Where does Biscuit play?")
    assert C.turns("a") in h.retrieval._colls
    got_a = await h.call(
        "assemble",
        {"sessionId": "fresh", "namespace": "a", "prompt": "tennis balls", "tokenBudget": 4000},
    )
    await _ask(h, "b", "Where does Biscuit play?")  # b's views push a's out
    colls = h.retrieval._colls
    assert C.turns("b") in colls and C.turns("a") not in colls
    fig = h.retrieval.figures
    assert fig.evictions > 0
    # over the budget with b's own views alone: every other view was dropped
    assert fig.bytes > fig.max_bytes
    assert C.user("a") not in colls and C.user("b") in colls
    # a is read again on demand and answers the same
    loads = fig.loads
    again = await h.call(
        "assemble",
        {"sessionId": "fresh", "namespace": "a", "prompt": "tennis balls", "tokenBudget": 4000},
    )
    assert fig.loads > loads
    assert [i["id"] for i in again["selected"]] == [i["id"] for i in got_a["selected"]]


async def test_a_request_for_one_collection_keeps_its_namespace_views(tmp_path: Path) -> None:
    # a request for one collection over the budget drops other namespaces' views, never
    # its own namespace's: alternating requests for a namespace's collections would
    # otherwise drop and reload each other (and restart their graphs) for ever
    flags = {"cache.max_bytes": 40_000, "server.debug_methods": True}
    async for h in _harness(tmp_path, **flags):
        for ns in ("a", "b"):
            await _ingest(h, ns)
        await _ask(h, "b", "Where does Biscuit play?")
        await _ask(h, "a", "Where does Biscuit play?")
        colls = h.retrieval._colls
        assert C.turns("a") in colls and C.user("a") in colls
        loads = h.retrieval.figures.loads
        for coll in (C.turns("a"), C.user("a"), C.turns("a")):
            got = await h.call("debug.denseTop", {"collection": coll, "query": "tennis", "k": 3})
            assert got["ids"]
        assert C.turns("a") in colls and C.user("a") in colls
        assert h.retrieval.figures.loads == loads  # nothing read again
        assert C.turns("b") not in colls


@pytest.mark.sqlite_only("names only: no store opened")
def test_a_collection_names_its_namespace() -> None:
    assert C.namespace_of(C.turns("ns:x")) == "ns:x"
    assert C.namespace_of(C.user("u")) == "u"
    assert C.namespace_of(C.elevated_user("u")) == "u"
    assert C.namespace_of(C.dream("u")) == "u"
    assert C.namespace_of(C.session_raw("s")) is None
    assert C.namespace_of("global") is None


async def test_a_request_never_drops_its_own_views(tmp_path: Path) -> None:
    # a budget smaller than one namespace: its views stay while it is asked
    async for h in _harness(tmp_path, **{"cache.max_bytes": 1}):
        await h.ingest("s1", HISTORY)
        res = await h.ask("Where does Biscuit play?")
        assert res["selected"]
        assert C.turns(NS) in h.retrieval._colls
        assert h.retrieval.figures.bytes > 1


@pytest.mark.sqlite_only("a setting: no store opened")
def test_the_budget_is_a_setting() -> None:
    from sidecar.config import ConfigError, load_settings

    env = {"LIBRAVDB_CACHE_MAX_BYTES": "12345"}
    assert load_settings(env=env).cache.max_bytes == 12345
    with pytest.raises(ConfigError):
        load_settings(flags={"cache.max_bytes": -1}, env={})
