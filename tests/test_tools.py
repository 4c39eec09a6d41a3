"""`libravdb reembed | export | import` on a real data directory, and the daemon's refusal
of a store built by another embedding model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sidecar.store import Store
from tests.support import REPO, RawConnection, daemon_env, start_daemon

pytestmark = pytest.mark.sqlite_only(
    "offline tools on a stopped daemon's SQLite data directory and its lock"
)


def libravdb(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from sidecar.cli import tool_main; raise SystemExit(tool_main())",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=daemon_env(tmp / "home"),
        timeout=300,
    )


def seed_foreign_store(data: Path) -> None:
    """A store written by some other 384-d model (random vectors, another fingerprint)."""
    store = Store.open(data, embed_dims=384, fingerprint="some-other-model")
    rng = np.random.default_rng(7)
    texts = {
        "a": "The user's cat is called Miso and likes tuna.",
        "b": "Deploys go out every Tuesday after the standup.",
        "c": "The staging database lives on port 5433.",
    }
    for rid, text in texts.items():
        vec = rng.standard_normal(384).astype(np.float32)
        store.put("user:u1", rid, text=text, metadata={"k": rid}, vector=vec / np.linalg.norm(vec))
    store.close()


def test_mismatched_store_is_refused_then_reembed_fixes_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seed_foreign_store(data)

    refused = start_daemon(tmp_path, "--tcp", "127.0.0.1:0", wait=False)
    out, _ = refused.proc.communicate(timeout=60)
    assert refused.proc.returncode == 1
    assert out == b""
    message = refused.stderr_text()
    assert "some-other-model" in message
    assert "libravdb reembed" in message

    done = libravdb(tmp_path, "reembed", "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    assert "re-embedded 3 records" in done.stderr

    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint) as conn:
            reply = conn.call(
                "search_text", {"collection": "user:u1", "text": "what is my cat's name?", "k": 1}
            )
        assert reply["result"]["results"][0]["id"] == "a"
    finally:
        daemon.stop()


def test_export_import_round_trip(tmp_path: Path) -> None:
    source = tmp_path / "src"
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0", extra_args=("--data-dir", str(source)))
    try:
        with RawConnection(daemon.endpoint) as conn:
            for i, text in enumerate(["alpha particles", "beta decay", "gamma rays"]):
                reply = conn.call(
                    "insert_text",
                    {"collection": "user:u1", "id": f"r{i}", "text": text, "metadata": {"i": i}},
                )
                assert reply["result"] == {"ok": True}
            conn.call("insert_text", {"collection": "user:u10", "id": "x", "text": "other user"})
    finally:
        assert daemon.stop() == 0

    dump = tmp_path / "dump.ndjson"
    exported = libravdb(
        tmp_path, "export", "--data-dir", str(source), "--namespace", "user:u1", "-o", str(dump)
    )
    assert exported.returncode == 0, exported.stderr
    kinds = [json.loads(line)["kind"] for line in dump.read_text().splitlines()]
    assert kinds[0] == "header" and kinds[-1] == "end"
    assert kinds.count("record") == 3  # exactly user:u1, never user:u10

    target = tmp_path / "dst"
    imported = libravdb(tmp_path, "import", "--data-dir", str(target), str(dump))
    assert imported.returncode == 0, imported.stderr
    assert "imported 3 records" in imported.stderr

    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0", extra_args=("--data-dir", str(target)))
    try:
        with RawConnection(daemon.endpoint) as conn:
            hits = conn.call(
                "search_text", {"collection": "user:u1", "text": "radioactive decay", "k": 3}
            )
            listed = conn.call("list_collection", {"collection": "user:u1"})
        assert hits["result"]["results"][0]["id"] == "r1"
        assert [r["metadata"]["i"] for r in listed["result"]["results"]] == [0, 1, 2]
    finally:
        daemon.stop()


def test_tools_refuse_a_directory_held_by_a_daemon(tmp_path: Path) -> None:
    data = tmp_path / "data"
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        done = libravdb(tmp_path, "export", "--data-dir", str(data))
        assert done.returncode == 1
        assert str(daemon.proc.pid) in done.stderr  # names the holder
    finally:
        daemon.stop()


def test_import_of_a_missing_file(tmp_path: Path) -> None:
    done = libravdb(tmp_path, "import", "--data-dir", str(tmp_path / "d"), str(tmp_path / "nope"))
    assert done.returncode == 1
    assert "no such file" in done.stderr


def test_import_cannot_resurrect_forgotten_records(tmp_path: Path) -> None:
    data = tmp_path / "data"
    messages = [
        {"id": "m1", "role": "user", "content": "My passport number is in the blue folder."},
        {"id": "m2", "role": "assistant", "content": "Noted: the blue folder has the passport."},
    ]
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint) as conn:
            reply = conn.call("ingest", {"sessionId": "s1", "userId": "u1", "messages": messages})
            assert reply["result"]["ingested"] == 2, reply
    finally:
        assert daemon.stop() == 0

    dump = tmp_path / "before-forget.ndjson"
    assert libravdb(tmp_path, "export", "--data-dir", str(data), "-o", str(dump)).returncode == 0

    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint) as conn:
            forgot = conn.call("forget", {"userId": "u1", "includeSessions": True})
            assert forgot["result"]["deleted"] >= 2, forgot
    finally:
        assert daemon.stop() == 0

    imported = libravdb(tmp_path, "import", "--data-dir", str(data), str(dump))
    assert imported.returncode == 0, imported.stderr
    assert "forgotten records skipped" in imported.stderr

    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint) as conn:
            for collection in ("turns:u1", "session_raw:s1", "user:u1"):
                listed = conn.call("list_collection", {"collection": collection})
                assert listed["result"]["results"] == [], collection
    finally:
        daemon.stop()


def test_import_cannot_resurrect_one_forgotten_fact_or_its_old_summary(tmp_path: Path) -> None:
    data = tmp_path / "data"
    facts = [f"Note {i}: the spare key is with neighbour number {i}." for i in range(30)]
    facts[5] = "My bank PIN is 4417, never repeat it."
    messages = [{"id": f"m{i}", "role": "user", "content": t} for i, t in enumerate(facts)]
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint) as conn:
            conn.call("ingest", {"sessionId": "s1", "userId": "u1", "messages": messages})
            conn.call("compact", {"sessionId": "s1", "force": True, "targetSize": 4})
    finally:
        assert daemon.stop() == 0
    dump = tmp_path / "before-forget.ndjson"
    assert libravdb(tmp_path, "export", "--data-dir", str(data), "-o", str(dump)).returncode == 0
    assert "4417" in dump.read_text()

    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint) as conn:
            out = conn.call("forget", {"userId": "u1", "messageIds": ["m5"]})["result"]
            assert out["summariesRebuilt"] >= 1, out
    finally:
        assert daemon.stop() == 0

    imported = libravdb(tmp_path, "import", "--data-dir", str(data), str(dump))
    assert imported.returncode == 0, imported.stderr
    again = tmp_path / "after-import.ndjson"
    assert libravdb(tmp_path, "export", "--data-dir", str(data), "-o", str(again)).returncode == 0
    text = again.read_text()
    assert "4417" not in text  # neither the turn, its copies nor the old summary came back
    assert "neighbour number 4" in text and "neighbour number 6" in text


def test_offline_commands_refuse_a_directory_without_a_store(tmp_path: Path) -> None:
    # Regression: `export --data-dir /tmp/typo` created an empty store there and exited 0.
    typo = tmp_path / "typo"
    for args in (["export", "--data-dir", str(typo)], ["reembed", "--data-dir", str(typo)]):
        done = libravdb(tmp_path, *args)
        assert done.returncode == 1, done.stderr
        assert f"no store in {typo}" in done.stderr and "--data-dir" in done.stderr
        assert not typo.exists()  # nothing was written


def test_import_into_a_new_directory_says_so(tmp_path: Path) -> None:
    from sidecar.store.ndjson import FORMAT, VERSION

    dump = tmp_path / "dump.ndjson"
    lines = [
        {"kind": "header", "format": FORMAT, "version": VERSION, "fingerprint": ""},
        {"kind": "collection", "name": "user:u1"},
        {"kind": "record", "collection": "user:u1", "id": "a", "text": "likes tea"},
        {"kind": "end", "records": 1, "collections": 1, "tombstones": 0},
    ]
    dump.write_text("".join(json.dumps(line) + "\n" for line in lines))
    fresh = tmp_path / "fresh"
    done = libravdb(tmp_path, "import", "--data-dir", str(fresh), str(dump))
    assert done.returncode == 0, done.stderr
    assert f"a new store at {fresh}" in done.stderr
    again = libravdb(tmp_path, "import", "--data-dir", str(fresh), str(dump))
    assert again.returncode == 0 and "new store" not in again.stderr
