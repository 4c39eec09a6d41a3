"""Message contents never reach the log at info level: only ids, sizes and timings.

A full host flow (v2 and v1, every method that carries user text, errors included) runs
against the real daemon at the default log level; its stderr is then searched for every
text that was sent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import RawConnection, running_daemon

pytestmark = pytest.mark.usefixtures("store_target")  # both store backends

# Distinctive words so that a hit can only come from our own texts.
SECRETS = [
    "zanzibarquokka lives at 12 Wisteria Lane",
    "my passport number is XQ7781234",
    "the launch codeword is periwinkleotter",
    "always cc margaretfluxwell on invoices",
    "gingersnapvault password hint",
]


def test_a_full_host_flow_logs_no_message_content(tmp_path: Path) -> None:
    with (
        running_daemon(tmp_path, "--tcp", "127.0.0.1:0") as daemon,
        RawConnection(daemon.endpoint, timeout=60) as c,
    ):
        assert "result" in c.call("initialize", {"clientInfo": {"name": "t", "version": "1"}})
        msgs = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": s, "id": f"m{i}"}
            for i, s in enumerate(SECRETS[:3])
        ]
        assert (
            c.call("ingest", {"sessionId": "p1", "namespace": "ann", "messages": msgs})["result"][
                "ingested"
            ]
            == 3
        )
        assemble = {"sessionId": "p1", "tokenBudget": 2000, "prompt": SECRETS[1]}
        assert "result" in c.call("assemble", assemble)
        assert "result" in c.call("search", {"query": SECRETS[2], "namespace": "ann"})
        assert "result" in c.call("compact", {"sessionId": "p1", "force": True})
        text = f"# Rules\n\n- {SECRETS[3]}\n"
        assert "result" in c.call("authored.ingest", {"sourceDoc": "r.md", "text": text})
        turn = {"sessionId": "v1s", "role": "user", "text": SECRETS[4], "id": "t1"}
        assert "result" in c.call("insert_session_turn", turn)
        ins = {"collection": "user:ann", "id": "x1", "text": SECRETS[4], "metadata": {}}
        assert "result" in c.call("insert_text", ins)
        assert "result" in c.call("search_text", {"collection": "user:ann", "text": SECRETS[0]})
        assert "result" in c.call("embed", {"texts": [SECRETS[0]]})
        assert "result" in c.call("summarize", {"texts": SECRETS[:2]})
        # errors that quote input: a wrong namespace, a bad field, a bad collection
        assert "error" in c.call("assemble", {**assemble, "namespace": SECRETS[0][:20]})
        assert "error" in c.call("ingest", {"sessionId": "p1", "messages": [{"txt": SECRETS[1]}]})
        assert "error" in c.call("list_collection", {"collection": SECRETS[2] + "/x"})
        c.call("shutdown")
    log = daemon.stderr_text()
    assert log.count("\n") > 5  # the daemon did log (start, requests, shutdown)
    for secret in SECRETS:
        for word in secret.split():
            if len(word) > 9:  # the distinctive words
                assert word not in log, f"{word!r} from a message reached the log"
