"""The checked-in JSON Schema matches the protocol package."""

from __future__ import annotations

import json
import subprocess
import sys

from protocol.catalog import all_methods
from tests.support import REPO


def test_schema_is_up_to_date() -> None:
    proc = subprocess.run(
        [sys.executable, "scripts/export_schema.py", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def test_schema_covers_every_method() -> None:
    schema = json.loads((REPO / "protocol" / "schema" / "libravdb.schema.json").read_text())
    assert set(schema["methods"]) == set(all_methods())
    for name, entry in schema["methods"].items():
        ref = entry["result"]["$ref"].removeprefix("#/$defs/")
        assert ref in schema["$defs"], name


def test_every_registered_handler_has_a_schema_and_vice_versa() -> None:
    from sidecar.api import build_registry

    assert set(build_registry().names()) == set(all_methods())
