"""The PostgreSQL schema's migrations: from an empty database, from version 1 with data,
a failing migration rolled back, a newer schema refused, two openers at once."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import psycopg
import pytest

from sidecar.store import SchemaTooNew, TimeRange, view_files
from sidecar.store.backend import open_store
from sidecar.store.pg import schema as S
from sidecar.store.pg.conn import register_vector
from tests.pg_server import PgTestServer


@pytest.fixture
def empty_url(request: pytest.FixtureRequest) -> str:
    """A database without the store's schema (nor the vector extension)."""
    if request.config.getoption("--backend") == "sqlite":
        pytest.skip("PostgreSQL tests deselected (--backend sqlite)")
    server: PgTestServer = request.getfixturevalue("pg_server")
    return server.new_database()


def _versions(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        return [
            r[0] for r in conn.execute("SELECT version FROM libravdb.schema_version ORDER BY 1")
        ]


def test_fresh_database_gets_every_migration(empty_url: str) -> None:
    with open_store(empty_url, embed_dims=4, fingerprint="fp") as store:
        store.put("user:u1", "a", metadata={"k": 1}, vector=[1, 0, 0, 0])
        assert store.stats()["schema"] == S.SCHEMA_VERSION
    assert _versions(empty_url) == list(range(1, S.SCHEMA_VERSION + 1))
    with psycopg.connect(empty_url) as conn:
        cols = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = 'libravdb' AND table_name = 'records'"
            )
        }
    assert {"meta", "ts_ms", "embedding", "text_raw", "metadata"} <= cols


def _v1_database(url: str) -> None:
    """A database as version 1 of the schema left it, with data in it."""
    with psycopg.connect(url, autocommit=True) as conn:
        assert S.migrate(conn, target=1) == [1]
        conn.execute("SET search_path TO libravdb, public")
        oid = conn.execute("SELECT 'vector'::regtype::oid").fetchone()
        assert oid is not None
        register_vector(conn, int(oid[0]))
        with conn.transaction():
            conn.execute(
                "INSERT INTO collections (name, dims, kind, created_ms, n_records) VALUES "
                "('user:u1', 4, 'vector', 100, 2), ('authored:hard', 1, 'vectorless', 100, 1)"
            )
            rows: list[tuple[Any, ...]] = [
                ("user:u1", "a", "alpha", '{"ts": 5000, "x": 1.0}', np.array([1, 0, 0, 0])),
                ("user:u1", "n", "nul", '{"s": "a\\u0000b"}', np.array([0, 1, 0, 0])),
                ("authored:hard", "h", "rule", "{}", None),
            ]
            for coll, rid, text, meta, vec in rows:
                conn.execute(
                    "INSERT INTO records (cid, id, text, metadata, embedding, version, seq, "
                    "created_ms, updated_ms) SELECT cid, %s, %s, %s, %s, 3, nextval('seq'), "
                    "300, 300 FROM collections WHERE name = %s",
                    (rid, text, meta, None if vec is None else vec.astype(np.float32), coll),
                )
            conn.execute("INSERT INTO meta VALUES ('fingerprint', 'fp'), ('embed_dims', '4')")
    assert _versions(url) == [1]


def test_version_1_database_is_migrated_with_its_data(empty_url: str) -> None:
    _v1_database(empty_url)
    with open_store(empty_url, embed_dims=4, fingerprint="fp") as store:
        assert _versions(empty_url) == list(range(1, S.SCHEMA_VERSION + 1))
        a = store.get("user:u1", "a", include_vector=True)
        assert a is not None and a.version == 3 and a.metadata == {"ts": 5000, "x": 1.0}
        assert a.ts_ms == 5000 and a.vector is not None and a.vector.tolist() == [1, 0, 0, 0]
        # the new filter columns were filled from the old rows
        assert [r.id for r in store.list_records("user:u1", where={"x": 1})] == ["a"]
        assert [r.id for r in store.list_records("user:u1", where={"s": "a\x00b"})] == ["n"]
        recent = store.list_records("user:u1", time_range=TimeRange(4000, 6000))
        assert [r.id for r in recent] == ["a"]  # metadata.ts; "n" has its creation time, 300
        assert [h.id for h in store.search("user:u1", [0, 1, 0, 0], 1)] == ["n"]
        assert store.count("user:u1") == 2 and store.count("authored:hard") == 1
        store.put("user:u1", "b", vector=[0, 0, 1, 0])  # and it takes writes
        assert store.count("user:u1") == 3


def test_failing_migration_rolls_back(empty_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _v1_database(empty_url)

    def broken(conn: psycopg.Connection[Any]) -> None:
        conn.execute("ALTER TABLE records ADD COLUMN half_done integer")
        raise RuntimeError("migration 2 failed")

    monkeypatch.setattr(S, "MIGRATIONS", (S.MIGRATIONS[0], broken))
    with pytest.raises(RuntimeError, match="migration 2 failed"):
        open_store(empty_url, embed_dims=4, fingerprint="fp")
    assert _versions(empty_url) == [1]
    with psycopg.connect(empty_url) as conn:
        cols = [
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = 'libravdb' AND table_name = 'records'"
            )
        ]
    assert "half_done" not in cols and "meta" not in cols
    monkeypatch.undo()
    with open_store(empty_url, embed_dims=4, fingerprint="fp") as store:  # the real one works
        assert store.count("user:u1") == 2


def test_newer_schema_is_refused(empty_url: str) -> None:
    with open_store(empty_url, embed_dims=4):
        pass
    with psycopg.connect(empty_url) as conn:
        conn.execute("INSERT INTO libravdb.schema_version VALUES (%s, 0)", (S.SCHEMA_VERSION + 5,))
    with pytest.raises(SchemaTooNew, match="upgrade the daemon"):
        open_store(empty_url, embed_dims=4)


def test_two_stores_opening_an_empty_database_at_once(empty_url: str) -> None:
    opened: list[Any] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def start(fp: str) -> None:
        barrier.wait()
        try:
            opened.append(open_store(empty_url, embed_dims=4, fingerprint=fp))
        except BaseException as exc:
            errors.append(exc)

    # three openers with one model, one with another: the model written first wins, the
    # other is refused (never both recorded)
    fps = ["fp-a", "fp-a", "fp-a", "fp-b"]
    threads = [threading.Thread(target=start, args=(fp,)) for fp in fps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert _versions(empty_url) == list(range(1, S.SCHEMA_VERSION + 1))
        winners = {s.fingerprint for s in opened}
        assert len(winners) == 1
        assert len(opened) == (3 if winners == {"fp-a"} else 1)
        assert all("embedding model mismatch" in str(e) for e in errors)
    finally:
        for s in opened:
            s.close()


def test_version_2_database_gets_removal_counters_and_the_seq_index(empty_url: str) -> None:
    """Migration 3 from the previous version, with data: counters start at 0, changed_since
    reads the old rows, and the new end of a write transaction counts deletes."""
    _v1_database(empty_url)
    with psycopg.connect(empty_url, autocommit=True) as conn:
        assert S.migrate(conn, target=2) == [2]
    with open_store(empty_url, embed_dims=4, fingerprint="fp") as store:
        assert _versions(empty_url) == list(range(1, S.SCHEMA_VERSION + 1))
        states = store.collection_states(["user:u1", "authored:hard"])
        assert [s.removals for s in states.values()] == [0, 0]
        assert [s.count for s in states.values()] == [2, 1]
        old = [r.id for r in store.changed_since("user:u1", 0)]
        assert sorted(old) == ["a", "n"]
        assert store.changed_since("user:u1", states["user:u1"].max_seq) == []
        store.put("user:u1", "b", vector=[0, 0, 1, 0])
        assert [r.id for r in store.changed_since("user:u1", states["user:u1"].max_seq)] == ["b"]
        store.delete_many("user:u1", ["a", "n"])
        now = store.collection_states(["user:u1"])["user:u1"]
        assert (now.removals, now.count) == (2, 1)
    with psycopg.connect(empty_url) as conn:
        indexes = {
            r[0]
            for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'libravdb'")
        }
    assert "records_cid_seq" in indexes


def test_version_4_database_gets_saved_terms_removed_by_a_delete(empty_url: str) -> None:
    """Migration 5 from the previous version, with data: the saved-terms table, and the end
    of a write transaction that deletes a collection's saved terms with a removal (and
    counts as before)."""
    _v1_database(empty_url)
    with psycopg.connect(empty_url, autocommit=True) as conn:
        assert S.migrate(conn, target=4) == [2, 3, 4]
    with open_store(empty_url, embed_dims=4, fingerprint="fp") as store:
        assert _versions(empty_url) == list(range(1, S.SCHEMA_VERSION + 1))
        state = store.collection_states(["user:u1"])["user:u1"]
        place = store.terms_place()
        assert place is not None
        header = {"cid": state.cid, "removals": state.removals}
        assert place.write("user:u1", header, [b"ter", memoryview(b"ms")])
        got = place.read("user:u1")
        assert got is not None and got[1] == b"terms" and got[0]["cid"] == state.cid
        store.put("user:u1", "b", vector=[0, 0, 1, 0])  # no removal: the terms stay
        assert place.read("user:u1") is not None
        store.delete("user:u1", "a")
        assert place.read("user:u1") is None
        now = store.collection_states(["user:u1"])["user:u1"]
        assert (now.removals, now.count) == (state.removals + 1, state.count)


def test_version_5_database_gets_saved_views_removed_by_a_delete(empty_url: str) -> None:
    """Migration 6 from the previous version, with data: the saved-views table, and the end
    of a write transaction that deletes a collection's saved view and terms with a removal
    (and counts as before)."""
    _v1_database(empty_url)
    with psycopg.connect(empty_url, autocommit=True) as conn:
        assert S.migrate(conn, target=5) == [2, 3, 4, 5]
    with open_store(empty_url, embed_dims=4, fingerprint="fp") as store:
        assert _versions(empty_url) == list(range(1, S.SCHEMA_VERSION + 1))
        state = store.collection_states(["user:u1"])["user:u1"]
        views, terms = store.view_place(), store.terms_place()
        assert views is not None and terms is not None
        header = {"cid": state.cid, "removals": state.removals}
        assert views.write("user:u1", header, [view_files.of_buffer(memoryview(b"rows"))])
        assert terms.write("user:u1", header, [b"terms"])
        into = bytearray(4)

        def read() -> tuple[bool, dict[str, Any] | None]:
            return views.read(
                "user:u1", lambda m: m["cid"] == state.cid, lambda *_: memoryview(into)
            )

        found, meta = read()
        assert found and meta is not None and meta["sections"] == [4] and into == b"rows"
        store.put("user:u1", "b", vector=[0, 0, 1, 0])  # no removal: both stay
        assert read()[1] is not None and terms.read("user:u1") is not None
        store.delete("user:u1", "a")
        assert read() == (False, None) and terms.read("user:u1") is None
        now = store.collection_states(["user:u1"])["user:u1"]
        assert (now.removals, now.count) == (state.removals + 1, state.count)
