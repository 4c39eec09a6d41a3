"""Ingest's neighbours of a large namespace come from retrieval's view graphs
(memory/ingest/neighbours.py, assembly/view_neighbours.py): scored exactly, so gating and
change marks are what the store's own index gives, without loading that index."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.assembly.service import Retrieval
from sidecar.memory.core import layout as C
from sidecar.memory.ingest import neighbours as N
from sidecar.memory.ingest.sessions import MessageIn
from sidecar.memory.service import MemoryService
from sidecar.store import graph_lazy
from sidecar.store.store import Store
from tests.assembly_rpc.test_retrieval_cache import NS, T0, Harness, _harness, hash_embed

# a view from 20 records is ranked by the store's ANN index, and so gets its own graph
FLAGS = {"store.assemble_ann_rows": 20, "store.exact_threshold": 8}
PLACES = ["Lisbon", "Porto", "Bergen", "Oslo", "Kyoto", "Lima", "Quito", "Hanoi"]
HISTORY = [
    (f"h{i}", role, f"{'I' if role == 'user' else 'You'} talked about {w} and the {x} again.")
    for i, (role, w, x) in enumerate(
        (("user", "assistant")[i % 3 == 2], w, x)
        for i, (w, x) in enumerate(
            (w, x) for w in PLACES for x in ("harbour", "museum", "market", "rain", "trains")
        )
    )
]
LATER = [
    ("n1", "user", "I talked about Porto and the harbour again, the trains too."),
    ("n2", "assistant", "Porto's harbour and trains sound lovely."),
    ("n3", "user", "I live in Kyoto near the museum these days."),
    ("n4", "user", "I moved to Lima, I no longer live in Kyoto near the museum."),
]


@pytest.fixture(autouse=True)
def _small_matrix_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # ingest scores up to this many stored records in one product: the durable memories
    # stay under it, the history (40 turns) goes past it
    monkeypatch.setattr(N, "MATRIX_MIN_ROWS", 20)
    monkeypatch.setattr(N, "MATRIX_ROWS_PER_TURN", 1)


async def _seeded(h: Harness) -> None:
    await h.ingest("s1", HISTORY)
    await h.ask("the harbour in Porto")
    turns = h.retrieval._colls[C.turns(NS)]
    assert turns.graph is not None and turns.graph.wait(60) and turns.dense_mode == "graph"


def _searches(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    asked: list[str] = []
    real: Callable[..., Any] = store.search

    def search(collection: str, *args: Any, **kw: Any) -> Any:
        asked.append(collection)
        return real(collection, *args, **kw)

    monkeypatch.setattr(store, "search", search)
    return asked


async def _ingest_later(h: Harness) -> list[Any]:
    """LATER in two batches: a change is matched against turns stored before its batch."""
    msgs = [MessageIn(r, t, i, T0 + 10**6 + j) for j, (i, r, t) in enumerate(LATER)]
    memory = h.app.service(MemoryService)
    return [await memory.ingest("s2", part, namespace=NS) for part in (msgs[:3], msgs[3:])]


async def test_gating_and_change_marks_equal_the_stores_without_its_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes: dict[str, Any] = {}
    marked: dict[str, Any] = {}
    for way in ("view", "store"):
        async for h in _harness(tmp_path / way, **FLAGS):
            await _seeded(h)
            if way == "store":
                h.app.service(MemoryService).neighbours = None
            asked = _searches(h.store, monkeypatch)
            outcomes[way] = await _ingest_later(h)
            if way == "view":
                assert C.turns(NS) not in asked  # gating and the change's match alike
            else:
                assert C.turns(NS) in asked
            old = h.store.get(C.turns(NS), C.namespace_turn_id("s2", "n3"))
            assert old is not None
            marked[way] = old.metadata.get(C.SUPERSEDED_BY)
    for view, store in zip(outcomes["view"], outcomes["store"], strict=True):
        assert view.admitted == store.admitted
        assert view.gating.keys() == store.gating.keys()
        for tid, got in view.gating.items():
            want = dataclasses.asdict(store.gating[tid])
            for field, value in dataclasses.asdict(got).items():
                assert value == pytest.approx(want[field], abs=1e-5), (tid, field)
    # the change statement superseded the earlier one, found through the view
    assert marked["view"] == marked["store"] == C.namespace_turn_id("s2", "n4")


@pytest.mark.sqlite_only("the store's graph file and its loading are SQLite's")
async def test_an_ingest_leaves_the_stores_idle_graph_unloaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as after a large restart, whose views load their own saved graphs: the store's
    # float32 graph is in its file, and an ingest does not read it into memory
    async for h in _harness(tmp_path, **FLAGS):
        await _seeded(h)
        store = h.store
        assert store.wait_indexed(60)
        store.checkpoint()  # the graph saved as it is
        store.graph_idle_s = 0.0
        assert graph_lazy.unload_idle(store) >= 1
        assert _mode(store) == "saved"
        asked = _searches(store, monkeypatch)
        out = await _ingest_later(h)
        assert sum(o.ingested for o in out) == len(LATER) and C.turns(NS) not in asked
        assert _mode(store) == "saved"


def _mode(store: Store) -> str:
    return {s.collection: s.mode for s in store.index_status()}[C.turns(NS)]


async def test_proposals_scored_exactly_are_the_stores_top_k(tmp_path: Path) -> None:
    async for h in _harness(tmp_path, **FLAGS):
        await _seeded(h)
        retrieval = h.app.service(Retrieval)
        name = C.turns(NS)
        texts = ["Porto harbour", "the museum in Kyoto", "rain in Bergen", "trains"]
        vecs = np.asarray(await hash_embed(texts, "document"), dtype=np.float32)
        for role, k in (("user", 5), ("assistant", 3), (None, 10), ("user", 40)):
            proposed = await N.proposals(retrieval, [(name, k, role)], vecs)
            assert (name, role) in proposed
            got = N.neighbour_scores(h.store, name, vecs, k, role, proposed)
            where = None if role is None else {"role": role}
            for v, scores in zip(vecs, got, strict=True):
                want = [x.score for x in h.store.search(name, v, k, where=where)]
                assert scores == pytest.approx(want, abs=1e-5), (role, k)
        # a role no record has: no neighbours, as the store's filtered search says
        none = await retrieval.neighbour_ids(name, vecs, 5, "tool")
        assert none == [[] for _ in texts]


async def test_no_view_is_loaded_for_ingest(tmp_path: Path) -> None:
    # retrieval proposes only from a view it holds (a load is the next assemble's)
    async for h in _harness(tmp_path, **FLAGS):
        await h.ingest("s1", HISTORY)
        retrieval = h.app.service(Retrieval)
        vecs = np.asarray(await hash_embed(["Porto"], "document"), dtype=np.float32)
        assert await retrieval.neighbour_ids(C.turns(NS), vecs, 5, "user") is None
        assert C.turns(NS) not in retrieval._colls
        # a loaded view behind by puts alone is caught up first: the new turn is proposed
        await _seeded(h)
        await h.ingest("s3", [("p1", "user", "Porto Porto Porto harbour trains")], 5 * 10**6)
        got = await retrieval.neighbour_ids(C.turns(NS), vecs, 1, "user")
        assert got is not None and got[0][0] == C.namespace_turn_id("s3", "p1")
