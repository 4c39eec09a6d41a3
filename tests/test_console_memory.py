"""`libravdb memory list|get|update|forget`, run as real processes against a real daemon."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator

import pytest
from libravdb_client import Client
from libravdb_client.testing import DaemonProcess

from sidecar.ops.cli_terms import epoch_ms, in_flag_terms
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


def _history_ids(memory: MemoryCli, *args: str) -> list[str]:
    code, out, err = memory("list", "--user", "nia", "--scope", "history", "--json", *args)
    assert code == 0, err
    return [r["id"] for r in json.loads(out)["records"]]


def test_since_and_until_take_iso_8601_and_epoch_ms(memory: MemoryCli) -> None:
    """The turns were said at 2023-11-14T22:13:20Z, 22:14:20 and 22:15:20."""
    later = ["cli-1:n3", "cli-1:n2"]
    assert _history_ids(memory, "--since", "2023-11-14T22:14Z") == later
    assert _history_ids(memory, "--since", "2023-11-15T00:14:00+02:00") == later
    assert _history_ids(memory, "--since", "2023-11-14T22:14") == later  # no offset: UTC
    assert _history_ids(memory, "--since", "1700000060000") == later  # epoch ms as before
    assert _history_ids(memory, "--until", "2023-11-14T22:14Z") == ["cli-1:n1"]
    # a date alone: from its first millisecond, through its last
    assert len(_history_ids(memory, "--since", "2023-11-14", "--until", "2023-11-14")) == 3
    assert _history_ids(memory, "--until", "2023-11-13") == []
    assert _history_ids(memory, "--since", "2023-11-15") == []
    code, _, err = memory("list", "--user", "nia", "--since", "14/11/2023")
    assert code == 2
    assert "argument --since: '14/11/2023' is neither an ISO 8601 date or time" in err


def test_refusals_name_the_flags_not_the_wire_fields(
    memory: MemoryCli, daemon: DaemonProcess, env: dict[str, str]
) -> None:
    def refused(*args: str) -> str:
        code, out, err = memory(*args)
        assert (code, out) == (1, ""), err
        return err.strip()

    assert refused("list") == "libravdb memory list: --user or --session is required"
    assert refused("list", "--user", "nia", "--limit", "1000") == (
        "libravdb memory list: --limit must be at most 500"
    )
    assert refused("list", "--user", "nia", "--limit", "0") == (
        "libravdb memory list: --limit must be at least 1"
    )
    assert refused("forget", "--user", "nia", "--query", "  ") == (
        "libravdb memory forget: --query must not be blank"
    )
    assert refused("forget", "--user", "nia", "--query", "bike", "--limit", "51") == (
        "libravdb memory forget: --limit must be at most 50"
    )
    long_ns = "n" * 300
    assert refused("list", "--user", long_ns).startswith(
        "libravdb memory list: --user is 300 bytes;"
    )
    done = run(["stats", "--namespace", long_ns, "--endpoint", daemon.endpoint], env)
    assert done.returncode == 1
    assert done.stderr.startswith("libravdb stats: --namespace is 300 bytes;"), done.stderr
    # what names no wire field is the daemon's own message, unchanged
    assert refused("get", "--user", "nia", "turns:nia", "nope") == (
        "libravdb memory get: no record 'nope' in 'turns:nia' for this namespace"
    )


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
    # what was found is forgotten; what was not is a failure a script must not miss
    assert code == 1, err
    assert out.startswith("forgot n2") and out.splitlines()[-1].startswith("3 record(s)")
    assert err == "libravdb memory forget: not found: zz\n"
    code, out, err = memory("forget", "--user", "nia", "--message", "nope", "--json")
    assert code == 1 and json.loads(out)["missing"] == [{"collection": "", "id": "nope"}]
    assert err == "libravdb memory forget: not found: nope\n"
    code, out, err = memory("forget", "--user", "nia", "--query", "quantum chromodynamics")
    assert code == 1 and out == "0 record(s), 0 summary(ies) rebuilt\n"
    assert (
        err == "libravdb memory forget: nothing clearly matches --query 'quantum chromodynamics'\n"
    )
    code, out, _ = memory("list", "--user", "nia", "--scope", "history", "--json")
    assert not [r for r in json.loads(out)["records"] if "peanut" in r["text"]]
    code, _, err = memory("forget", "--user", "nia")
    assert code == 2 and "--message, --record or --query" in err
    code, _, err = memory("forget", "--user", "nia", "--record", "no-slash")
    assert code == 2 and "COLLECTION/ID" in err


def test_wire_terms_to_flags() -> None:
    flags = {"namespace": "--user", "userId": "--user", "sessionId": "--session", "limit": "-l"}
    assert in_flag_terms("Object missing required field `limit`", flags) == "-l is required"
    assert in_flag_terms(
        "invalid params for memory.list: Expected `int`, got `str` - at `$.limit`", flags
    ) == ("-l must be a whole number")
    assert in_flag_terms("Expected `str` of length <= 9 - at `$.namespace`", flags) == (
        "--user must be at most 9 characters long"
    )
    assert in_flag_terms("namespace or userId is required", flags) == "--user is required"
    assert in_flag_terms("Expected `int` <= 5 - at `$.other`", flags) == (
        "Expected `int` <= 5 - at `$.other`"
    )
    assert in_flag_terms("no record 'x' in 'turns:a' for this namespace", flags) == (
        "no record 'x' in 'turns:a' for this namespace"
    )


def test_times_on_the_command_line() -> None:
    day = 1_785_542_400_000  # 2026-08-01T00:00:00Z
    assert epoch_ms("2026-08-01") == day
    assert epoch_ms("2026-08-01", end_of_day=True) == day + 86_400_000 - 1
    assert epoch_ms("2026-08-01T02:00+02:00") == day
    assert epoch_ms("2026-08-01T00:00:00.250Z") == day + 250
    assert epoch_ms(str(day)) == day
