"""One version everywhere: the daemon's package takes it from ``sidecar.__version__``
(pyproject ``dynamic``), and the clients and the OpenClaw plugin ship the same number."""

from __future__ import annotations

import json
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

from libravdb_client import __version__ as client_version

import sidecar

REPO = Path(__file__).resolve().parent.parent
TS = REPO / "host_clients" / "typescript"


def test_the_daemon_package_reads_its_version_from_the_code() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "sidecar.__version__"}
    assert version("libravdb-sidecar") == sidecar.__version__


def test_clients_and_plugin_ship_the_same_version() -> None:
    v = sidecar.__version__
    assert client_version == v
    assert version("libravdb-client") == v
    assert json.loads((TS / "package.json").read_text())["version"] == v
    assert json.loads((TS / "openclaw.plugin.json").read_text())["version"] == v
    for path, name in (
        (TS / "src" / "plugin" / "engine.ts", "ENGINE_VERSION"),
        (TS / "src" / "client" / "client.ts", "CLIENT_VERSION"),
    ):
        found = re.search(rf'export const {name} = "([^"]+)"', path.read_text())
        assert found is not None and found.group(1) == v, (path, name)


def test_every_package_carries_the_license() -> None:
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License")
    for where in (REPO / "host_clients" / "python", TS):
        assert (where / "LICENSE").read_text() == text
    assert json.loads((TS / "package.json").read_text())["license"] == "MIT"


def test_pre_commit_runs_the_lint_gates() -> None:
    config = (REPO / ".pre-commit-config.yaml").read_text()
    makefile = (REPO / "Makefile").read_text()
    for hook, command in (
        ("ruff", "ruff check"),
        ("ruff-format", "ruff format"),
        ("mypy", "mypy --strict sidecar protocol host_clients/python/libravdb_client scripts"),
        ("typescript", "node scripts/gen-types.mjs --check && npx tsc -p tsconfig.json --noEmit"),
    ):
        assert f"- id: {hook}\n" in config, hook
        assert command in config and command in makefile, command
