"""`libravdb doctor` against real stores, a real daemon and the real models: a healthy
installation passes; each problem, made for real, fails its own line with a fix."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import hnswlib
import pytest

from sidecar.ops.doctor_files import LOW_FREE_BYTES, LOW_FREE_FRACTION
from tests.support import REPO, RawConnection, daemon_env, start_daemon

pytestmark = pytest.mark.sqlite_only(
    "doctor's SQLite file, lock and index checks (PostgreSQL's: tests/multi_daemon)"
)

# Small collections get a saved HNSW graph too, so the index checks have files to read.
CONFIG = "[store]\nexact_threshold = 8\ncheckpoint_idle_s = 0.2\n"
RECORDS = 30
TINY_T5 = REPO / "tests" / "fixtures" / "tiny_t5"
TOOL = [sys.executable, "-c", "from sidecar.cli import tool_main; raise SystemExit(tool_main())"]


def doctor(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TOOL, "doctor", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=daemon_env(home),
        timeout=300,
    )


def findings(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    report = json.loads(done.stdout)
    assert report["ok"] is (done.returncode == 0)
    return {c["name"]: c for c in report["checks"]}


@pytest.fixture(scope="module")
def built_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stopped daemon's data directory holding one collection with a saved graph."""
    tmp = tmp_path_factory.mktemp("built")
    (tmp / "conf.toml").write_text(CONFIG)
    daemon = start_daemon(tmp, extra_args=("--config", str(tmp / "conf.toml")))
    try:
        with RawConnection(daemon.endpoint) as conn:
            for i in range(RECORDS):
                conn.result(
                    "insert_text",
                    {"collection": "user:u1", "id": f"r{i}", "text": f"fact {i} about cats"},
                )
        deadline = time.monotonic() + 30
        while not list((tmp / "data" / "index").glob("*.hnsw")):
            assert time.monotonic() < deadline, "no graph saved"
            time.sleep(0.1)
    finally:
        assert daemon.stop() == 0
    return tmp


@pytest.fixture
def site(built_store: Path, tmp_path: Path) -> Path:
    """A private copy of the built store: tmp_path/data, tmp_path/conf.toml, tmp_path/home."""
    shutil.copytree(built_store / "data", tmp_path / "data")
    shutil.copy(built_store / "conf.toml", tmp_path / "conf.toml")
    (tmp_path / "home").mkdir()
    return tmp_path


def args(site: Path, *more: str) -> tuple[str, ...]:
    return ("--data-dir", str(site / "data"), "--config", str(site / "conf.toml"), *more)


def _disk_is_low(path: Path) -> bool:
    usage = shutil.disk_usage(path)
    return usage.free < LOW_FREE_BYTES or usage.free / usage.total < LOW_FREE_FRACTION


def test_healthy_installation_with_a_running_daemon(site: Path) -> None:
    daemon = start_daemon(site, extra_args=args(site))
    try:
        text = doctor(site / "home", *args(site))
        report = doctor(site / "home", *args(site), "--json")
    finally:
        assert daemon.stop() == 0
    assert text.returncode == 0, text.stdout + text.stderr
    lines = text.stdout.splitlines()
    assert all(line.startswith("ok ") for line in lines), text.stdout
    checks = findings(report)
    names = list(checks)
    assert names == [
        "config",
        "embedder",
        "summarizer",
        "backend",
        "data dir",
        "lock",
        "socket",
        "fingerprint",
        "disk",
        "indexes",
    ]
    for name, check in checks.items():
        expected = "warn" if name == "disk" and _disk_is_low(site / "data") else "ok"
        assert check["status"] == expected, check
    assert f"held by pid {daemon.proc.pid}" in checks["lock"]["detail"]
    assert "answers health: ok" in checks["socket"]["detail"]
    assert "embedded a test string" in checks["embedder"]["detail"]
    assert "store and settings agree: all-minilm-l6-v2" in checks["fingerprint"]["detail"]
    assert f"user:u1 tier 384: {RECORDS} in the graph" in checks["indexes"]["detail"]


def test_socket_of_a_daemon_serving_another_data_dir_fails(site: Path) -> None:
    """`doctor --data-dir ~/typo-data` beside a daemon serving ~/.clawdb/data: that daemon's
    health says nothing about the directory asked for. The same directory reached through
    a symbolic link is the same directory."""
    typo = site / "typo-data"
    link = site / "data-link"
    link.symlink_to(site / "data")
    daemon = start_daemon(site, extra_args=args(site))
    try:
        conf = ("--config", str(site / "conf.toml"), "--json")
        mistyped = findings(doctor(site / "home", "--data-dir", str(typo), *conf))["socket"]
        linked = findings(doctor(site / "home", "--data-dir", str(link), *conf))["socket"]
    finally:
        assert daemon.stop() == 0
    assert mistyped["status"] == "FAIL"
    assert mistyped["detail"] == (
        f"{daemon.endpoint} answers health, but that daemon serves {site / 'data'}, not "
        f"{typo}: its health says nothing about {typo}"
    )
    assert mistyped["fix"].startswith(
        f"check the daemon that runs: libravdb doctor --data-dir {site / 'data'};"
    )
    assert (
        f"libravdbd serve --data-dir {typo} --config {site / 'conf.toml'} --socket PATH"
        in (mistyped["fix"])
    )
    assert linked["status"] == "ok" and "answers health: ok" in linked["detail"]


def test_world_readable_data_dir(site: Path) -> None:
    os.chmod(site / "data", 0o755)
    done = doctor(site / "home", *args(site))
    assert done.returncode == 1
    assert f"FAIL  data dir     other users can read {site / 'data'} (mode 0755)" in done.stdout
    assert f"fix: chmod -R go-rwx {site / 'data'}" in done.stdout


def test_world_readable_store_file(site: Path) -> None:
    os.chmod(site / "data" / "store.sqlite3", 0o644)
    check = findings(doctor(site / "home", *args(site), "--json"))["data dir"]
    assert check["status"] == "FAIL"
    assert f"{site / 'data' / 'store.sqlite3'} (mode 0644)" in check["detail"]


def test_stale_lock_from_a_dead_pid(site: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    (site / "data" / "LOCK").write_text(f"{gone.pid}\n")
    done = doctor(site / "home", *args(site), "--json")
    assert done.returncode == 1
    check = findings(done)["lock"]
    assert check["status"] == "FAIL"
    assert f"stale: LOCK names pid {gone.pid}" in check["detail"]
    assert check["fix"].startswith(f"rm {site / 'data' / 'LOCK'}")


def test_fingerprint_recorded_by_another_model(site: Path) -> None:
    with sqlite3.connect(site / "data" / "store.sqlite3") as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'fingerprint'", ("ab" * 32,))
        conn.execute("UPDATE meta SET value = 'other-model' WHERE key = 'model'")
    done = doctor(site / "home", *args(site), "--json")
    assert done.returncode == 1
    check = findings(done)["fingerprint"]
    assert check["status"] == "FAIL"
    assert "written by other-model (fingerprint abababababab)" in check["detail"]
    assert "select all-minilm-l6-v2" in check["detail"]
    assert check["fix"].startswith(
        f"libravdb reembed --data-dir {site / 'data'} --config {site / 'conf.toml'}"
    )
    # the daemon agrees: it refuses the store, naming the same command
    daemon = start_daemon(site, extra_args=args(site), wait=False)
    assert daemon.proc.wait(60) == 1
    assert "libravdb reembed" in daemon.stderr_text()


def test_unreachable_socket(site: Path) -> None:
    endpoint = f"unix:{site / 'nobody.sock'}"
    done = doctor(site / "home", *args(site, "--endpoint", endpoint))
    assert done.returncode == 1
    assert f"FAIL  socket       {endpoint} not reachable" in done.stdout
    assert f"fix: start the daemon: libravdbd serve --data-dir {site / 'data'} --config" in (
        done.stdout
    )


def _rewrite_graph(meta_path: Path, keep: int) -> None:
    """Replace the saved graph by a valid one holding only ``keep`` of its labels, with
    metadata (size, checksum) that matches the new file: only SQLite can tell."""
    meta = json.loads(meta_path.read_text())
    graph_path = meta_path.with_suffix(".hnsw")
    old = hnswlib.Index(space="ip", dim=meta["ann_dims"])
    old.load_index(str(graph_path))
    labels = sorted(old.get_ids_list())[:keep]
    new = hnswlib.Index(space="ip", dim=meta["ann_dims"])
    new.init_index(max_elements=1024, M=meta["m"], ef_construction=meta["ef_construction"])
    new.add_items(old.get_items(labels), labels)
    new.save_index(str(graph_path))
    data = graph_path.read_bytes()
    meta.update(size=len(data), crc32=zlib.crc32(data), elements=keep, live=keep)
    meta_path.write_text(json.dumps(meta))


def test_index_that_disagrees_with_sqlite(site: Path) -> None:
    meta_path = site / "data" / "index" / "c1-d384.json"
    _rewrite_graph(meta_path, keep=RECORDS - 7)
    done = doctor(site / "home", *args(site))
    assert done.returncode == 1
    assert (
        f"FAIL  index c1-d384  user:u1: the graph lacks 7 of the {RECORDS} records SQLite holds"
    ) in done.stdout
    assert f"fix: rm {meta_path} {meta_path.with_suffix('.hnsw')}" in done.stdout


def test_damaged_index_file(site: Path) -> None:
    graph = site / "data" / "index" / "c1-d384.hnsw"
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF
    graph.write_bytes(bytes(data))
    check = findings(doctor(site / "home", *args(site), "--json"))["index c1-d384"]
    assert check["status"] == "FAIL"
    assert check["detail"] == "graph file checksum mismatch (damaged)"


def test_missing_embedding_model_path(site: Path) -> None:
    missing = site / "no such model"
    (site / "conf.toml").write_text(CONFIG + f'[embedding]\nmodel = "{missing}"\n')
    done = doctor(site / "home", *args(site), "--json")
    assert done.returncode == 1
    check = findings(done)["embedder"]
    assert check["status"] == "FAIL"
    assert str(missing) in check["detail"]
    assert check["fix"].startswith(f"point embedding.model in {site / 'conf.toml'}")


def test_missing_summarizer_model_path(site: Path) -> None:
    missing = site / "no t5"
    (site / "conf.toml").write_text(CONFIG + f'[summarizer]\nmodel = "{missing}"\n')
    done = doctor(site / "home", *args(site), "--json")
    assert done.returncode == 1
    check = findings(done)["summarizer"]
    assert check["status"] == "FAIL"
    assert "the configured seq2seq model is unavailable" in check["detail"]
    assert "summarizer.model" in check["fix"]


def test_configured_seq2seq_summarizer_loads(site: Path) -> None:
    (site / "conf.toml").write_text(CONFIG + f'[summarizer]\nmodel = "{TINY_T5}"\n')
    check = findings(doctor(site / "home", *args(site), "--json"))["summarizer"]
    assert check["status"] == "ok", check
    assert "(seq2seq) loaded in" in check["detail"]


def test_missing_config_file(tmp_path: Path) -> None:
    done = doctor(tmp_path, "--config", str(tmp_path / "nope.toml"))
    assert done.returncode == 1
    assert done.stdout.startswith(f"FAIL  config  config file not found: {tmp_path / 'nope.toml'}")


def test_daemon_killed_with_sigkill_leaves_a_stale_lock(site: Path) -> None:
    daemon = start_daemon(site, extra_args=args(site))
    with RawConnection(daemon.endpoint) as conn:
        conn.result("insert_text", {"collection": "user:u1", "id": "late", "text": "dogs too"})
    daemon.proc.kill()
    daemon.proc.wait()
    assert (site / "data" / "store.sqlite3-wal").exists()  # read back read-only below
    done = doctor(site / "home", *args(site), "--json")
    assert done.returncode == 1
    checks = findings(done)
    assert checks["lock"]["status"] == "FAIL"
    assert (
        f"stale: LOCK names pid {daemon.proc.pid} (no longer running)" in (checks["lock"]["detail"])
    )
    assert checks["fingerprint"]["status"] == "ok"
    assert checks["indexes"]["status"] == "ok"
    assert "in the graph + 1 newer rows" in checks["indexes"]["detail"]


def test_index_file_of_no_collection(site: Path) -> None:
    index = site / "data" / "index"
    for suffix in (".json", ".hnsw"):
        shutil.copy(index / f"c1-d384{suffix}", index / f"c9-d384{suffix}")
    check = findings(doctor(site / "home", *args(site), "--json"))["index c9-d384"]
    assert check["status"] == "FAIL"
    assert check["detail"] == "belongs to no vector collection of the store (cid 9)"
    assert check["fix"].startswith(f"rm {index / 'c9-d384.json'} {index / 'c9-d384.hnsw'}")


def test_socket_check_authenticates_as_the_config_says(site: Path) -> None:
    token = site / "token"
    token.write_text("s3cret-token-of-enough-length\n")
    token.chmod(0o600)
    (site / "conf.toml").write_text(CONFIG + f'[server]\nauth_token_file = "{token}"\n')
    daemon = start_daemon(site, extra_args=args(site))
    try:
        with_token = findings(doctor(site / "home", *args(site), "--json"))["socket"]
        plain = site / "plain.toml"
        plain.write_text(CONFIG)
        without = findings(
            doctor(
                site / "home", "--data-dir", str(site / "data"), "--config", str(plain), "--json"
            )
        )["socket"]
    finally:
        assert daemon.stop() == 0
    assert with_token["status"] == "ok", with_token
    assert without["status"] == "FAIL"
    assert f"{daemon.endpoint} refused:" in without["detail"]
    assert "--config" in without["fix"]


def test_stdio_transport_has_no_socket_to_check(site: Path) -> None:
    (site / "conf.toml").write_text(CONFIG + '[server]\ntransport = "stdio"\n')
    check = findings(doctor(site / "home", *args(site), "--json"))["socket"]
    assert check == {
        "name": "socket",
        "status": "ok",
        "detail": "stdio transport: the host starts the daemon, no socket to check",
        "fix": "",
    }


def test_a_directory_no_daemon_has_used_yet(site: Path) -> None:
    fresh = site / "fresh"
    done = doctor(
        site / "home", "--data-dir", str(fresh), "--config", str(site / "conf.toml"), "--json"
    )
    checks = findings(done)
    assert checks["data dir"]["status"] == "warn"
    assert checks["fingerprint"]["detail"] == (
        f"no store in {fresh} yet: the first start records the model's fingerprint"
    )
    assert checks["indexes"]["status"] == "ok"
