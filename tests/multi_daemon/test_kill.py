"""A daemon killed (``kill -9``) while its last write is committing, and the daemon that
survives it on the same database.

Seen once in six kill -9 runs: the survivor's ingest failed with ``version conflict on
session_state ...: expected version 50, record is at version 51`` (nothing lost). The
cause: a session lock lives on a connection of its own, the write on a pooled one. When
the holder dies, the server ends the lock's session at once, but the write's COMMIT, sent
before the kill, may still be running (flushing its WAL, waiting for a lock): the
survivor takes the session lock, reads the state the dying write is replacing, and its
compare-and-swap then loses to the commit that lands a moment later.

The race is made deterministic here: the dying daemon is a process that takes the ingest
lock and writes the session's state with the store's own code, but sends its COMMIT
behind a statement the test holds (an advisory lock of the test's), so the COMMIT is
queued on the server when the process is killed. The test releases it only once the
survivor's ingest is waiting in the database.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
from libravdb_client import Client

from tests.multi_daemon.conftest import StartDaemon
from tests.support import REPO

GATE = (0x7E57, 1)  # the test's advisory lock: the dying write's COMMIT waits behind it
SID = "kill-s1"

DYING = textwrap.dedent(
    """
    import sys
    from sidecar.memory.core import layout as C
    from sidecar.store.backend import open_store
    from sidecar.store.pg.writes import PgTx, apply_ops, now_ms
    from sidecar.store.types import Put

    url, sid, gate_a, gate_b = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    store = open_store(url, embed_dims=384, fingerprint="", background=False)
    # what an ingest holds (SharedLocks("ingest"): the key "ingest:<session id>")
    lease = store.acquire_session_lock(f"ingest:{sid}")
    coll = C.session_state(sid)
    state = store.get(coll, C.INGEST_STATE_ID)
    meta = dict(state.metadata)
    meta["next_position"] = int(meta["next_position"]) + 1
    put = Put(coll, C.INGEST_STATE_ID, "", meta, None, if_version=state.version)

    def dying_write(conn):
        tx = PgTx(store, conn, now_ms())
        apply_ops(tx, [put])
        tx.finish()
        # one simple-protocol message: the COMMIT is on the server before the kill
        conn.execute(f"SELECT pg_advisory_xact_lock({gate_a}, {gate_b}); COMMIT")

    print("writing", flush=True)
    store.db.transact(dying_write)
    """
)


def _waiting(conn: psycopg.Connection[Any], query_like: str) -> list[int]:
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND query LIKE %s",
        (query_like,),
    ).fetchall()
    return [int(r[0]) for r in rows]


def _until(what: str, probe: Any) -> Any:
    """Poll the database until ``probe()`` is truthy (the events are in another process)."""
    for _ in range(600):
        found = probe()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def test_a_write_committing_after_its_daemon_died_does_not_fail_the_survivor(
    start_daemon: StartDaemon, database: str, tmp_path: Path
) -> None:
    survivor = start_daemon("b")
    with Client(survivor.endpoint, timeout=120) as client:
        first = [{"id": "m0", "role": "user", "content": "I keep three beehives."}]
        assert client.ingest(SID, first, user_id="u").ingested == 1
        state = client.call("list_collection", {"collection": f"session_state:{SID}"})["results"]
        version = next(r for r in state if r["id"] == "__ingest_state__")["version"]

        with psycopg.connect(database, autocommit=True) as watch:
            watch.execute("SELECT pg_advisory_lock(%s, %s)", GATE)
            dying = subprocess.Popen(
                [sys.executable, "-c", DYING, database, SID, *map(str, GATE)],
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=(tmp_path / "dying.log").open("w"),
            )
            try:
                assert dying.stdout is not None
                lines = iter(dying.stdout.readline, b"")  # its log lines come first
                assert any(line == b"writing\n" for line in lines)
                (held,) = _until(
                    "the dying write waits at its COMMIT",
                    lambda: _waiting(watch, "%pg_advisory_xact_lock%COMMIT%"),
                )
            finally:
                dying.kill()  # kill -9: its session lock goes with its connection
                dying.wait()
            outcome: dict[str, Any] = {}

            def ingest() -> None:
                more = [{"id": "m1", "role": "user", "content": "The queen bee is marked blue."}]
                try:
                    outcome["result"] = client.ingest(SID, more, user_id="u")
                except Exception as exc:  # the version conflict, before the fix
                    outcome["error"] = exc

            survivor_ingest = threading.Thread(target=ingest)
            survivor_ingest.start()
            # the survivor waits in the database: for the dying write to end (the fix), or
            # (before it) for that write's row lock, having read the old state
            _until(
                "the survivor's ingest waits in the database",
                lambda: [p for p in _waiting(watch, "%") if p != held],
            )
            watch.execute("SELECT pg_advisory_unlock(%s, %s)", GATE)
            survivor_ingest.join(120)
        assert "error" not in outcome, outcome["error"]
        assert outcome["result"].ingested == 1
        rows = client.call("list_collection", {"collection": f"session_state:{SID}"})["results"]
        final = next(r for r in rows if r["id"] == "__ingest_state__")
        # the dead daemon's commit landed (position 1 taken), then the survivor's
        assert final["version"] == version + 2
        assert final["metadata"]["next_position"] == 3
        raw = client.call("list_collection", {"collection": f"session_raw:{SID}"})["results"]
        assert sorted(r["id"] for r in raw) == ["m0", "m1"]
