"""Two daemons, one memory: what one acknowledges, the other serves on its next request.

B's caches are warm before each write (it has just answered about the same namespace), so
the checks are about invalidating a cache another process made stale, not about a first
load: ingest, a correction with ``memory.update`` (same record count), a v1 delete and
re-put of one id, a supersede mark, and forget, each through one daemon and read through
the other right after the acknowledgement."""

from __future__ import annotations

import time

from libravdb_client import Client
from libravdb_client.testing import DaemonProcess

NS = "team"
PLACES = ["attic", "garage", "cellar", "studio", "greenhouse", "boathouse", "library", "loft"]


def _texts(client: Client, query: str, k: int = 8) -> list[str]:
    return [h.text for h in client.search(query, user_id=NS, k=k).hits]


def _assembled(client: Client, prompt: str) -> str:
    res = client.assemble("reader", prompt=prompt, token_budget=6000, user_id=NS)
    return "\n".join(str(m.get("content", "")) for m in res.messages) + str(
        res.system_prompt_addition or ""
    )


def test_each_daemon_sees_the_others_writes_right_after_the_ack(
    pair: tuple[DaemonProcess, DaemonProcess],
) -> None:
    a, b = pair
    with Client(a.endpoint, timeout=120) as ca, Client(b.endpoint, timeout=120) as cb:
        clients = {"a": ca, "b": cb}
        lags: list[float] = []
        for i, place in enumerate(PLACES):
            writer, reader = ("a", "b") if i % 2 == 0 else ("b", "a")
            query = f"Where did I leave the red toolbox number {i}?"
            _texts(clients[reader], query)  # the reader's caches hold the namespace now
            fact = f"I left the red toolbox number {i} in the {place}."
            clients[writer].ingest(
                f"s-{writer}", [{"id": f"m{i}", "role": "user", "content": fact}], user_id=NS
            )
            acked = time.perf_counter()
            seen = _texts(clients[reader], query)
            lags.append(time.perf_counter() - acked)
            assert fact in seen, (writer, reader, seen)
            assert place in _assembled(clients[reader], query), (writer, reader)
        print(f"\nvisibility: next request after the ack, {max(lags) * 1000:.0f} ms at most")


def test_corrections_replacements_supersedes_and_forget_cross_over(
    pair: tuple[DaemonProcess, DaemonProcess],
) -> None:
    a, b = pair
    with Client(a.endpoint, timeout=120) as ca, Client(b.endpoint, timeout=120) as cb:
        ca.ingest(
            "s1",
            [
                {"id": "h1", "role": "user", "content": "I live in Lisbon near the river."},
                {"id": "h2", "role": "user", "content": "My locker code at the gym is 4417."},
            ],
            user_id=NS,
        )
        assert "I live in Lisbon near the river." in _texts(cb, "where do I live?")

        # memory.update through B: same record count, new text, the old one superseded
        durable = ca.memory_list(user_id=NS).records
        home = next(r for r in durable if "Lisbon" in r.text)
        _texts(ca, "where do I live?")  # A's cache is warm
        cb.memory_update(home.collection, home.id, "I live in Porto now.", user_id=NS)
        assert "I live in Porto now." in _texts(ca, "where do I live?")
        listed = {r.text for r in ca.memory_list(user_id=NS).records}
        assert "I live in Porto now." in listed and "I live in Lisbon near the river." not in listed

        # a v1 delete and re-put of one id (same count, version back to 1) through A
        cb.call("insert_text", {"collection": "user:" + NS, "id": "note", "text": "Blue mug."})
        assert "Blue mug." in _texts(cb, "which mug?")
        ca.call("delete", {"collection": "user:" + NS, "id": "note"})
        ca.call("insert_text", {"collection": "user:" + NS, "id": "note", "text": "Green mug."})
        mugs = _texts(cb, "which mug?")
        assert "Green mug." in mugs and "Blue mug." not in mugs

        # a supersede mark written by A's ingest (a patch of B's cached records)
        _texts(cb, "where do I work?")
        ca.ingest(
            "s1", [{"id": "w1", "role": "user", "content": "I work at the bank."}], user_id=NS
        )
        ca.ingest(
            "s2",
            [
                {
                    "id": "w2",
                    "role": "user",
                    "content": "I started a new job at Lumen, I work there.",
                }
            ],
            user_id=NS,
        )
        old = [
            r
            for r in cb.memory_list(user_id=NS, include_superseded=True).records
            if r.text == "I work at the bank."
        ]
        assert old and old[0].metadata.get("superseded_by"), old

        # forget through B: A serves none of it on its next request
        assert "My locker code at the gym is 4417." in _texts(ca, "locker code")
        cb.forget(user_id=NS, message_ids=["h2"])
        assert all("4417" not in t for t in _texts(ca, "locker code"))
        assert "4417" not in _assembled(ca, "What is my locker code?")
