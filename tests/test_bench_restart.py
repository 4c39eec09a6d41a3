"""``scripts/bench_restart.py`` end to end at a tiny size: a real seeded store, its first
start, then a restart of the real daemon measured (the endpoint, the first assemble, the
warm calls), and the store kept for the next run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from scripts import bench_restart as BR


def test_restarts_are_measured_on_a_kept_store(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "store"
    argv = ["--data", str(data), "--seed", "200", "--rounds", "1", "--calls", "2"]
    assert BR.main(argv) == 0
    out = capfd.readouterr().out
    assert "== seeding 200 memories" in out and "== the first start" in out
    rows = [line for line in out.splitlines() if line.startswith("| this tree |")]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].split("|")[1:-1]]
    assert float(cells[1].removesuffix(" s")) > 0  # the endpoint came after a real start
    assert cells[5].endswith("x")  # assemble over embed, both measured
    # the store is kept: a second run restarts on it without seeding, beside the code
    # of HEAD on its own copy of the store
    copy = tmp_path / "copy"
    shutil.copytree(data, copy)
    argv = ["--data", str(data), "--baseline", "HEAD", "--baseline-data", str(copy)]
    assert BR.main([*argv, "--rounds", "1", "--calls", "1"]) == 0
    out = capfd.readouterr().out
    assert "== seeding" not in out
    codes = [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")]
    assert codes == ["code", "this tree", "HEAD"]


def test_a_missing_store_without_a_seed_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        BR.main(["--data", str(tmp_path / "none")])
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "store.sqlite3").touch()
    with pytest.raises(SystemExit):  # a baseline's copy that holds no store
        BR.main(["--data", str(tmp_path / "store"), "--baseline-data", str(tmp_path / "x")])
