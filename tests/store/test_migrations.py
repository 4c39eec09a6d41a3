"""Schema migrations: versioned, transactional, forward-only (SQLite's schema; PostgreSQL's
is tested in ``test_pg_migrations.py``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sidecar.store import SchemaTooNew, Store
from sidecar.store import schema as S
from sidecar.store.store import DB_NAME

pytestmark = pytest.mark.sqlite_only("SQLite's schema and PRAGMA user_version")


def _v1_database(path: Path) -> None:
    """A database as version 1 of the schema wrote it, with data in it."""
    path.mkdir(parents=True)
    conn = sqlite3.connect(path / DB_NAME, isolation_level=None)
    S.migrate(conn, target=1)
    assert S.schema_version(conn) == 1
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO collections (cid, name, dims, kind, created_ms) "
        "VALUES (1, 'user:u1', 4, 'vector', 100), (2, 'authored:hard', 1, 'vectorless', 100)"
    )
    vec = bytes(bytearray(b"\x00\x00\x80\x3f") + bytes(12))  # [1, 0, 0, 0]
    conn.execute(
        "INSERT INTO records (cid, id, text, metadata, vector, version, seq, vseq, created_ms, "
        "updated_ms) VALUES (1, 'a', 'alpha', '{\"ts\": 5000, \"x\": 1.0}', ?, 3, 1, 1, 100, 200)",
        (vec,),
    )
    conn.execute(
        "INSERT INTO records (cid, id, text, metadata, vector, version, seq, vseq, created_ms, "
        "updated_ms) VALUES (2, 'h', 'rule', '{}', NULL, 1, 2, 2, 300, 300)"
    )
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'seq'")
    conn.execute("COMMIT")
    conn.close()


def test_v1_database_is_migrated_with_data(tmp_path: Path) -> None:
    path = tmp_path / "d"
    _v1_database(path)
    with Store.open(path, embed_dims=4) as store:
        rec = store.get("user:u1", "a", include_vector=True)
        assert rec is not None
        assert (rec.text, rec.version, rec.metadata) == ("alpha", 3, {"ts": 5000, "x": 1.0})
        assert rec.ts_ms == 5000  # back-filled by migration 2 from metadata.ts
        hard = store.get("authored:hard", "h")
        assert hard is not None and hard.ts_ms == 300  # no ts: creation time
        assert [h.id for h in store.search("user:u1", [1, 0, 0, 0], 1)] == ["a"]
        store.add_tombstones("user:u1", ["x"])  # table added by migration 2
        r = store.put("user:u1", "b", vector=[0, 1, 0, 0])
        assert r.version == 1 and store.max_seq() == 3  # the seq counter continued
    conn = sqlite3.connect(path / DB_NAME)
    assert S.schema_version(conn) == S.SCHEMA_VERSION
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"meta", "collections", "records", "tombstones", "dirty_tiers"} <= tables
    conn.close()


def test_fresh_database_has_latest_schema(tmp_path: Path) -> None:
    with Store.open(tmp_path / "d", embed_dims=4):
        pass
    conn = sqlite3.connect(tmp_path / "d" / DB_NAME)
    assert S.schema_version(conn) == S.SCHEMA_VERSION == len(S.MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "tombstones_key" in indexes  # v3: tombstones are looked up by key alone
    plan = " ".join(
        str(r[-1])
        for r in conn.execute("EXPLAIN QUERY PLAN SELECT key FROM tombstones WHERE key IN ('a')")
    )
    assert "tombstones_key" in plan
    conn.close()


def test_failed_migration_rolls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "d"
    _v1_database(path)

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE records ADD COLUMN ts_ms INTEGER")
        raise RuntimeError("boom halfway")

    monkeypatch.setattr(S, "MIGRATIONS", (S.MIGRATIONS[0], broken))
    conn = sqlite3.connect(path / DB_NAME, isolation_level=None)
    with pytest.raises(RuntimeError):
        S.migrate(conn, target=2)
    assert S.schema_version(conn) == 1
    cols = {r[1] for r in conn.execute("PRAGMA table_info(records)")}
    assert "ts_ms" not in cols  # the half-done migration left nothing behind
    conn.close()
    monkeypatch.undo()
    with Store.open(path, embed_dims=4) as store:  # and the real one still applies
        assert store.get("user:u1", "a") is not None


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "d"
    with Store.open(path, embed_dims=4):
        pass
    conn = sqlite3.connect(path / DB_NAME)
    conn.execute(f"PRAGMA user_version = {S.SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaTooNew, match="newer than this daemon supports"):
        Store.open(path, embed_dims=4)
    # the refused open released the directory lock
    conn = sqlite3.connect(path / DB_NAME)
    conn.execute(f"PRAGMA user_version = {S.SCHEMA_VERSION}")
    conn.commit()
    conn.close()
    with Store.open(path, embed_dims=4):
        pass


def test_v3_database_gets_removal_counters_and_the_seq_index(tmp_path: Path) -> None:
    """Migration 4 from the previous version, with data: counters start at 0, the records
    are found by (collection, seq), deletes count from there."""
    path = tmp_path / "d"
    _v1_database(path)
    conn = sqlite3.connect(path / DB_NAME, isolation_level=None)
    assert S.migrate(conn, target=3) == [2, 3]
    conn.close()
    with Store.open(path, embed_dims=4) as store:
        states = store.collection_states(["user:u1", "authored:hard"])
        assert [s.removals for s in states.values()] == [0, 0]
        assert (states["user:u1"].count, states["user:u1"].max_seq) == (1, 2)
        assert [r.id for r in store.changed_since("user:u1", 0)] == ["a"]
        assert store.changed_since("user:u1", 2) == []
        store.put("user:u1", "b", vector=[0, 1, 0, 0])
        assert [r.id for r in store.changed_since("user:u1", 2)] == ["b"]
        store.delete("user:u1", "a")
        assert store.collection_states(["user:u1"])["user:u1"].removals == 1
    conn = sqlite3.connect(path / DB_NAME)
    assert S.schema_version(conn) == S.SCHEMA_VERSION
    assert conn.execute("SELECT name, removals FROM collections ORDER BY cid").fetchall() == [
        ("user:u1", 1),
        ("authored:hard", 0),
    ]
    plan = " ".join(
        str(r[-1])
        for r in conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM records WHERE cid = 1 AND seq > 2 ORDER BY seq"
        )
    )
    assert "records_cid_seq" in plan, plan
    conn.close()
