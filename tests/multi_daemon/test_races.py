"""Two daemons racing on one session: compaction and forget take the session's locks in
the database (advisory locks), and re-read the session under them.

* Both daemons compact one session at the same instant, round after round: the database
  ends with exactly the summaries (ids, texts, covered turns) that one daemon compacting
  alone makes from the same turns, and in each round exactly one of the two compacts.
* A forget through one daemon while the other compacts the session and ingests into it
  (the host retrying the same messages, and new ones): the forgotten turn never comes back,
  in either daemon's search, ``memory.list``, ``export_memory`` or summaries.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from libravdb_client import Client
from libravdb_client.testing import DaemonProcess

from tests.multi_daemon.conftest import StartDaemon

NS = "crew"
TOPICS = [
    "the harbour ferry timetable changed for the winter",
    "our sourdough starter needs feeding every morning",
    "the bike shop fixed the rear derailleur on Tuesday",
    "the choir rehearses the Fauré requiem on Thursdays",
    "the allotment tomatoes caught blight after the rain",
    "the landlord will replace the boiler next month",
]


def _turns(round_: int, n: int = 10) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        topic = TOPICS[(round_ + i) % len(TOPICS)]
        role = "user" if i % 2 == 0 else "assistant"
        text = f"Round {round_} note {i}: {topic}, item {round_ * 100 + i}."
        out.append({"id": f"r{round_}m{i}", "role": role, "content": text})
    return out


def _summaries(client: Client, sid: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Summary id -> (text, covered ids) of the session, read through v1 storage."""
    rows = client.call("list_collection", {"collection": f"session_summary:{sid}"})["results"]
    return {r["id"]: (r["text"], tuple(r["metadata"].get("source_ids", []))) for r in rows}


def _at_once(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls on threads released together; their results (or exceptions)."""
    gate = threading.Barrier(len(calls))

    def run(fn: Callable[[], Any]) -> Any:
        gate.wait()
        try:
            return fn()
        except Exception as exc:  # reported by the caller's assertions
            return exc

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def test_two_daemons_compacting_one_session_write_one_set_of_summaries(
    pair: tuple[DaemonProcess, DaemonProcess], start_daemon: StartDaemon, pg_server: Any
) -> None:
    a, b = pair
    alone = start_daemon("alone", url=pg_server.new_database())
    sid = "shared-session"
    with (
        Client(a.endpoint, timeout=180) as ca,
        Client(b.endpoint, timeout=180) as cb,
        Client(alone.endpoint, timeout=180) as cr,
    ):
        for round_ in range(8):
            turns = _turns(round_)
            ca.ingest(sid, turns, user_id=NS)
            cr.ingest(sid, turns, user_id=NS)
            raced = _at_once(
                lambda: ca.compact(sid, force=True, target_size=4),
                lambda: cb.compact(sid, force=True, target_size=4),
            )
            assert not [r for r in raced if isinstance(r, Exception)], raced
            single = cr.compact(sid, force=True, target_size=4)
            assert sum(r.did_compact for r in raced) == int(single.did_compact), (round_, raced)
        shared, reference = _summaries(ca, sid), _summaries(cr, sid)
        assert reference and shared == reference
        assert _summaries(cb, sid) == reference
        covered = [t for _text, ids in shared.values() for t in ids if not t.startswith("sum:")]
        assert len(covered) == len(set(covered))  # no turn summarized twice


def _everything(client: Client, needle: str, sid: str) -> list[str]:
    """Every place the daemon could serve ``needle`` from: search, every memory.list scope,
    export_memory, the session's raw turns and summaries."""
    found = [h.text for h in client.search(needle, user_id=NS, k=20).hits if needle in h.text]
    for scope in ("durable", "history", "summary", "elevated"):
        page = client.memory_list(user_id=NS, scope=scope, limit=200, include_superseded=True)
        found += [r.text for r in page.records if needle in r.text]
    exported = client.call("export_memory", {"userId": NS})["records"]
    found += [r["text"] for r in exported if needle in r["text"]]
    for coll in (f"session_raw:{sid}", f"session_summary:{sid}"):
        rows = client.call("list_collection", {"collection": coll})["results"]
        found += [r["text"] for r in rows if needle in r["text"]]
    return found


def test_forget_racing_compaction_and_ingest_never_brings_the_data_back(
    pair: tuple[DaemonProcess, DaemonProcess],
) -> None:
    a, b = pair
    with Client(a.endpoint, timeout=180) as ca, Client(b.endpoint, timeout=180) as cb:
        for round_ in range(5):
            sid = f"vault-{round_}"
            secret = f"vault code {7300 + round_}"
            turns = _turns(round_, 12)
            turns[3] = {
                "id": f"secret{round_}",
                "role": "user",
                "content": f"My {secret} is private.",
            }
            ca.ingest(sid, turns, user_id=NS)
            later = _turns(round_ + 50, 4)
            raced = _at_once(
                lambda r=round_: ca.forget(user_id=NS, message_ids=[f"secret{r}"]),
                lambda sid=sid: cb.compact(sid, force=True, target_size=4),
                lambda sid=sid, turns=turns: cb.ingest(sid, turns, user_id=NS),  # a retry
                lambda sid=sid, later=later: cb.ingest(sid, later, user_id=NS),
            )
            assert not [r for r in raced if isinstance(r, Exception)], raced
            assert raced[0].items, raced[0]  # the turn was found and forgotten
            cb.compact(sid, force=True, target_size=4)  # after the forget, too
            cb.ingest(sid, turns, user_id=NS)  # and one more retry
            for client in (ca, cb):
                assert _everything(client, secret, sid) == [], (round_, client.endpoint)
        # the whole namespace, racing a compaction and an ingest of a session of it
        sid = "vault-final"
        ca.ingest(sid, _turns(90, 12), user_id=NS)
        raced = _at_once(
            lambda: ca.forget(user_id=NS, include_sessions=True),
            lambda: cb.compact(sid, force=True, target_size=4),
            lambda: cb.ingest(sid, _turns(90, 12), user_id=NS),
        )
        assert not [r for r in raced if isinstance(r, Exception)], raced
        cb.ingest(sid, _turns(90, 12), user_id=NS)  # a retry after the forget
        for client in (ca, cb):
            assert _everything(client, "Round 90", sid) == []
