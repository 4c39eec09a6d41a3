"""The crash smoke's promise does not depend on timing: each kill waits for the round's
first acknowledged writes, so even a kill with no pause at all after them has writes to
check (a fixed pause let a loaded machine kill the daemon before its first write, and
the smoke then failed with `0 acknowledged ingest turns`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.stress.crash import run_crash

pytestmark = pytest.mark.sqlite_only("the crash part checks SQLite's files and indexes")


def test_a_kill_with_no_pause_still_follows_acknowledged_writes(tmp_path: Path) -> None:
    report = run_crash(tmp_path, kills=2, seed=5, pause_s=(0.0, 0.0))
    assert report.ok, report.failures
    assert report.figures["acknowledged insert_text"] > 0
    assert report.figures["acknowledged ingest turns"] > 0
    assert report.figures["index self-searches checked"] > 0
