"""Each `make stress` part at smoke size against the real daemon: the same code and the
same promises, fewer frames, kills and seconds (the full runs are in docs/benchmarks.md
§ reliability)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.stress.crash import run_crash
from scripts.stress.faults import run_faults
from scripts.stress.fuzz import run_fuzz
from scripts.stress.pg_kill import run_pg_kill
from scripts.stress.soak import run_soak

SQLITE = pytest.mark.sqlite_only(
    "the stress parts' smoke runs: faults and crash checks are SQLite's files and indexes"
)


@SQLITE
def test_fuzz_smoke(tmp_path: Path) -> None:
    report = run_fuzz(tmp_path, frames=400, seed=11)
    assert report.ok, report.failures
    assert report.figures["internal errors"] == 0
    assert report.figures["dropped connections"] == 0
    assert sum(report.figures["kinds"].values()) == 400
    assert report.figures["kinds"]["timestamps"] > 0


@SQLITE
def test_crash_smoke(tmp_path: Path) -> None:
    report = run_crash(tmp_path, kills=3, seed=5)
    assert report.ok, report.failures
    assert report.figures["acknowledged insert_text"] > 0
    assert report.figures["acknowledged ingest turns"] > 0
    assert report.figures["index self-searches checked"] > 0


@SQLITE
def test_soak_smoke(tmp_path: Path) -> None:
    report = run_soak(tmp_path, clients=4, seconds=8, sample_s=1)
    assert report.figures["errors"] == 0, report.failures
    assert report.figures["requests"] > 50


@SQLITE
def test_faults_smoke(tmp_path: Path) -> None:
    report = run_faults(tmp_path)
    assert report.ok, report.failures
    assert set(report.figures) == {
        "read-only data directory",
        "disk full",
        "corrupted SQLite pages",
        "corrupted or truncated index files",
        "stale lock from a killed daemon",
        "forgotten text leaves the disk",
    }


def test_pg_kill_smoke(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Two daemons on one PostgreSQL database (a server of its own), one killed twice."""
    if request.config.getoption("--backend") == "sqlite":
        pytest.skip("PostgreSQL is not selected (--backend sqlite)")
    report = run_pg_kill(tmp_path, kills=2, seed=3)
    assert report.ok, report.failures
    assert report.figures["survivor errors"] == 0
    assert report.figures["survivor ingests"] > 0
    assert report.figures["acknowledged turns"] > 0
