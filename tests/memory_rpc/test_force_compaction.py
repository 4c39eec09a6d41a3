"""`compact_session {force: true}` compacts whatever is eligible outside the tail.

Regression (issue 14, the reference plugin's host-flow suite): after 16 user turns of
near-identical text the daemon answered ``didCompact: false`` with one cluster formed,
12 turns covered and ``meanConfidence: 0.0``, because every summary of identical turns
failed the progress/quality gate and was declined. The reference daemon compacts there
and the published plugin asserts it. The exact sequence is replayed: 4 batches of 16.
"""

from __future__ import annotations

from pathlib import Path

from tests.support import RawConnection, running_daemon

FILLER = "lorem ipsum dolor sit amet consectetur adipiscing elit " * 8
COMPACT = {
    "force": True,
    "targetSize": 20,
    "continuityMinTurns": 4,
    "continuityTailBudgetTokens": 128,
    "continuityPriorContextTokens": 96,
}


def _turn(conn: RawConnection, sid: str, index: int) -> None:
    meta = {"role": "user", "ts": 1_000 + index, "userId": "u1", "sessionId": sid, "type": "turn"}
    reply = conn.call(
        "insert_session_turn",
        {
            "sessionId": sid,
            "id": f"{sid}:t{index:03d}",
            "text": f"profile turn {index} {FILLER}",
            "metadata": meta,
        },
    )
    assert reply["result"] == {"ok": True}


def test_force_compacts_near_identical_turns(tmp_path: Path) -> None:
    sid = "profile"
    with (
        running_daemon(tmp_path, "--tcp", "127.0.0.1:0") as daemon,
        RawConnection(daemon.endpoint) as conn,
    ):
        for batch in range(4):
            for i in range(16):
                _turn(conn, sid, batch * 16 + i)
            out = conn.call("compact_session", {"sessionId": sid, **COMPACT})["result"]
            assert out["didCompact"] is True, (batch, out)
        summaries = conn.call("list_collection", {"collection": f"session_summary:{sid}"})[
            "result"
        ]["results"]
        # Lossless: every turn is still readable from the raw history.
        raw = conn.call("list_collection", {"collection": f"session_raw:{sid}"})["result"][
            "results"
        ]
    assert len(summaries) >= 2
    assert len(raw) == 64
