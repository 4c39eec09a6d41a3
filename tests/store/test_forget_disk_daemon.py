"""A forget against the real daemon (MiniLM) leaves no copy of the forgotten text in
``store.sqlite3`` or its WAL when it returns, and no copy of its vector in any file under
``index/`` once the indexes are saved next (v1 ``flush`` here; docs/operations.md §
Guarantees). The files are read raw, as anyone with the disk could."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scripts.stress.disk_traces import stored_vector, text_needles, traces, vector_needles
from tests.support import DaemonProcess, RawConnection, start_daemon

pytestmark = pytest.mark.sqlite_only("what a forget leaves in SQLite's and hnswlib's files")

# Graphs from 32 records, so that a few dozen turns live in saved HNSW files; no idle
# checkpoint during a test, so that only the forget itself can have cleaned the files.
CONFIG = """
[store]
exact_threshold = 32
checkpoint_idle_s = 3600

[compaction]
auto = false
"""

FILLER = [
    "We planted tomatoes and basil in the raised bed near the fence.",
    "The invoice for the roof repair came to 2,400 euros.",
    "I switched the build from webpack to esbuild; it is much faster.",
    "The dog needs his vaccination at the vet next spring.",
    "My sister is visiting Lisbon in March for the conference.",
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProcess, Path]]:
    tmp = tmp_path_factory.mktemp("forget-disk")
    data = tmp / "data"
    config = tmp / "libravdb.toml"
    config.write_text(CONFIG)
    d = start_daemon(
        tmp, "--tcp", "127.0.0.1:0", extra_args=("--data-dir", str(data), "--config", str(config))
    )
    yield d, data
    d.stop()


@pytest.fixture
def conn(served: tuple[DaemonProcess, Path]) -> Iterator[RawConnection]:
    with RawConnection(served[0].endpoint, timeout=60) as c:
        yield c


def _chat(user: str, secret: str, n: int = 40) -> list[dict[str, Any]]:
    msgs = []
    for i in range(n):
        text = secret if i == n // 2 else f"{FILLER[i % len(FILLER)]} (note {i} of {user})"
        role = "user" if i % 2 == 0 else "assistant"
        msgs.append({"id": f"{user}-{i:03d}", "role": role, "content": text, "ts": 10_000 + i})
    return msgs


def _saved_in_index(c: RawConnection, data: Path, needles: dict[str, bytes]) -> None:
    """Flush until the graph holding the secret's vector is built and saved (the indexer
    builds it in the background): the precondition of every check below."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        c.result("flush")
        if any(".hnsw" in t for t in traces(data, needles)):
            return
        time.sleep(0.05)
    raise AssertionError("the secret's vector never reached an index file")


def _needles(data: Path, collection: str, record_id: str, secret: str) -> dict[str, bytes]:
    raw = stored_vector(data, collection, record_id)
    assert raw is not None, f"{collection}/{record_id} has no stored vector"
    return {**text_needles(secret), **vector_needles(raw)}


def _assert_gone(c: RawConnection, data: Path, needles: dict[str, bytes]) -> None:
    """The database and its log right after the forget returned; the index files after
    the next save."""
    assert traces(data, needles, indexes=False) == []
    c.result("flush")
    assert traces(data, needles) == []


def _turn_id(c: RawConnection, user: str, secret: str) -> str:
    turns = c.result("list_collection", {"collection": f"turns:{user}"})["results"]
    return next(str(t["id"]) for t in turns if t["text"] == secret)


def test_forget_by_message_id_leaves_no_copy_on_disk(
    served: tuple[DaemonProcess, Path], conn: RawConnection
) -> None:
    _, data = served
    secret = "My passport number is X7Q-49A8-ZZ, keep it safe."
    msgs = _chat("pat", secret)
    conn.result("ingest", {"sessionId": "pat-1", "userId": "pat", "messages": msgs})
    needles = _needles(data, "turns:pat", _turn_id(conn, "pat", secret), secret)
    _saved_in_index(conn, data, needles)
    out = conn.result("forget", {"userId": "pat", "messageIds": [msgs[20]["id"]]})
    assert out["deleted"] >= 1
    _assert_gone(conn, data, needles)


def test_forget_by_record_leaves_no_copy_on_disk(
    served: tuple[DaemonProcess, Path], conn: RawConnection
) -> None:
    _, data = served
    secret = "My passport number is K2P-77B1-QQ, keep it safe."
    conn.result("ingest", {"sessionId": "rae-1", "userId": "rae", "messages": _chat("rae", secret)})
    rid = _turn_id(conn, "rae", secret)
    needles = _needles(data, "turns:rae", rid, secret)
    _saved_in_index(conn, data, needles)
    out = conn.result(
        "forget", {"userId": "rae", "records": [{"collection": "turns:rae", "id": rid}]}
    )
    assert out["deleted"] >= 1
    _assert_gone(conn, data, needles)


def test_v1_delete_leaves_no_copy_on_disk(
    served: tuple[DaemonProcess, Path], conn: RawConnection
) -> None:
    _, data = served
    coll, secret = "notes:v1", "passport X7Q-49A8-ZZ belongs to Vic"
    for i in range(40):
        conn.result("insert_text", {"collection": coll, "id": f"n{i}", "text": FILLER[i % 5]})
    conn.result("insert_text", {"collection": coll, "id": "secret", "text": secret})
    needles = _needles(data, coll, "secret", secret)
    _saved_in_index(conn, data, needles)
    conn.result("delete", {"collection": coll, "id": "secret"})
    _assert_gone(conn, data, needles)


def test_forget_under_a_steady_writer_leaves_no_copy_on_disk(
    served: tuple[DaemonProcess, Path], conn: RawConnection
) -> None:
    """Another client writes all along: the forget's checkpoint still empties the log of
    the forgotten text (the writes after it hold none)."""
    d, data = served
    secret = "My passport number is Z9Z-11C3-WW, keep it safe."
    msgs = _chat("wes", secret)
    conn.result("ingest", {"sessionId": "wes-1", "userId": "wes", "messages": msgs})
    needles = _needles(data, "turns:wes", _turn_id(conn, "wes", secret), secret)
    _saved_in_index(conn, data, needles)
    stop = threading.Event()
    written = [0]

    def write() -> None:
        with RawConnection(d.endpoint, timeout=60) as w:
            while not stop.is_set():
                n = written[0]
                w.result("insert_text", {"collection": "busy", "id": f"b{n}", "text": f"busy {n}"})
                written[0] += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        while written[0] < 5:  # the writer is going
            time.sleep(0.01)
        out = conn.result("forget", {"userId": "wes", "messageIds": [msgs[20]["id"]]})
        assert out["deleted"] >= 1
        assert traces(data, needles, indexes=False) == []
        before = written[0]
        while written[0] < before + 5:  # writes after the forget hold none of it either
            time.sleep(0.01)
        assert traces(data, needles, indexes=False) == []
    finally:
        stop.set()
        writer.join()
    _assert_gone(conn, data, needles)
