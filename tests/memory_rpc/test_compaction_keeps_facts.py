"""Compaction keeps the informative turns and promotes no ordinary turn to guidance.

Regression: in a chat of status updates answered by acknowledgements, the updates were
promoted into <elevated_guidance> as obligations, and the extractive summaries kept only
the assistant's filler ("Thanks, noted detail 82...").
"""

from __future__ import annotations

from pathlib import Path

from tests.support import RawConnection, running_daemon

UPDATES = [
    "Update: the deploy of the billing service finished at 5pm.",
    "Call log: Mum rang twice today about the garden party.",
    "Status: the Lisbon flat viewing moved to Thursday at ten.",
    "Update: Priya approved the budget for the Kyoto offsite.",
    "Log: the backup of the photo archive completed without errors.",
    "Update: the plumber replaced the kitchen tap for ninety euros.",
    "Call log: the bank confirmed the mortgage rate of 3.1 percent.",
    "Status: Theo's football match is on Saturday at nine.",
    "Update: the new laptop arrives on the fourteenth.",
    "Log: renewed the car insurance with Fidelidade until March.",
    "Update: Lena booked the Aberdeen train for the twentieth.",
    "Call log: the dentist moved my appointment to the sixth.",
]


def test_updates_are_summarized_not_promoted(tmp_path: Path) -> None:
    messages = []
    for i, text in enumerate(UPDATES):
        messages.append({"id": f"u{i}", "role": "user", "content": text})
        messages.append(
            {"id": f"a{i}", "role": "assistant", "content": f"Thanks, noted detail {80 + i}."}
        )
    with (
        running_daemon(tmp_path, "--tcp", "127.0.0.1:0") as daemon,
        RawConnection(daemon.endpoint) as conn,
    ):
        assert (
            conn.call("ingest", {"sessionId": "log", "userId": "me", "messages": messages})[
                "result"
            ]["ingested"]
            == 24
        )
        result = conn.call("compact", {"sessionId": "log", "force": True})["result"]
        assert result["didCompact"] is True
        summaries = conn.call("list_collection", {"collection": "session_summary:log"})["result"][
            "results"
        ]
        shards = [
            r
            for name in ("elevated:user:me", "elevated:session:log")
            for r in conn.call("list_collection", {"collection": name})["result"]["results"]
        ]
    assert shards == []  # no status update became guidance
    text = " ".join(s["text"] for s in summaries)
    assert "Thanks, noted" not in text, text  # acknowledgements add no fact
    kept = sum(1 for u in UPDATES if u in text)
    assert kept >= 3, text  # the informative turns are what is kept, verbatim
