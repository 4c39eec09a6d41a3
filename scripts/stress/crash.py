"""Crash: kill -9 during concurrent writes, restart, and check that nothing acknowledged
was lost and that the vector indexes agree with SQLite.

Four writers run against the real daemon: v2 ``ingest`` (client ids), v1 ``insert_text``,
``compact`` of the ingested sessions and ``authored.ingest``. A write counts as
acknowledged when its reply arrived. After each kill the daemon must start again; then
every acknowledged record must be readable, and the checker searches the v1 collection
and the session histories (kept in HNSW graphs by a low exact threshold) for sampled
records by their own text: each must come back first, and every hit must exist in
SQLite (``list_collection``).

Each kill waits for the round's first acknowledged ``ingest`` and ``insert_text``, then a
random pause: a round whose kill landed before any write was acknowledged would prove
nothing, and on a loaded machine (the first embedding of a round can take seconds) a
fixed pause let that happen, so the run's promise depended on timing.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from scripts.stress.common import Client, Report, launch, write_config

V1 = "crash:v1"
WORDS = [
    "garden",
    "kettle",
    "violin",
    "harbor",
    "pepper",
    "lantern",
    "glacier",
    "orbit",
    "saddle",
    "meadow",
    "copper",
    "falcon",
    "tundra",
    "quartz",
    "willow",
    "ember",
    "canyon",
    "prism",
    "marble",
    "thistle",
]


def _text(rng: random.Random, tag: str) -> str:
    return f"{tag} " + " ".join(rng.choice(WORDS) for _ in range(10))


@dataclass
class Acks:
    lock: threading.Lock = field(default_factory=threading.Lock)
    v1: dict[str, str] = field(default_factory=dict)  # id -> text
    turns: dict[str, dict[str, str]] = field(default_factory=dict)  # session -> id -> text
    docs: set[str] = field(default_factory=set)
    compactions: int = 0


# How long a round waits for its first acknowledged writes before it is failed: a bound
# against a daemon that acknowledges nothing, far above any healthy first write.
FIRST_ACK_TIMEOUT_S = 120.0
# The writers whose first acknowledgement each kill waits for (the figures the smoke checks).
AWAITED = ("ingest", "insert")


def _writer(
    endpoint: str,
    kind: str,
    seed: int,
    acks: Acks,
    stop: threading.Event,
    acked: threading.Event,
) -> None:
    rng = random.Random(seed)
    try:
        c = Client(endpoint, timeout=30)
    except OSError:
        return
    n = 0
    try:
        while not stop.is_set():
            n += 1
            tag = f"{kind}{seed}-{n}"
            if kind == "ingest":
                sid = f"cs{seed % 3}"
                msgs = [
                    {
                        "role": "user" if i % 2 == 0 else "assistant",
                        "id": f"{tag}-{i}",
                        "content": _text(rng, f"{tag}-{i}"),
                    }
                    for i in range(rng.randint(1, 6))
                ]
                c.result("ingest", {"sessionId": sid, "namespace": "crash", "messages": msgs})
                with acks.lock:
                    got = acks.turns.setdefault(sid, {})
                    got.update({m["id"]: m["content"] for m in msgs})
                acked.set()
            elif kind == "insert":
                text = _text(rng, tag)
                c.result("insert_text", {"collection": V1, "id": tag, "text": text})
                with acks.lock:
                    acks.v1[tag] = text
                acked.set()
            elif kind == "compact":
                time.sleep(0.2)
                c.result("compact", {"sessionId": f"cs{rng.randrange(3)}", "force": True})
                with acks.lock:
                    acks.compactions += 1
                acked.set()
            else:
                doc = f"notes/crash-{rng.randrange(20)}.md"
                text = f"# {tag}\n\n- always {rng.choice(WORDS)} before {rng.choice(WORDS)}\n"
                c.result("authored.ingest", {"sourceDoc": doc, "text": text, "core": True})
                with acks.lock:
                    acks.docs.add(doc)
                acked.set()
    except (OSError, ConnectionError, RuntimeError, ValueError):
        return  # the kill: whatever had no reply was never acknowledged
    finally:
        c.close()


def check(c: Client, acks: Acks, rng: random.Random, report: Report, round_: int) -> int:
    """Every acknowledged write is there; sampled records are found by their own text.
    Returns the number of records checked against the index."""
    stored = {
        r["id"]: r["text"] for r in c.result("list_collection", {"collection": V1})["results"]
    }
    for rid, text in acks.v1.items():
        if stored.get(rid) != text:
            report.fail(f"round {round_}: acknowledged insert_text {rid} lost")
    for sid, turns in acks.turns.items():
        raw = c.result("list_collection", {"collection": f"session_raw:{sid}"})["results"]
        have = {r["id"] for r in raw}
        lost = [t for t in turns if t not in have]
        if lost:
            report.fail(f"round {round_}: {len(lost)} acknowledged turns of {sid} lost: {lost[:3]}")
    docs = {d["sourceDoc"] for d in c.result("authored.list")["documents"]}
    for doc in acks.docs - docs:
        report.fail(f"round {round_}: acknowledged authored document {doc} lost")
    checked = 0
    pools = [(V1, stored)] + [
        (
            f"session_raw:{sid}",
            {
                r["id"]: r["text"]
                for r in c.result("list_collection", {"collection": f"session_raw:{sid}"})[
                    "results"
                ]
            },
        )
        for sid in acks.turns
    ]
    for coll, records in pools:
        for rid in rng.sample(sorted(records), min(8, len(records))):
            hits = c.result("search_text", {"collection": coll, "text": records[rid], "k": 3})
            ids = [h["id"] for h in hits["results"]]
            checked += 1
            if not ids or ids[0] != rid:
                report.fail(f"round {round_}: index of {coll} does not find {rid} first: {ids}")
            for hid in ids:
                if hid not in records:
                    report.fail(f"round {round_}: index of {coll} returns {hid}, not in SQLite")
    return checked


def _await_first_acks(acked: dict[str, threading.Event], report: Report, round_: int) -> None:
    """Block until every awaited writer has had a write acknowledged in this round."""
    for kind in AWAITED:
        if not acked[kind].wait(FIRST_ACK_TIMEOUT_S):
            report.fail(
                f"round {round_}: no {kind} acknowledged within {FIRST_ACK_TIMEOUT_S:.0f} s "
                "of the round's start"
            )


def run_crash(
    tmp: Path, kills: int = 100, seed: int = 7, pause_s: tuple[float, float] = (0.0, 1.2)
) -> Report:
    """``kills`` rounds of writers and a kill -9, each kill a random ``pause_s`` after the
    round's first acknowledged ingest and insert_text."""
    report = Report("crash")
    rng = random.Random(seed)
    config = write_config(tmp)
    data = tmp / "data"
    acks = Acks()
    failed_restarts = checked = 0
    restart_ms: list[float] = []
    started = time.perf_counter()
    d = launch(tmp, data, config)
    for round_ in range(kills):
        stop = threading.Event()
        kinds = ["ingest", "ingest", "insert", "insert", "compact", "authored"]
        acked = {kind: threading.Event() for kind in kinds}
        writers = [
            threading.Thread(
                target=_writer,
                args=(d.endpoint, kind, round_ * 10 + i, acks, stop, acked[kind]),
                daemon=True,
            )
            for i, kind in enumerate(kinds)
        ]
        for w in writers:
            w.start()
        _await_first_acks(acked, report, round_)
        time.sleep(rng.uniform(*pause_s))
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        stop.set()
        for w in writers:
            w.join(30)
        t0 = time.perf_counter()
        try:
            d = launch(tmp, data, config)
        except Exception as exc:
            failed_restarts += 1
            report.fail(f"round {round_}: restart failed: {exc}")
            break
        restart_ms.append((time.perf_counter() - t0) * 1000)
        c = Client(d.endpoint)
        try:
            checked += check(c, acks, rng, report, round_)
        finally:
            c.close()
    d.stop()
    report.figures = {
        "kills": kills,
        "acknowledged insert_text": len(acks.v1),
        "acknowledged ingest turns": sum(len(t) for t in acks.turns.values()),
        "acknowledged authored documents": len(acks.docs),
        "compactions completed": acks.compactions,
        "acknowledged writes lost": sum("lost" in f for f in report.failures),
        "failed restarts": failed_restarts,
        "index self-searches checked": checked,
        "restart p50 ms": round(sorted(restart_ms)[len(restart_ms) // 2]) if restart_ms else None,
        "seconds": round(time.perf_counter() - started, 1),
    }
    return report
