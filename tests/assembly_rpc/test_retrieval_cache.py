"""The retrieval caches behind ``assemble``: incremental updates on ingest, fallbacks,
the durable->history cosine map, authored notices and coalesced access bumps.

In-process (real dispatcher, store and memory service) with a deterministic hash
embedder, so the tests can look at the cache state after each RPC.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.api import build_registry
from sidecar.app import App
from sidecar.assembly.cache import CollectionView as _Coll
from sidecar.assembly.scoring import access_count
from sidecar.assembly.service import DAEMON_ASSEMBLY, Retrieval
from sidecar.assembly.speaker_focus import without_labels
from sidecar.assembly.view_inputs import durable_top
from sidecar.assembly.view_where import rows_where
from sidecar.config import load_settings
from sidecar.memory.core import bm25_topk, lexical
from sidecar.memory.core import layout as C
from sidecar.memory.ingest import neighbours as N
from sidecar.memory.service import MemoryService
from sidecar.server.dispatch import Dispatcher
from sidecar.services import install_memory
from sidecar.store.service import StoreService
from sidecar.store.store import Store
from sidecar.store.types import Put
from tests.support import current_store, hash_embedder, open_test_store

DIMS = 32
NS = "u1"
T0 = 1_700_000_000_000
Call = Callable[..., Awaitable[Any]]


hash_embed = hash_embedder(DIMS)


class Harness:
    def __init__(self, app: App, call: Call, reply: Call) -> None:
        self.app = app
        self.call = call
        self.reply = reply  # the whole JSON-RPC reply, errors included

    @property
    def retrieval(self) -> Retrieval:
        return self.app.service(Retrieval)

    @property
    def store(self) -> Store:
        return self.app.service(MemoryService).store.store

    def coll(self, name: str) -> _Coll:
        return self.retrieval._colls[name]

    async def ingest(self, sid: str, turns: Sequence[tuple[str, str, str]], t: int = 0) -> None:
        msgs = [
            {"id": tid, "role": role, "content": text, "ts": T0 + t + j * 1000}
            for j, (tid, role, text) in enumerate(turns)
        ]
        await self.call("ingest", {"sessionId": sid, "namespace": NS, "messages": msgs})

    async def ask(self, prompt: str, sid: str = "fresh") -> dict[str, Any]:
        res: dict[str, Any] = await self.call(
            "assemble", {"sessionId": sid, "namespace": NS, "prompt": prompt, "tokenBudget": 4000}
        )
        return res


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    async for harness in _harness(tmp_path):
        yield harness


async def _harness(tmp_path: Path, **flags: Any) -> AsyncIterator[Harness]:
    settings = load_settings(
        flags={
            "data_dir": str(tmp_path / "data"),
            "compaction.auto": False,
            **current_store().flags(tmp_path / "data"),
            **flags,
        },
        env={},
    )
    app = App(settings)
    store_svc = StoreService(settings, embed=hash_embed, embed_dims=DIMS, fingerprint="hash")
    app.provide(StoreService, store_svc)
    install_memory(app, store_svc)
    await app.start()
    dispatcher = Dispatcher(app, build_registry())
    counter = iter(range(1, 10**9))

    async def send(_line: bytes) -> None:
        return None

    async def reply(method: str, params: Any = None) -> Any:
        msg = {"jsonrpc": "2.0", "id": next(counter), "method": method, "params": params}
        raw = await dispatcher.handle_frame(json.dumps(msg).encode(), 1, send)
        assert raw is not None
        return json.loads(raw)

    async def call(method: str, params: Any = None) -> Any:
        got = await reply(method, params)
        assert "error" not in got, got
        return got["result"]

    try:
        yield Harness(app, call, reply)
    finally:
        await app.close()


HISTORY = [
    ("a1", "user", "I adopted a golden retriever puppy named Biscuit last week."),
    ("a2", "assistant", "Congratulations on adopting Biscuit! How is the puppy doing?"),
    ("a3", "user", "Biscuit loves chasing tennis balls in the park."),
    ("a4", "assistant", "Tennis balls are a classic retriever favourite."),
]


def _turn_ids(res: dict[str, Any]) -> set[str]:
    return {t for item in res["selected"] for t in item["turnIds"]}


def _same_as_fresh(coll: _Coll, store: Store) -> None:
    """The incrementally updated view holds what a full reload would."""
    fresh = _Coll(coll.name)
    fresh.reload(store, store.collection_states([coll.name])[coll.name])
    assert sorted(coll.by_id) == sorted(fresh.by_id)
    assert len(coll.records) == len(coll.cands) == len(coll.by_id)
    mat, fmat = coll.matrix, fresh.matrix
    assert mat is not None and fmat is not None
    for rid, i in fresh.by_id.items():
        j = coll.by_id[rid]
        assert np.array_equal(mat[j], fmat[i])
        assert coll.cands[j].text == fresh.cands[i].text
        assert coll.cands[j].turn_ids == fresh.cands[i].turn_ids
        assert coll.bm25.doc_terms(rid) == fresh.bm25.doc_terms(rid)
    assert {k: coll.records[v].id for k, v in coll.by_pos.items()} == {
        k: fresh.records[v].id for k, v in fresh.by_pos.items()
    }
    assert len(coll.bm25) == len(fresh.bm25)
    assert sorted(coll.speakers(64)) == sorted(fresh.speakers(64))


def _unit(v: Any) -> Any:
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def _exact_top(coll: _Coll, q: Any, k: int) -> list[int]:
    """Rows of the float32 top ``k`` (ties: lower row first; cosine > 0 unless all)."""
    assert coll.matrix is not None
    sims = coll.matrix @ q
    order = np.lexsort((np.arange(len(sims)), -sims))[:k]
    return [int(i) for i in order if sims[i] > 0 or k >= len(sims)]


def _durable_top(h: Harness, q: Any, k: int) -> list[int]:
    user, turns = h.coll(C.user(NS)), h.coll(C.turns(NS))
    scan = turns.scan(q)
    assert scan is not None
    return durable_top(h.retrieval._twins, user, turns, q, scan, k)


async def test_ingest_updates_the_caches_incrementally(h: Harness) -> None:
    await h.ingest("s1", HISTORY)
    first = await h.ask("Which volcano did I climb in Iceland?")
    assert "b1" not in _turn_ids(first)
    turns = h.coll(C.turns(NS))
    reloads, gen = turns.reloads, turns.gen

    await h.ingest("s2", [("b1", "user", "I climbed the Hekla volcano in Iceland yesterday.")], 9)
    res = await h.ask("Which volcano did I climb in Iceland?")
    assert "b1" in _turn_ids(res)
    assert turns.reloads == reloads  # appended, not reloaded
    assert turns.gen == gen + 1
    _same_as_fresh(turns, h.store)
    _same_as_fresh(h.coll(C.user(NS)), h.store)


TRANSCRIPT = [
    ("t1", "user", "Caroline: I baked sourdough bread this morning."),
    ("t2", "assistant", "Melanie: Lovely! I went kayaking with the kids."),
    ("t3", "user", "Caroline: The crust came out perfect."),
]


async def test_the_views_speakers_follow_every_change(h: Harness) -> None:
    await h.ingest("s1", TRANSCRIPT)
    await h.ask("What did Caroline bake?")
    turns = h.coll(C.turns(NS))
    reloads = turns.reloads
    assert turns.speakers(64) == ["Caroline", "Melanie"]
    more = [(f"m{i}", "assistant", f"Melanie: Kayak day number {i}.") for i in range(3)]
    await h.ingest("s2", more, 10)
    await h.ask("kayak")
    assert turns.speakers(64) == ["Melanie", "Caroline"]  # counted as they came
    assert turns.speakers(1) == ["Melanie"]
    # a record rewritten under another speaker moves its count
    rid = C.namespace_turn_id("s1", "t1")
    await h.call("insert_text", {"collection": C.turns(NS), "id": rid, "text": "Gina: Hello."})
    await h.ask("hello")
    assert turns.reloads == reloads
    assert set(turns.speakers(64)) == {"Melanie", "Caroline", "Gina"}
    # a speaker named only in the metadata: no label in the text, so none in the vectors
    await h.call(
        "insert_text",
        {"collection": C.turns(NS), "id": "s9:z", "text": "Hi.", "metadata": {"speaker": "Zed"}},
    )
    await h.ask("hello")
    assert "Zed" not in turns.speakers(64)
    _same_as_fresh(turns, h.store)


async def test_a_query_naming_a_speaker_is_searched_with_half_the_label_taken_out(
    h: Harness,
) -> None:
    """The ranking's cosine is the one with the focused query vector (speaker_focus):
    half of the named speaker's label direction is removed before the dense search."""
    await h.ingest("s1", TRANSCRIPT)

    async def cosines(question: str) -> dict[str, float]:
        res = await h.ask(question)
        return {
            t: float(m.group(1))
            for item in res["selected"]
            if (m := re.search(r"dense=(-?[0-9.]+)", item["reason"]))
            for t in item["turnIds"]
        }

    q = _unit((await hash_embed(["What did Caroline bake?"], "query"))[0])
    label = _unit((await hash_embed(["Caroline:"], "document"))[0])
    focused = without_labels(q, [label], DAEMON_ASSEMBLY.speaker_label_weight)
    got = await cosines("What did Caroline bake?")
    assert got
    turns = h.coll(C.turns(NS))
    assert turns.matrix is not None
    for tid, cos in got.items():
        row = turns.matrix[turns.by_id[C.namespace_turn_id("s1", tid)]]
        assert cos == pytest.approx(float(row @ focused), abs=1.5e-3)
        assert abs(float(row @ q) - float(row @ focused)) > 2e-3  # it did change
    assert set(h.retrieval._labels._vecs) == {"Caroline"}
    # a question that names no speaker is searched as embedded
    plain = _unit((await hash_embed(["Who baked sourdough bread?"], "query"))[0])
    for tid, cos in (await cosines("Who baked sourdough bread?")).items():
        row = turns.matrix[turns.by_id[C.namespace_turn_id("s1", tid)]]
        assert cos == pytest.approx(float(row @ plain), abs=1.5e-3)


async def test_any_writer_is_caught_up_with_and_removals_reload(h: Harness) -> None:
    await h.ingest("s1", HISTORY)
    await h.ask("tennis balls")
    turns = h.coll(C.turns(NS))
    reloads = turns.reloads
    # a write through the generic v1 storage method, and an ingest: both are read with
    # changed_since, the rest of the view stays
    await h.call(
        "insert_text",
        {"collection": C.turns(NS), "id": "s9:x1", "text": "The kayak trip to Norway is booked."},
    )
    await h.ingest("s3", [("c1", "user", "My cousin Ines lives in Porto now.")], 20)
    res = await h.ask("Where is the kayak trip going?")
    assert turns.reloads == reloads
    assert "s9:x1" in turns.by_id and C.namespace_turn_id("s3", "c1") in turns.by_id
    assert any(item["id"] == "s9:x1" for item in res["selected"])
    _same_as_fresh(turns, h.store)
    # a removal moves the collection's removals counter: read anew (SQLite), or compared
    # record by record (a shared PostgreSQL store)
    await h.call("delete", {"collection": C.turns(NS), "id": "s9:x1"})
    state = h.store.collection_states([C.turns(NS)])[C.turns(NS)]
    res = await h.ask("Where is the kayak trip going?")
    assert "s9:x1" not in turns.by_id
    assert not any(item["id"] == "s9:x1" for item in res["selected"])
    assert turns.state == state
    assert turns.reloads == reloads + 1
    _same_as_fresh(turns, h.store)


async def test_a_large_lexical_index_is_warmed_when_its_view_loads(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # scaled down: every index counts as large, a term in more than two turns as common;
    # the load weighs the common terms, so no query pays for it first
    monkeypatch.setattr(lexical, "PRUNE_MIN_SLOTS", 0)
    monkeypatch.setattr(bm25_topk, "CHAMPIONS", 2)
    await h.ingest("s1", HISTORY)
    await h.ask("kayak")
    turns = h.coll(C.turns(NS))
    assert "biscuit" in turns.bm25._bounds
    assert set(turns.bm25._bounds) == set(turns.bm25.posting_counts(2))


async def test_durable_memories_share_their_history_twins_analyzed_terms(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    await h.ingest("s1", HISTORY)
    analyzed: list[object] = []  # the index of every analyze call
    plain = lexical.BM25Index.analyze

    def counted(self: lexical.BM25Index, text: str) -> list[str]:
        analyzed.append(self)
        return plain(self, text)

    monkeypatch.setattr(lexical.BM25Index, "analyze", counted)
    await h.ask("tennis balls")
    turns, user = h.coll(C.turns(NS)), h.coll(C.user(NS))
    twins = [rid for rid in user.by_id if rid in turns.by_id]
    assert twins
    # every durable record has a twin with its text: none was analyzed for the user index
    assert not any(a is user.bm25 for a in analyzed)
    # loaded after the history, with the same texts: the history's analysis is read back
    # (nothing analyzed again) and gives the same terms
    for rid in twins:
        assert user.bm25.counts_of(rid) == turns.bm25.counts_of(rid)
    # a durable record whose text differs from its twin's is analyzed on its own
    rid = twins[0]
    await h.call(
        "insert_text", {"collection": C.user(NS), "id": rid, "text": "Biscuit now swims daily."}
    )
    user.stale = True  # read anew, beside the loaded history
    await h.ask("who swims?")
    assert user.bm25.counts_of(rid) != turns.bm25.counts_of(rid)
    assert user.bm25.doc_terms(rid) == {"biscuit": 1, "swim": 1, "daili": 1}
    _same_as_fresh(user, h.store)
    _same_as_fresh(turns, h.store)


async def test_durable_cosines_match_a_direct_product(h: Harness) -> None:
    await h.ingest("s1", HISTORY)
    # a durable record without a history copy, and one whose copy has another vector
    vec = (await hash_embed(["completely different words here"], "document"))[0]
    h.store.put_many(
        [
            Put(C.user(NS), "solo:1", "I prefer window seats on long flights.", {}, vec),
            Put(C.user(NS), "s1:a3", "Biscuit loves chasing tennis balls in the park.", {}, vec),
        ]
    )
    await h.ask("window seats")
    user, turns = h.coll(C.user(NS)), h.coll(C.turns(NS))
    q = _unit((await hash_embed(["tennis balls and window seats"], "query"))[0])
    n = len(user.records)
    assert _durable_top(h, q, n) == _exact_top(user, q, n)
    assert _durable_top(h, q, 2) == _exact_top(user, q, 2)
    twins = h.retrieval._twins[user.name].rows
    assert twins[user.by_id["solo:1"]] == -1
    assert twins[user.by_id["s1:a3"]] == -1  # same id, different vector: not a twin
    assert twins[user.by_id["s1:a1"]] == turns.by_id["s1:a1"]

    # incremental: a new durable memory and its history copy arrive in one ingest
    await h.ingest("s2", [("d1", "user", "I booked window seats for the Lisbon flight.")], 30)
    await h.ask("window seats")
    assert _durable_top(h, q, 3) == _exact_top(user, q, 3)
    if "s2:d1" in user.by_id:
        assert twins is not None
        assert h.retrieval._twins[user.name].rows[user.by_id["s2:d1"]] == turns.by_id["s2:d1"]


async def test_authored_replace_is_served_at_once(h: Harness) -> None:
    doc = "---\ncore: true\n---\n- Always answer in British English.\n"
    await h.call("authored.ingest", {"sourceDoc": "core.md", "text": doc, "core": True})
    res = await h.ask("hello")
    assert "British English" in res["systemPromptAddition"]
    # same node count, new text: the authored notice reloads the rules immediately
    doc2 = "---\ncore: true\n---\n- Always answer in Canadian French.\n"
    await h.call("authored.ingest", {"sourceDoc": "core.md", "text": doc2, "core": True})
    res = await h.ask("hello")
    assert "Canadian French" in res["systemPromptAddition"]
    assert "British English" not in res["systemPromptAddition"]


async def test_access_bumps_are_coalesced_and_counted(h: Harness) -> None:
    await h.ingest("s1", HISTORY)
    first = await h.ask("Biscuit tennis balls")
    second = await h.ask("Biscuit tennis balls")
    ids = [
        (i["collection"], i["id"])
        for i in first["selected"]
        if i["collection"].startswith(("turns:", "user:"))
    ]
    assert ids and ids == [
        (i["collection"], i["id"])
        for i in second["selected"]
        if i["collection"].startswith(("turns:", "user:"))
    ]
    # the ranking sees the counts at once (regression: the cached copy never changed,
    # so the access-frequency term was always 0 inside the daemon)
    for coll, rid in ids:
        view = h.retrieval._colls[coll]
        j = view.by_id[rid]
        assert access_count(view.cands[j]) == 2
    await h.retrieval.flush_bumps()
    for coll, rid in ids:
        rec = h.store.get(coll, rid)
        assert rec is not None and rec.metadata.get("access_count") == 2


async def test_filtered_neighbours_equal_the_filtered_search(tmp_path: Path) -> None:
    store = open_test_store(tmp_path / "s", embed_dims=8, background=False)
    try:
        rng = np.random.default_rng(3)
        base = rng.normal(size=8).astype(np.float32)
        puts = []
        for i in range(400):
            # near the query: mostly assistant turns; far away: user turns
            near = i < 120
            v = (base if near else -base) + rng.normal(scale=0.5, size=8).astype(np.float32)
            role = ("user" if i % 12 == 0 else "assistant") if near else "user"
            puts.append(Put("turns:x", f"t{i:03d}", f"text {i}", {"role": role}, v))
        store.put_many(puts)
        q = base.reshape(1, -1)
        for where, k in (({"role": "user"}, 10), ({"role": "assistant"}, 10), ({"role": "x"}, 5)):
            want = [h.score for h in store.search("turns:x", q[0], k, where=where)]
            got = [h.score for h in N._filtered_top(store, "turns:x", q[0], k, where, 400)]
            assert got == pytest.approx(want), where
    finally:
        store.close()


async def test_twin_map_follows_a_recreated_history_view(h: Harness) -> None:
    await h.ingest("s1", HISTORY)
    await h.ingest("s2", [("b1", "user", "I climbed the Hekla volcano in Iceland.")], 9)
    await h.ask("volcano")
    user = h.coll(C.user(NS))
    # the history view is evicted (LRU) and loaded again: new row layout, new stamp
    old_stamp = h.coll(C.turns(NS)).stamp
    del h.retrieval._colls[C.turns(NS)]
    await h.ask("volcano")
    turns = h.coll(C.turns(NS))
    assert turns.stamp != old_stamp
    q = _unit((await hash_embed(["volcano in Iceland"], "query"))[0])
    assert _durable_top(h, q, len(user.records)) == _exact_top(user, q, len(user.records))
    assert h.retrieval._twins[user.name].stamps == (user.stamp, turns.stamp)


async def test_dream_entries_replaced_at_the_same_count_are_seen(h: Harness) -> None:
    # A promotion that replaces a diary's entries keeps the record count, not the
    # collection's version: the next call reads the new entries.
    diary = "# Dream diary\n\n## Deep Sleep\n- {text} {{score=0.9 recall=3 unique=2}}\n"
    first = diary.format(text="the user dreamed about flying over a lighthouse")
    await h.call("dream.promote", {"userId": NS, "sourceDoc": "d.md", "text": first})
    res = await h.ask("what did I dream about last night?")
    texts = [i["collection"] for i in res["selected"] if i["collection"].startswith("dream:")]
    assert texts, res["selected"]
    second = diary.format(text="the user dreamed about swimming with whales")
    await h.call("dream.promote", {"userId": NS, "sourceDoc": "d.md", "text": second})
    view = h.coll(f"dream:{NS}")
    before = [c.text for c in view.cands]
    await h.ask("what did I dream about last night?")
    after = [c.text for c in h.coll(f"dream:{NS}").cands]
    assert before == ["the user dreamed about flying over a lighthouse"]
    assert after == ["the user dreamed about swimming with whales"]


async def test_int8_prefilter_keeps_the_exact_ranking_through_updates(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Large collections are prefiltered in int8 (sidecar.engines.int8scan); lowered threshold
    # so that this small history takes that path from its first load on.
    monkeypatch.setattr("sidecar.engines.int8scan.MIN_ROWS", 4)
    await h.ingest("s1", HISTORY)
    await h.ask("tennis balls")
    turns, user = h.coll(C.turns(NS)), h.coll(C.user(NS))
    assert turns._shadow is not None and turns._shadow.n == len(turns.records)
    extra = [
        (f"x{i}", "user", f"Note {i}: the {w} trip was fun.")
        for i, w in enumerate(
            ["kayak", "Hekla volcano", "Lisbon", "Porto", "tennis", "window seat", "puppy"] * 6
        )
    ]
    for lo in range(0, len(extra), 7):  # appended in batches: the shadow grows with the view
        await h.ingest("s2", extra[lo : lo + 7], 100 + lo)
        await h.ask("volcano trip")
        assert turns._shadow is not None and turns._shadow.n == len(turns.records)
    _same_as_fresh(turns, h.store)
    for text in ("volcano trip", "tennis balls", "Lisbon window seat", "zzz unrelated"):
        q = _unit((await hash_embed([text], "query"))[0])
        for k in (1, 5, 17, len(turns.records)):
            assert turns.dense_top(q, k) == _exact_top(turns, q, k), (text, k)
        assert _durable_top(h, q, 20) == _exact_top(user, q, 20)


async def test_loaded_caches_are_frozen_out_of_the_collector(h: Harness) -> None:
    import gc

    gc.unfreeze()
    try:
        h.retrieval.heap.min_rows = 5
        await h.ingest("s1", HISTORY)
        await h.ask("tennis balls")
        assert h.retrieval.heap.freezes >= 1
        tracked = {id(o) for o in gc.get_objects()}
        # the rows' containers (their strings and arrays are never tracked); candidates
        # are built on use, a bounded number (view_budget.MADE_MAX)
        texts = h.coll(C.turns(NS)).rows.texts
        assert gc.is_tracked(texts) and id(texts) not in tracked
    finally:
        gc.unfreeze()


async def test_search_in_the_dream_scope_returns_dreams_for_any_query(h: Harness) -> None:
    # Dream entries join assembly only for dream questions; a search that names the dream
    # scope asked for them explicitly (regression: it returned nothing for "lighthouse").
    diary = "# Dream diary\n\n## Deep Sleep\n- {text} {{score=0.9 recall=3 unique=2}}\n"
    text = diary.format(text="the user dreamed about flying over a lighthouse")
    await h.call("dream.promote", {"userId": NS, "sourceDoc": "d.md", "text": text})
    await h.ingest("s1", [("l1", "user", "We toured the old lighthouse in Maine.")])
    only = await h.call("search", {"query": "lighthouse", "namespace": NS, "scopes": ["dream"]})
    assert [x["collection"] for x in only["hits"]] == [f"dream:{NS}"]
    every = await h.call("search", {"query": "lighthouse", "namespace": NS})
    assert all(not x["collection"].startswith("dream:") for x in every["hits"])
    assert any(x["turnIds"] == ["l1"] for x in every["hits"])
    asked = await h.call("search", {"query": "did I dream of a lighthouse?", "namespace": NS})
    assert any(x["collection"] == f"dream:{NS}" for x in asked["hits"])


async def test_large_collections_take_dense_candidates_from_the_store_index(
    tmp_path: Path,
) -> None:
    # From store.assemble_ann_rows records a view asks the store's ANN index (hnswlib /
    # pgvector HNSW, built here from 16 records on) instead of scanning its vectors; the
    # thresholds are lowered so that a small history takes that path.
    async for h in _harness(
        tmp_path, **{"store.assemble_ann_rows": 40, "store.exact_threshold": 16}
    ):
        words = ["kayak", "Hekla volcano", "Lisbon", "Porto", "tennis", "window seat", "puppy"]
        notes = [
            (f"x{i}", "user", f"Note {i}: the {w} trip was fun.") for i, w in enumerate(words * 6)
        ]
        await h.ingest("s1", notes[:21])
        await h.ask("volcano trip")
        turns, user = h.coll(C.turns(NS)), h.coll(C.user(NS))
        assert not turns.ann and turns.scan(_unit([1.0] * DIMS)) is not None
        await h.ingest("s2", [*notes[21:], *HISTORY], 100)  # the view grows past 40 rows
        assert h.store.wait_indexed(60)
        res = await h.ask("tennis balls in the park")
        assert turns.ann and len(turns.records) >= 40
        assert turns.scan(_unit([1.0] * DIMS)) is None and turns._shadow is None
        assert "a3" in _turn_ids(res)
        statuses = {s.collection: s for s in h.store.index_status()}
        assert statuses[C.turns(NS)].mode == "hnsw"  # the store's index answers, not a scan
        for text in ("volcano trip", "tennis balls", "Lisbon window seat"):
            q = _unit((await hash_embed([text], "query"))[0])
            for k in (1, 5, 10):
                assert turns.dense_top(q, k) == _exact_top(turns, q, k), (text, k)
        # the durable memories (fewer: not every turn is admitted) are under the threshold:
        # ranked exactly on their own, there is no history scan to share
        assert not user.ann and len(user.records) < 40
        q = _unit((await hash_embed(["Porto"], "query"))[0])
        assert user.dense_top(q, 5) == _exact_top(user, q, 5)
        # a full reload keeps the mode, and the records do not keep a second vector copy
        h.retrieval.invalidate()
        await h.ask("Porto")
        assert turns.ann and all(r.vector is None for r in turns.records)


async def test_two_large_collections_are_searched_side_by_side(tmp_path: Path) -> None:
    # the raw history and the durable memories both past the threshold: the durable
    # search runs beside the history's, and each gives the index's top k
    async for h in _harness(tmp_path, **{"store.assemble_ann_rows": 6, "store.exact_threshold": 6}):
        await h.ingest("s1", HISTORY)
        notes = [
            (f"y{i}", "user", f"I visited {w} with my sister.")
            for i, w in enumerate(
                ["Porto", "Lisbon", "Hekla", "Oslo", "Bergen", "Faro", "Braga", "Evora", "Sintra"]
            )
        ]
        await h.ingest("s2", notes, 50)
        assert h.store.wait_indexed(60)
        res = await h.ask("Which city did I visit with my sister, Bergen?")
        turns, user = h.coll(C.turns(NS)), h.coll(C.user(NS))
        assert turns.ann and user.ann
        assert "y4" in _turn_ids(res)
        q = _unit((await hash_embed(["Bergen with my sister"], "query"))[0])
        assert user.dense_top(q, 5) == _exact_top(user, q, 5)
        assert turns.dense_top(q, 5) == _exact_top(turns, q, 5)


NOTES = [
    (f"z{i}", "user", f"Note {i}: the {w} trip was fun.")
    for i, w in enumerate(
        ["kayak", "Hekla volcano", "Lisbon", "Porto", "tennis", "window seat", "puppy"] * 5
    )
]


async def test_a_large_view_is_ranked_by_its_in_process_graph(tmp_path: Path) -> None:
    # store.assemble_graph "on": a view past store.assemble_ann_rows builds an HNSW graph
    # over its own vectors in the background and ranks with it once ready; appended rows
    # join it, a removal (a new row layout) starts a new graph
    flags = {"store.assemble_ann_rows": 20, "store.exact_threshold": 8}
    async for h in _harness(tmp_path, **flags, **{"store.assemble_graph": "on"}):
        await h.ingest("s1", NOTES[:25])
        await h.ask("volcano trip")
        turns = h.coll(C.turns(NS))
        graph = turns.graph
        assert turns.ann and graph is not None and graph.wait(60)
        assert turns.dense_mode == "graph" and graph.built_rows == len(turns.records)
        await h.ingest("s2", [*NOTES[25:], *HISTORY], 100)  # caught up: rows appended
        res = await h.ask("tennis balls in the park")
        assert turns.graph is graph and len(turns.records) > graph.built_rows
        assert "a3" in _turn_ids(res)
        for text in ("volcano trip", "tennis balls", "Biscuit the puppy", "Lisbon window"):
            q = _unit((await hash_embed([text], "query"))[0])
            for k in (1, 5, 10):
                assert turns.dense_top(q, k) == _exact_top(turns, q, k), (text, k)
        await h.call("delete", {"collection": C.turns(NS), "id": C.namespace_turn_id("s2", "a3")})
        await h.ask("tennis balls in the park")
        assert graph.state == "closed" and turns.graph is not graph
        fresh = turns.graph
        assert fresh is not None and fresh.wait(60) and turns.dense_mode == "graph"
        q = _unit((await hash_embed(["tennis balls"], "query"))[0])
        assert turns.dense_top(q, 5) == _exact_top(turns, q, 5)
        await h.app.close()  # the daemon stops: its graphs are dropped
        assert fresh.state == "closed"


def _recorded(real: Callable[[str], bool], asked: list[tuple[str, bool]]) -> Callable[[str], bool]:
    def prefetch_index(name: str) -> bool:
        asked.append((name, real(name)))
        return asked[-1][1]

    return prefetch_index


async def test_a_large_view_loads_the_store_graph_ahead_at_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a view ranked by the store's index asks the store to load it before reading its
    # rows (StoreBackend.prefetch_index): on SQLite the saved graph is loaded by then
    flags = {"store.assemble_ann_rows": 20, "store.exact_threshold": 8}
    async for h in _harness(tmp_path, **flags):
        await h.ingest("s1", NOTES[:25])
        assert h.store.wait_indexed(60)
        before = await h.ask("volcano trip")
    async for h in _harness(tmp_path, **flags):
        store = h.store
        asked: list[tuple[str, bool]] = []
        monkeypatch.setattr(store, "prefetch_index", _recorded(store.prefetch_index, asked))
        sqlite = current_store().backend == "sqlite"
        if sqlite:
            assert {s.collection: s.mode for s in store.index_status()}[C.turns(NS)] == "saved"
        again = await h.ask("volcano trip")
        # the durable memories are under the threshold; PostgreSQL's index is its server's
        assert asked == [(C.turns(NS), sqlite)]
        assert _turn_ids(again) == _turn_ids(before)
        if sqlite:
            assert {s.collection: s.mode for s in store.index_status()}[C.turns(NS)] == "hnsw"


async def test_the_in_process_graph_is_on_by_default_and_off_on_request(tmp_path: Path) -> None:
    # "auto": every backend (int8 rows cost a third of the store's graph, and on SQLite
    # a saved graph spares a start the store's); "off": the store's index ranks
    flags = {"store.assemble_ann_rows": 20, "store.exact_threshold": 8}
    for mode in ("auto", "off"):
        async for h in _harness(tmp_path / mode, **flags, **{"store.assemble_graph": mode}):
            await h.ingest("s1", NOTES[:25])
            await h.ask("volcano trip")
            turns = h.coll(C.turns(NS))
            assert turns.ann
            if mode == "off":
                assert turns.graph is None and turns.dense_mode == "store"
            else:
                assert turns.graph is not None and turns.graph.wait(60)
                assert turns.dense_mode == "graph"
            q = _unit((await hash_embed(["Porto"], "query"))[0])
            assert turns.dense_top(q, 5) == _exact_top(turns, q, 5)


async def test_debug_dense_top_reports_the_views_ranking(tmp_path: Path) -> None:
    flags = {"store.assemble_ann_rows": 20, "store.exact_threshold": 8}
    async for h in _harness(
        tmp_path, **flags, **{"store.assemble_graph": "on", "server.debug_methods": True}
    ):
        await h.ingest("s1", NOTES[:25])
        coll = C.turns(NS)
        first = await h.call("debug.denseTop", {"collection": coll, "query": "Porto", "k": 5})
        assert first["rows"] == 25 and first["graphState"] in ("building", "ready")
        turns = h.coll(coll)
        assert turns.graph is not None and turns.graph.wait(60)
        res = await h.call("debug.denseTop", {"collection": coll, "query": "Porto", "k": 5})
        q = _unit((await hash_embed(["Porto"], "query"))[0])
        assert res["mode"] == "graph" and res["graphState"] == "ready"
        assert res["graphRows"] == 25
        assert res["ids"] == [turns.records[i].id for i in _exact_top(turns, q, 5)]
        small = await h.call("debug.denseTop", {"collection": C.user(NS), "query": "x", "k": 3})
        assert small["mode"] == "exact" and small["graphState"] == "none"
        for bad in ({"collection": coll, "query": "x", "k": 0}, {"collection": "", "query": "x"}):
            err = (await h.reply("debug.denseTop", bad))["error"]
            assert err["code"] in (-32602, -32009), err


async def test_debug_dense_top_is_not_served_without_debug_methods(h: Harness) -> None:
    reply = await h.reply("debug.denseTop", {"collection": C.turns(NS), "query": "x"})
    assert reply["error"]["code"] == -32601


async def test_search_filters_read_the_rows_as_the_candidates_would(h: Harness) -> None:
    # search's filters over a whole collection read the view's arrays (no candidate built
    # per row); they pass the rows whose candidates pass HitFilter.passes
    from sidecar.assembly.selection import HitFilter

    await h.ingest("s1", HISTORY)
    await h.ask("tennis balls")
    view = h.coll(C.turns(NS))
    ts = sorted(c.ts for c in view.cands if c.ts is not None)
    mid = ts[len(ts) // 2]
    for role, kind, since, until in [
        ("user", None, None, None),
        ("assistant", "turn", mid, None),
        (None, "turn", None, mid),
        (None, "summary", None, None),
        ("nobody", None, None, None),
        (None, None, mid, mid),
    ]:
        filters = HitFilter(role=role, since=since, until=until, kind=kind)
        want = [i for i, c in enumerate(view.cands) if filters.passes(c)]
        assert rows_where(view.rows, filters) == want


async def test_a_view_builds_candidates_on_use_and_drops_them_past_its_bound(h: Harness) -> None:
    # a view keeps its rows compactly and builds a row's candidate when it is read (the
    # same object until the row changes); past view_budget.MADE_MAX the built ones are
    # dropped after a sync, and built again equal
    from sidecar.assembly.view_budget import CANDIDATE_BYTES, view_bytes

    await h.ingest("s1", HISTORY)
    await h.ask("tennis balls")
    view = h.coll(C.turns(NS))
    first = view.cands[0]
    assert view.cands[0] is first and view.made >= 1
    before = view_bytes(view)
    assert not view.trim(view.made)  # within the bound: kept
    assert view.trim(0) and view.made == 0
    assert view_bytes(view) <= before - CANDIDATE_BYTES
    again = view.cands[0]
    assert again is not first and again == first and again.metadata == first.metadata
    assert view.records[0].id == first.id and view.records[0].text == first.text
