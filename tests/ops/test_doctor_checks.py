"""The doctor's file checks in-process, against real files, a real flock and the real file
system: thresholds, lock holders, and a pid that lives on but no longer holds the lock."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from sidecar.ops.doctor_files import PROC_LOCKS, check_disk, check_lock, flock_holders
from sidecar.ops.doctor_result import format_lines
from sidecar.store.lock import DirLock


def test_disk_warns_below_the_thresholds(tmp_path: Path) -> None:
    total = shutil.disk_usage(tmp_path).total
    low = check_disk(tmp_path / "not yet" / "created", min_free=total + 1)
    assert low.status == "warn"
    assert low.detail.startswith("low: ") and f"at {tmp_path}" in low.detail
    assert check_disk(tmp_path, min_free=0, min_fraction=1.01).status == "warn"
    assert check_disk(tmp_path, min_free=0, min_fraction=0.0).status == "ok"


@pytest.mark.skipif(not PROC_LOCKS.exists(), reason="no /proc/locks (not Linux)")
def test_flock_holders_names_the_process_holding_the_store_lock(tmp_path: Path) -> None:
    with DirLock(tmp_path):
        assert flock_holders(tmp_path / "LOCK") == {os.getpid()}
        held = check_lock(tmp_path)
        assert (
            held.status == "ok" and held.detail == f"held by pid {os.getpid()} (a running daemon)"
        )
    assert flock_holders(tmp_path / "LOCK") == set()
    released = check_lock(tmp_path)
    assert released.status == "ok" and "stopped cleanly" in released.detail


@pytest.mark.skipif(not PROC_LOCKS.exists(), reason="no /proc/locks (not Linux)")
def test_a_live_pid_that_does_not_hold_the_lock_is_stale(tmp_path: Path) -> None:
    # e.g. the daemon was killed and its pid reused: alive, but no flock on LOCK
    (tmp_path / "LOCK").write_text(f"{os.getpid()}\n")
    check = check_lock(tmp_path)
    assert check.status == "FAIL"
    assert f"LOCK names pid {os.getpid()} (a different process now)" in check.detail
    assert "rm " in check.fix


def test_format_lines_prints_fixes_under_failures_only() -> None:
    from sidecar.ops.doctor_result import fail, ok, warn

    text = format_lines([ok("a", "fine"), warn("bb", "hm", "do x"), fail("c", "bad", "run y")])
    assert text.splitlines() == [
        "ok    a   fine",
        "warn  bb  hm",
        "          fix: do x",
        "FAIL  c   bad",
        "          fix: run y",
    ]
