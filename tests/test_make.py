"""The Makefile's promises to a new user and to CI, run with the real `make`:

* `make run` on a fresh clone prints one line, the endpoint (README § Set up); the
  install it runs first is silent. The installers are stood in for by `true` (an install
  is minutes of downloads), everything else is the real recipe and the real daemon.
* `make test` runs the TypeScript suite even when pytest fails, and fails when either
  failed (the suites are stood in for by `true`/`false`, in a copy of the Makefile).
* The packages declare their license the way setuptools no longer warns about.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import tomllib
from pathlib import Path

import pytest
from libravdb_client import Client

from tests.support import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make here")


def _make_env(home: Path) -> dict[str, str]:
    """The environment of a user's shell: none of an enclosing `make test`'s variables
    (they would add `make[2]: Entering directory` lines), no LIBRAVDB_* settings."""
    inherited = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("LIBRAVDB_") and k not in inherited
    }
    env["HOME"] = str(home)
    return env


def test_make_run_on_a_fresh_clone_prints_only_the_endpoint(tmp_path: Path) -> None:
    # a short HOME: the default socket path must fit a Unix socket address
    with tempfile.TemporaryDirectory(prefix="mk", dir="/tmp") as home:
        fresh = [
            f"STAMP={tmp_path / 'venv.installed'}",  # absent: the install recipes run
            f"TS_STAMP={tmp_path / 'ts.installed'}",
            f"INSTALL_LOG={tmp_path / 'install.log'}",
            f"NPM_LOG={tmp_path / 'npm-install.log'}",
            "PIP=true",
            "NPM=true",
        ]
        make = subprocess.Popen(
            ["make", "run", *fresh],
            cwd=REPO,
            env=_make_env(Path(home)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert make.stdout is not None
            first = make.stdout.readline()
            endpoint = f"unix:{home}/.clawdb/run/libravdb.sock"
            assert first == endpoint + "\n"
            with Client(endpoint, timeout=60) as client:
                client.call("shutdown", {})
            rest, _ = make.communicate(timeout=60)
        finally:
            if make.poll() is None:
                make.kill()
                make.wait()
    assert rest == ""
    assert make.returncode == 0
    assert (tmp_path / "venv.installed").exists() and (tmp_path / "ts.installed").exists()


@pytest.fixture
def make_copy(tmp_path: Path) -> Path:
    """The Makefile with the files its targets depend on, installed (stamps newer than
    their sources), and a `python` whose `-m coverage report` fails (the floor missed)
    while every other call passes."""
    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    for name in (
        "pyproject.toml",
        "host_clients/python/pyproject.toml",
        "host_clients/typescript/package.json",
        "host_clients/typescript/package-lock.json",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
        os.utime(tmp_path / name, (1e9, 1e9))  # older than the stamps: nothing to install
    for stamp in (".venv/.installed", "host_clients/typescript/node_modules/.installed"):
        (tmp_path / stamp).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / stamp).write_text("")
    floor = tmp_path / "under-the-floor"
    floor.write_text('#!/bin/sh\n[ "$*" = "-m coverage report" ] && exit 2\nexit 0\n')
    floor.chmod(0o755)
    return tmp_path


def _make_test(where: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "test", *overrides],
        cwd=where,
        env=_make_env(where),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_make_test_runs_both_suites_and_fails_when_either_fails(make_copy: Path) -> None:
    ts_ran = "ran node --test"
    pytest_fails = _make_test(make_copy, "PY=false", f"NPM=echo {ts_ran}")
    assert ts_ran in pytest_fails.stdout  # the TypeScript suite ran after pytest failed
    assert "make test: pytest and the coverage floor FAILED; node --test passed" in (
        pytest_fails.stdout
    )
    assert pytest_fails.returncode != 0
    ts_fails = _make_test(make_copy, "PY=true", "NPM=false")
    assert "make test: pytest and the coverage floor passed; node --test FAILED" in (
        ts_fails.stdout
    )
    assert ts_fails.returncode != 0
    floor = _make_test(make_copy, f"PY={make_copy / 'under-the-floor'}", f"NPM=echo {ts_ran}")
    assert ts_ran in floor.stdout
    assert "make test: pytest and the coverage floor FAILED; node --test passed" in floor.stdout
    assert floor.returncode != 0
    both_pass = _make_test(make_copy, "PY=true", f"NPM=echo {ts_ran}")
    assert "make test: pytest and the coverage floor passed; node --test passed" in (
        both_pass.stdout
    )
    assert both_pass.returncode == 0, both_pass.stdout + both_pass.stderr


@pytest.mark.parametrize("pyproject", ["pyproject.toml", "host_clients/python/pyproject.toml"])
def test_license_is_an_spdx_expression(pyproject: str) -> None:
    """A license table (`{ text = "MIT" }`) makes setuptools warn on every install; the
    SPDX string and license-files need setuptools 77."""
    path = REPO / pyproject
    data = tomllib.loads(path.read_text())
    assert data["project"]["license"] == "MIT"
    files = data["project"]["license-files"]
    assert files and all((path.parent / f).is_file() for f in files)
    assert "setuptools>=77" in data["build-system"]["requires"]
