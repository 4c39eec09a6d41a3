"""`libravdb memory list|get|update|forget`, run as real processes against a real daemon."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator

import pytest
from libravdb_client import Client
from libravdb_client.testing import DaemonProcess

from tests.test_console import run

pytestmark = pytest.mark.sqlite_only("the console's interface over RPCs tested on both backends")

FACTS = [
    ("n1", "My bike is a green Brompton."),
    ("n2", "I'm allergic to peanuts, so never suggest recipes with peanuts."),
    ("n3", "My landlord is called Mr Okafor."),
]


MemoryCli = Callable[..., tuple[int, str, str]]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    base = tmp_path_factory.mktemp("memcli")
    with DaemonProcess.start("tcp", data_dir=base / "data", home=base / "home") as running:
        with Client(running.endpoint, timeout=60) as c:
            msgs = [
                {"id": i, "role": "user", "content": t, "ts": 1_700_000_000_000 + n * 60_000}
                for n, (i, t) in enumerate(FACTS)
            ]
            c.ingest("cli-1", msgs, user_id="nia")
        yield running


@pytest.fixture
def memory(daemon: DaemonProcess, env: dict[str, str]) -> MemoryCli:
    def call(*args: str) -> tuple[int, str, str]:
        done = run(["memory", *args, "--endpoint", daemon.endpoint], env)
        return done.returncode, done.stdout, done.stderr

    return call


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LIBRAVDB_")}
    return {**clean, "HOME": str(tmp_path_factory.mktemp("home")), "NO_COLOR": "1"}


def test_list_shows_a_table_newest_first(memory: MemoryCli) -> None:
    code, out, err = memory("list", "--user", "nia", "--scope", "history")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["when", "(UTC)", "collection"]
    assert "Mr Okafor" in lines[1] and "Brompton" in lines[3]
    assert "2023-11-14" in lines[1]  # the turn's own time, not the ingest time
    assert lines[-1] == "3 record(s) in history"
    code, out, _ = memory("list", "--user", "nia", "--scope", "history", "--limit", "1")
    assert out.splitlines()[-1] == "3 record(s) in history (first 1; --all for every page)"
    code, out, _ = memory(
        "list", "--user", "nia", "--scope", "history", "--limit", "1", "--all", "--json"
    )
    assert [r["id"] for r in json.loads(out)["records"]] == ["cli-1:n3", "cli-1:n2", "cli-1:n1"]


def test_get_and_update(memory: MemoryCli) -> None:
    code, out, err = memory("get", "--user", "nia", "turns:nia", "cli-1:n1")
    assert code == 0, err
    assert out.splitlines()[0] == "turns:nia/cli-1:n1" and "green Brompton" in out
    code, out, err = memory(
        "update", "--user", "nia", "turns:nia", "cli-1:n1", "My bike is a red Brompton."
    )
    assert code == 0, err
    assert out.startswith("updated user:nia/cli-1:n1 (revision")
    code, out, _ = memory("list", "--user", "nia", "--json")
    assert "My bike is a red Brompton." in [r["text"] for r in json.loads(out)["records"]]
    code, _, err = memory("update", "--user", "nia", "session_raw:cli-1", "n1", "x")
    assert code == 1 and "durable facts" in err


def test_forget_dry_run_then_for_real(memory: MemoryCli) -> None:
    code, out, err = memory("forget", "--user", "nia", "--query", "peanut allergy", "--dry-run")
    assert code == 0, err
    assert out.startswith("would forget n2 (session cli-1,") and "peanuts" in out
    code, out, err = memory("forget", "--user", "nia", "--message", "n2", "--message", "zz")
    assert code == 0, err
    assert out.startswith("forgot n2") and "not found: zz" in out
    code, out, _ = memory("list", "--user", "nia", "--scope", "history", "--json")
    assert not [r for r in json.loads(out)["records"] if "peanut" in r["text"]]
    code, _, err = memory("forget", "--user", "nia")
    assert code == 2 and "--message, --record or --query" in err
    code, _, err = memory("forget", "--user", "nia", "--record", "no-slash")
    assert code == 2 and "COLLECTION/ID" in err
