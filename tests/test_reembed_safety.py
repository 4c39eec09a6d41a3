"""`libravdb reembed` never bricks a store: messages without text, a run killed or failing
half way, and a mismatch message that names what really differs.

Regression for: an assistant turn holding only a tool call was stored as an empty turn;
`reembed` then died on it ("texts[1] is empty") and left a cursor that made the daemon,
`export` and `reembed` refuse the store forever, with the same fingerprint printed twice.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from sidecar.store import Store
from sidecar.store.reembed_stage import STAGE_TABLE
from tests.support import REPO, RawConnection, daemon_env, start_daemon
from tests.test_tools import libravdb

pytestmark = pytest.mark.sqlite_only(
    "the SQLite re-embed's stage and data directory (PostgreSQL's: tests/store)"
)

TOOL_CALL_TURN = {
    "sessionId": "s",
    "messages": [
        {"role": "user", "content": "hello there"},
        {"role": "assistant", "content": [{"type": "tool_use", "name": "bash"}]},
    ],
}


def _stored_fingerprint(data: Path) -> str:
    with sqlite3.connect(data / "store.sqlite3") as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
    return str(row[0])


def test_tool_call_only_turn_is_skipped_and_reembed_then_daemon_work(tmp_path: Path) -> None:
    data = tmp_path / "data"
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint) as conn:
            result = conn.call("ingest", TOOL_CALL_TURN)["result"]
            listed = conn.call("list_collection", {"collection": "session_raw:s"})["result"]
    finally:
        assert daemon.stop() == 0
    assert result["ingested"] == 1
    assert result["skipped"] == 1 and result["empty"] == 1
    assert result["ids"][0] and result["ids"][1] == ""
    assert [r["text"] for r in listed["results"]] == ["hello there"]

    done = libravdb(tmp_path, "reembed", "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    exported = libravdb(tmp_path, "export", "--data-dir", str(data), "--no-vectors")
    assert exported.returncode == 0, exported.stderr
    again = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(again.endpoint) as conn:
            assert conn.call("health")["result"]["ok"] is True
    finally:
        again.stop()


def test_v1_turn_without_text_is_not_stored(tmp_path: Path) -> None:
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint) as conn:
            ok = conn.call(
                "insert_session_turn",
                {"sessionId": "s", "id": "t1", "text": "  ", "metadata": {"role": "assistant"}},
            )
            listed = conn.call("list_collection", {"collection": "session_raw:s"})["result"]
    finally:
        daemon.stop()
    assert ok["result"] == {"ok": True}
    assert listed["results"] == []


def _seed_store_with_blank_records(data: Path, records: int = 3) -> None:
    """A store as an earlier version left it: another model's vectors and, among them, an
    empty turn with a zero vector (what v2 `ingest` stored for a tool-call-only message)."""
    store = Store.open(data, embed_dims=384, fingerprint="some-other-model", model="other")
    rng = np.random.default_rng(3)
    for i in range(records):
        vec = rng.standard_normal(384).astype(np.float32)
        store.put("turns:u1", f"t{i}", text=f"fact number {i} about the garden", vector=vec)
    store.put("session_raw:s", "empty", text="", vector=np.zeros(384, dtype=np.float32))
    store.close()


def test_reembed_keeps_records_without_text_as_zero_vectors(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _seed_store_with_blank_records(data)
    done = libravdb(tmp_path, "reembed", "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    assert "1 without text kept a zero vector" in done.stderr
    fingerprint = _stored_fingerprint(data)
    assert fingerprint != "some-other-model"
    with Store.open(data, embed_dims=384, fingerprint=fingerprint, background=False) as store:
        blank = store.get("session_raw:s", "empty", include_vector=True)
        assert blank is not None and blank.vector is not None
        assert blank.vector.shape == (384,) and not blank.vector.any()
        filled = store.get("turns:u1", "t0", include_vector=True)
        assert filled is not None and filled.vector is not None
        assert abs(float(np.linalg.norm(filled.vector)) - 1.0) < 1e-3


def test_store_left_by_the_old_bug_opens_again(tmp_path: Path) -> None:
    """The exact state the bug left: a cursor towards the store's own fingerprint."""
    data = tmp_path / "data"
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint) as conn:
            conn.call("ingest", {"sessionId": "s", "messages": [{"role": "user", "content": "hi"}]})
    finally:
        daemon.stop()
    fingerprint = _stored_fingerprint(data)
    with sqlite3.connect(data / "store.sqlite3") as conn:
        conn.execute("INSERT INTO meta VALUES ('reembed_target', ?)", (fingerprint,))
        conn.execute("INSERT INTO meta VALUES ('reembed_cursor', '3:1')")
    again = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(again.endpoint) as conn:
            assert conn.call("health")["result"]["ok"] is True
    finally:
        again.stop()
    with sqlite3.connect(data / "store.sqlite3") as conn:
        keys = {k for (k,) in conn.execute("SELECT key FROM meta")}
    assert "reembed_target" not in keys and "reembed_cursor" not in keys


def _staged(data: Path) -> int:
    try:
        with sqlite3.connect(f"file:{data / 'store.sqlite3'}?mode=ro", uri=True) as conn:
            return int(conn.execute(f"SELECT count(*) FROM {STAGE_TABLE}").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_reembed_killed_mid_run_leaves_a_store_that_opens_and_resumes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _seed_store_with_blank_records(data, records=1500)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from sidecar.cli import tool_main; raise SystemExit(tool_main())",
            "reembed",
            "--data-dir",
            str(data),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=daemon_env(tmp_path / "home"),
    )
    deadline = time.monotonic() + 120
    while _staged(data) < 64 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "reembed finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.stderr is not None
    proc.stderr.close()
    staged = _staged(data)
    assert 0 < staged < 1501

    # The old model still opens it: every record kept its old vector.
    with Store.open(
        data, embed_dims=384, fingerprint="some-other-model", background=False
    ) as store:
        assert store.total_records() == 1501
    # That open dropped the stage; kill a second run and let the new model meet it.
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from sidecar.cli import tool_main; raise SystemExit(tool_main())",
            "reembed",
            "--data-dir",
            str(data),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
        env=daemon_env(tmp_path / "home"),
    )
    deadline = time.monotonic() + 120
    while _staged(data) < 64 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)

    refused = start_daemon(tmp_path, "--tcp", "127.0.0.1:0", wait=False)
    out, _ = refused.proc.communicate(timeout=60)
    assert refused.proc.returncode == 1 and out == b""
    message = refused.stderr_text()
    assert "unfinished re-embed" in message
    assert "Run `libravdb reembed` again to finish it" in message
    assert "records staged" in message

    finished = libravdb(tmp_path, "reembed", "--data-dir", str(data))
    assert finished.returncode == 0, finished.stderr
    assert "(resumed)" in finished.stderr and "re-embedded 1501 records" in finished.stderr
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint) as conn:
            hits = conn.call(
                "search_text", {"collection": "turns:u1", "text": "fact number 7", "k": 3}
            )["result"]["results"]
        assert hits and all("garden" in h["text"] for h in hits)
    finally:
        daemon.stop()


def test_mismatch_message_names_both_models_and_never_repeats_one(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _seed_store_with_blank_records(data)
    refused = start_daemon(tmp_path, "--tcp", "127.0.0.1:0", wait=False)
    refused.proc.communicate(timeout=60)
    assert refused.proc.returncode == 1
    message = refused.stderr_text()
    assert "made by other (fingerprint some-other-model)" in message
    assert "configured with all-minilm-l6-v2 (fingerprint " in message
    assert "libravdb reembed" in message
