"""Faults: a read-only data directory, a full disk, corrupted SQLite pages, corrupted and
truncated index files, and a lock left by a killed daemon. Each scenario either recovers
(rebuilding derived indexes) or refuses to start with a message naming the file and the
fix, and no acknowledged write is lost. And what a forget leaves in the files, also
through a kill -9 right after it (forget_disk.py).

The read-only and disk-full scenarios mount a small tmpfs (they need root, as in CI);
without it they fall back to a read-only chmod, and a full disk is reported as skipped.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from scripts.stress.common import Client, Report, connected, write_config
from scripts.stress.forget_disk import forget_leaves_no_trace
from tests.support import REPO, daemon_env

V1 = "fault:v1"


def _seed(c: Client, n: int, tag: str) -> dict[str, str]:
    acked = {}
    for i in range(n):
        rid, text = f"{tag}-{i}", f"{tag} record {i} about lanterns and glaciers number {i}"
        c.result("insert_text", {"collection": V1, "id": rid, "text": text})
        acked[rid] = text
    return acked


def _seeded(tmp: Path, data: Path, config: Path, n: int, tag: str) -> dict[str, str]:
    """Start a daemon on ``data``, acknowledge ``n`` writes, stop it cleanly."""
    with connected(tmp, data, config) as (_, c):
        return _seed(c, n, tag)


def _lost_after_restart(tmp: Path, data: Path, config: Path, acked: dict[str, str]) -> int:
    """Start a daemon on ``data`` again: how many acknowledged writes it no longer has."""
    with connected(tmp, data, config) as (_, c):
        return len(_missing(c, acked))


def _chmod_tree(root: Path, dir_mode: int, file_mode: int) -> None:
    for p in [root, *root.rglob("*")]:
        p.chmod(dir_mode if p.is_dir() else file_mode)


def _last_line(text: str) -> str:
    return text.strip().splitlines()[-1] if text.strip() else ""


def _missing(c: Client, acked: dict[str, str]) -> list[str]:
    stored = {
        r["id"]: r["text"] for r in c.result("list_collection", {"collection": V1})["results"]
    }
    return [rid for rid, text in acked.items() if stored.get(rid) != text]


def _start_refused(tmp: Path, data: Path, config: Path) -> tuple[int, str]:
    """Start the daemon expecting it to refuse: (exit code, stderr)."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    try:
        proc = _run_daemon_to_exit(home, data, config)
    except subprocess.TimeoutExpired as exc:  # it is serving: not a refusal
        return 0, (exc.stderr or b"").decode(errors="replace")
    if proc.returncode == 0 or proc.stdout.strip():
        # it started after all (endpoint printed): not a refusal
        return 0, proc.stderr.decode(errors="replace")
    return proc.returncode, proc.stderr.decode(errors="replace")


def _run_daemon_to_exit(home: Path, data: Path, config: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sidecar",
            "serve",
            "--tcp",
            "127.0.0.1:0",
            "--data-dir",
            str(data),
            "--config",
            str(config),
        ],
        capture_output=True,
        timeout=60,
        env=daemon_env(home),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )


def _can_mount(point: Path) -> bool:
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    point.mkdir(parents=True, exist_ok=True)
    ok = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)], capture_output=True
        ).returncode
        == 0
    )
    if ok:
        subprocess.run(["umount", str(point)], check=True)
    return ok


def _mount(point: Path, size_mb: int, ro: bool = False) -> None:
    opts = f"size={size_mb}m" + (",ro" if ro else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(point)], check=True)


def _remount(point: Path, opts: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{opts}", str(point)], check=True)


def _read_only(tmp: Path, config: Path, mountable: bool, report: Report) -> str:
    data = tmp / "ro"
    data.mkdir()
    if mountable:
        _mount(data, 64)
    try:
        acked = _seeded(tmp, data, config, 40, "ro")
        if mountable:
            _remount(data, "ro")
        else:
            _chmod_tree(data, 0o500, 0o400)
        code, err = _start_refused(tmp, data, config)
        if code == 0:
            report.fail("read-only data dir: the daemon started; writes would fail later")
        elif str(data) not in err:
            report.fail(
                f"read-only data dir: the refusal does not name the directory: {err[-300:]}"
            )
        if mountable:
            _remount(data, "rw")
        else:
            _chmod_tree(data, 0o700, 0o600)
        lost = _lost_after_restart(tmp, data, config, acked)
        if lost:
            report.fail(f"read-only data dir: {lost} acknowledged writes lost")
        return f"refused (exit {code}): " + _last_line(err)[:160] if err.strip() else ""
    finally:
        if mountable:
            subprocess.run(["umount", str(data)], capture_output=True)


def _disk_full(tmp: Path, config: Path, mountable: bool, report: Report) -> str:
    if not mountable:
        return "skipped: needs root to mount a small tmpfs"
    data = tmp / "full"
    data.mkdir()
    _mount(data, 12)
    try:
        acked: dict[str, str] = {}
        refused = None
        with connected(tmp, data, config) as (d, c):
            big = " ".join(["lanterns glaciers"] * 400)
            for i in range(20_000):
                rid, text = f"full-{i}", f"full record {i} {big}"
                reply = c.call("insert_text", {"collection": V1, "id": rid, "text": text})
                if "error" in reply:
                    refused = reply["error"]
                    break
                acked[rid] = text
            if refused is None:
                report.fail("disk full: the disk never filled")
            elif refused.get("code") != -32005:
                report.fail(f"disk full: refused with {refused}, not -32005 storage error")
            health = c.call("health")
            if "result" not in health:
                report.fail(f"disk full: health failed: {health}")
            if _missing(c, acked):
                report.fail("disk full: acknowledged writes unreadable while full")
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait()
        _remount(data, "size=256m")
        with connected(tmp, data, config) as (_, c):
            lost = len(_missing(c, acked))
            after = c.call("insert_text", {"collection": V1, "id": "after", "text": "room again"})
        if lost:
            report.fail(f"disk full: {lost} of {len(acked)} acknowledged writes lost")
        if "error" in after:
            report.fail(f"disk full: writes still refused after space came back: {after}")
        msg = (refused or {}).get("message", "")[:120]
        return f"{len(acked)} writes acknowledged, then -32005 ({msg}); none lost after kill -9"
    finally:
        subprocess.run(["umount", str(data)], capture_output=True)


def _corrupt_sqlite(tmp: Path, config: Path, report: Report) -> str:
    data = tmp / "sq"
    _seeded(tmp, data, config, 60, "sq")
    db = data / "store.sqlite3"
    raw = bytearray(db.read_bytes())
    page = 4096
    rng = random.Random(len(raw))  # the same damage on every run
    for p in range(1, len(raw) // page, 2):  # 300 bytes inside every other page
        raw[p * page + 100 : p * page + 400] = rng.randbytes(300)
    db.write_bytes(bytes(raw))
    code, err = _start_refused(tmp, data, config)
    last = _last_line(err)
    if code == 0:
        report.fail("corrupt SQLite pages: the daemon started on a damaged store")
    elif code != 1 or "store.sqlite3" not in last:
        report.fail(f"corrupt SQLite pages: exit {code}, message does not name the file: {last}")
    return f"refused (exit {code}): {last[:200]}"


def _corrupt_index(tmp: Path, config: Path, report: Report) -> str:
    data = tmp / "ix"
    with connected(tmp, data, config) as (_, c):
        acked = _seed(c, 120, "ix")
        c.result("flush")
    files = sorted(p for p in (data / "index").rglob("*") if p.is_file())
    if not files:
        report.fail("corrupt index: no index files were written")
        return "no index files"
    outcomes = []
    sample = list(acked)[::10]
    for damage in ("garbage", "truncate", "empty"):
        for f in files:
            if damage == "garbage":
                f.write_bytes(os.urandom(max(64, f.stat().st_size)))
            elif damage == "truncate":
                f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
            else:
                f.write_bytes(b"")
        with connected(tmp, data, config) as (_, c):
            lost = len(_missing(c, acked))
            found = 0
            for rid in sample:
                hits = c.result("search_text", {"collection": V1, "text": acked[rid], "k": 1})
                found += bool(hits["results"]) and hits["results"][0]["id"] == rid
            c.result("flush")
        if lost:
            report.fail(f"corrupt index ({damage}): {lost} acknowledged writes lost")
        if found != len(sample):
            report.fail(f"corrupt index ({damage}): {found} of {len(sample)} found first")
        outcomes.append(f"{damage}: rebuilt, {found}/{len(sample)} found first")
        files = sorted(p for p in (data / "index").rglob("*") if p.is_file())
    return "; ".join(outcomes)


def _stale_lock(tmp: Path, config: Path, report: Report) -> str:
    data = tmp / "lk"
    with connected(tmp, data, config) as (d, c):
        acked = _seed(c, 20, "lk")
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
    (data / "LOCK").write_text("999999\n")  # a pid that is not running
    lost = _lost_after_restart(tmp, data, config, acked)
    if lost:
        report.fail(f"stale lock: {lost} acknowledged writes lost")
    return "started (the flock died with its process; the pid in LOCK is only a hint)"


def run_faults(tmp: Path) -> Report:
    report = Report("faults")
    config = write_config(tmp)
    mountable = _can_mount(tmp / "probe-mount")
    scenarios: list[tuple[str, Callable[[], str]]] = [
        ("read-only data directory", lambda: _read_only(tmp, config, mountable, report)),
        ("disk full", lambda: _disk_full(tmp, config, mountable, report)),
        ("corrupted SQLite pages", lambda: _corrupt_sqlite(tmp, config, report)),
        ("corrupted or truncated index files", lambda: _corrupt_index(tmp, config, report)),
        ("stale lock from a killed daemon", lambda: _stale_lock(tmp, config, report)),
        ("forgotten text leaves the disk", lambda: forget_leaves_no_trace(tmp, report)),
    ]
    for name, run in scenarios:
        try:
            report.figures[name] = run()
        except Exception as exc:
            report.fail(f"{name}: {exc!r}")
            report.figures[name] = f"failed: {exc!r}"[:200]
    return report
