"""Faults part, "forgotten text leaves the disk": a forget (v2 by message id, v1
``delete``) while another client writes all along, then the raw bytes of
``store.sqlite3``, its WAL and every index file; then a forget followed at once by
``kill -9`` and a restart. The promise (docs/operations.md § Guarantees): once a forget
returns, the text is in neither the database file nor its log; the vector leaves the
index files at their next save (``flush`` here, or the checkpoint thread's next tick),
and after a kill, at the first save of the next start.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

from scripts.stress.common import Client, Report, connected
from scripts.stress.disk_traces import stored_vector, text_needles, traces, vector_needles

# Graphs (and their files) from 32 records; no idle checkpoint, so that only the forget's
# own scrub can have cleaned the files when they are read.
CONFIG = """
[store]
exact_threshold = 32
checkpoint_idle_s = 3600

[compaction]
auto = false
"""

FILLER = "note {i}: the lanterns by the glacier path were relit at dusk"


def _chat(user: str, secret: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{user}-{i:02d}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": secret if i == 20 else FILLER.format(i=i),
            "ts": 10_000 + i,
        }
        for i in range(40)
    ]


class _Writer(threading.Thread):
    """Another client writing v1 records without a pause until stopped."""

    def __init__(self, endpoint: str) -> None:
        super().__init__(daemon=True)
        self.endpoint = endpoint
        self.stop = threading.Event()
        self.written = 0
        self.error = ""

    def run(self) -> None:
        with Client(self.endpoint) as c:
            while not self.stop.is_set():
                n = self.written
                reply = c.call(
                    "insert_text", {"collection": "busy", "id": f"b{n}", "text": f"b{n}"}
                )
                if "error" in reply:
                    self.error = str(reply["error"])
                    return
                self.written += 1


def _saved(c: Client, data: Path, needles: dict[str, bytes]) -> bool:
    """Flush until the graph holding the vector is saved (built in the background)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        c.result("flush")
        if any(".hnsw" in t for t in traces(data, needles)):
            return True
        time.sleep(0.05)
    return False


def _needles(data: Path, collection: str, rid: str, secret: str) -> dict[str, bytes]:
    raw = stored_vector(data, collection, rid)
    return {**text_needles(secret), **(vector_needles(raw) if raw else {})}


def _secret_turn(c: Client, user: str, secret: str) -> str:
    turns = c.result("list_collection", {"collection": f"turns:{user}"})["results"]
    return next(str(t["id"]) for t in turns if t["text"] == secret)


def _forget_cases(c: Client, endpoint: str, data: Path, report: Report) -> list[dict[str, bytes]]:
    """Store two secrets, forget them (v2 and v1) under a steady writer; check the
    database and its log at once, the index files after a flush."""
    v2 = "My passport number is X7Q-49A8-ZZ, keep it safe."
    c.result("ingest", {"sessionId": "pat-1", "userId": "pat", "messages": _chat("pat", v2)})
    n2 = _needles(data, "turns:pat", _secret_turn(c, "pat", v2), v2)
    v1 = "passport K2P-77B1-QQ belongs to Vic"
    for i in range(40):
        c.result("insert_text", {"collection": "notes", "id": f"n{i}", "text": FILLER.format(i=i)})
    c.result("insert_text", {"collection": "notes", "id": "secret", "text": v1})
    n1 = _needles(data, "notes", "secret", v1)
    if not (_saved(c, data, n2) and _saved(c, data, n1)):
        report.fail("forget on disk: the secrets' vectors never reached an index file")
    writer = _Writer(endpoint)
    writer.start()
    try:
        c.result("forget", {"userId": "pat", "messageIds": ["pat-20"]})
        left = traces(data, n2, indexes=False)
        c.result("delete", {"collection": "notes", "id": "secret"})
        left += traces(data, n1, indexes=False)
    finally:
        writer.stop.set()
        writer.join()
    if writer.error or not writer.written:
        report.fail(f"forget on disk: the concurrent writer failed: {writer.error}")
    if left:
        report.fail(f"forget on disk: after the forget returned: {left[:4]}")
    c.result("flush")
    after_save = traces(data, {**n1, **n2})
    if after_save:
        report.fail(f"forget on disk: after the next index save: {after_save[:4]}")
    return [n1, n2]


def _killed_after_forget(tmp: Path, data: Path, config: Path, report: Report) -> None:
    """Forget, then kill -9 at once (the graph file may still hold the vector): the
    restart's first save removes it."""
    secret = "My passport number is Z9Z-11C3-WW, keep it safe."
    with connected(tmp, data, config) as (d, c):
        c.result(
            "ingest", {"sessionId": "wes-1", "userId": "wes", "messages": _chat("wes", secret)}
        )
        needles = _needles(data, "turns:wes", _secret_turn(c, "wes", secret), secret)
        if not _saved(c, data, needles):
            report.fail("forget on disk: the vector never reached an index file (kill case)")
        c.result("forget", {"userId": "wes", "messageIds": ["wes-20"]})
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
    if left := traces(data, needles, indexes=False):
        report.fail(f"forget on disk: after the forget and kill -9: {left[:4]}")
    with connected(tmp, data, config) as (_, c):
        c.result("flush")
        if left := traces(data, needles):
            report.fail(f"forget on disk: after the restart's first save: {left[:4]}")


def forget_leaves_no_trace(tmp: Path, report: Report) -> str:
    config = tmp / "forget-disk.toml"
    config.write_text(CONFIG)
    data = tmp / "fg"
    with connected(tmp, data, config) as (d, c):
        cases = _forget_cases(c, d.endpoint, data, report)
    if left := traces(data, {k: v for n in cases for k, v in n.items()}):
        report.fail(f"forget on disk: after a clean stop: {left[:4]}")
    _killed_after_forget(tmp, data, config, report)
    return (
        "v2 forget by message id and v1 delete under a steady writer, then kill -9 right "
        "after a forget: no byte of the text in store.sqlite3 or its WAL once the forget "
        "returned, none of the vector in index/ after the next save"
    )
