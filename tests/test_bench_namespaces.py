"""``scripts/bench_namespaces.py`` (part of ``make bench-scale``) end to end at a tiny size:
a real seeded store, the real daemon, the three phases and the cache's counters."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts import bench_namespaces as BN


def test_many_namespaces_benchmark_runs_and_reuses_its_store(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    argv = ["--namespaces", "4", "--memories", "30", "--cold", "3", "--warm", "2"]
    argv += ["--random", "2", "--max-bytes", "400000", "--data", str(tmp_path), "--no-write"]
    assert BN.main(argv) == 0
    out = capfd.readouterr().out
    assert "== seeding 4 namespaces x 30 memories" in out
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    assert {"cold", "warm", "random"} <= set(rows)
    cold = rows["cold"].split("|")
    assert cold[2].strip() == "3"
    loads, _hits = (int(x.replace(",", "")) for x in cold[3].split("/"))
    assert loads >= 3  # every cold call read its namespace's views
    assert "4 namespaces x 30 memories (360" in out  # 3 records a memory, + the live turns
    assert "within" in out or "OVER" in out
    # the seeded store is kept and reused with the same sizes
    assert BN.main(argv) == 0
    assert "reusing the store seeded" in capfd.readouterr().out


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(SystemExit):
        BN.main(["--namespaces", "0", "--no-write"])
