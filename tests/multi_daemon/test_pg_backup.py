"""The backup of a PostgreSQL store that docs/operations.md gives, done as written: a
``pg_dump -Fc --schema=libravdb`` while a daemon serves, ``pg_restore`` into a new database
with the extension, a daemon on the restored database answering as the original did, its
per-collection HNSW index rebuilt by the restore."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from libravdb_client import Client

from tests.multi_daemon.conftest import CONFIG, StartDaemon

# a collection over this many records gets its HNSW index (the funnel)
THRESHOLD_CONFIG = CONFIG + "[store]\nexact_threshold = 40\n"


def _bin(name: str) -> str:
    import pgserver

    return str(Path(pgserver.__file__).parent / "pginstall" / "bin" / name)


def _indexes(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'libravdb' "
            "AND indexname LIKE 'records_ann_%'"
        ).fetchall()
    return sorted(str(r[0]) for r in rows)


def test_pg_dump_and_pg_restore_as_documented(
    tmp_path: Path, start_daemon: StartDaemon, database: str, pg_server: Any
) -> None:
    first = start_daemon("first", config=THRESHOLD_CONFIG)
    with Client(first.endpoint, timeout=180) as c:
        turns = [
            {"id": f"m{i}", "role": "user", "content": f"Note {i}: the plum tree by gate {i}."}
            for i in range(60)
        ]
        c.ingest("garden", turns, user_id="ana")
        c.ingest(
            "garden",
            [{"id": "x", "role": "user", "content": "The shed key is blue."}],
            user_id="ana",
        )
        before = [(h.id, round(h.score, 4)) for h in c.search("shed key", user_id="ana").hits]

    deadline = time.monotonic() + 120  # the daemon builds the index in the background
    while len(_indexes(database)) < 2:  # the session's raw turns and the namespace's
        assert time.monotonic() < deadline, "no HNSW index built"
        time.sleep(0.5)
    built = _indexes(database)
    dump = tmp_path / "memory.dump"
    subprocess.run(
        [_bin("pg_dump"), "-Fc", "--schema=libravdb", "-f", str(dump), database], check=True
    )
    restored = pg_server.url("restored_memory")
    with pg_server.admin() as admin:
        admin.execute('CREATE DATABASE "restored_memory" TEMPLATE template0')
    subprocess.run(
        [_bin("psql"), "-q", "-d", restored, "-c", "CREATE EXTENSION vector"], check=True
    )
    subprocess.run([_bin("pg_restore"), "--no-owner", "-d", restored, str(dump)], check=True)
    assert set(built) <= set(_indexes(restored))

    second = start_daemon("second", url=restored, config=THRESHOLD_CONFIG)
    with Client(second.endpoint, timeout=180) as c:
        after = [(h.id, round(h.score, 4)) for h in c.search("shed key", user_id="ana").hits]
        # the same hits in the same order; a fused score may move in the 4th decimal (it
        # failed on 1.4493 against 1.4494 on a loaded machine, before any change of this code)
        assert [i for i, _ in after] == [i for i, _ in before]
        assert [s for _, s in after] == pytest.approx([s for _, s in before], abs=2e-3)
        assert c.ingest("garden", turns[:3], user_id="ana").skipped == 3  # already there
