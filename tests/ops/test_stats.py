"""`libravdb stats`, run as a real process against a real daemon (real embedding model,
real gate, real compaction): the text report's lines and chart rows, `--json`, `--by`,
one namespace, an unknown namespace, no daemon."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from libravdb_client import Client
from libravdb_client.testing import DaemonProcess

from sidecar.ops.stats_report import BAR_WIDTH, bar, chart_rows, format_namespace
from tests.support import StoreTarget
from tests.test_console import run

pytestmark = pytest.mark.usefixtures("store_target")  # both store backends

JAN = 1_704_067_200_000  # 2024-01-01T00:00:00Z
MAR = 1_709_251_200_000  # 2024-03-01
DAY = 86_400_000
ANA = [
    "I moved to Lisbon in January for a new job at a bakery.",
    "My brother Tomas studies marine biology in Faro.",
    "I am allergic to shellfish, so please avoid prawn recipes.",
    "The bakery opens at six so I wake up at half past four.",
    "I adopted a grey cat called Pimenta from the shelter.",
    "My landlord is fixing the leaking kitchen tap next week.",
    "I practise Portuguese with a tutor every Tuesday evening.",
    "My favourite pastry to bake is the custard tart.",
    "I cycle along the river to work when it is not raining.",
    "I want to visit the Azores with Tomas in the summer.",
]
BO = [
    "I restore old motorbikes in my garage on weekends.",
    "My daughter starts primary school in September.",
]
DOC = "---\ncore: true\n---\n# House rules\n\n- Always answer in British English.\n"


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, module_store_target: StoreTarget
) -> Iterator[DaemonProcess]:
    base = tmp_path_factory.mktemp("stats")
    (base / "config.toml").write_text("[compaction]\nauto = false\n")
    with DaemonProcess.start(
        "tcp",
        data_dir=base / "data",
        home=base / "home",
        env={"LIBRAVDB_CONFIG": str(base / "config.toml")},
        args=module_store_target.args(base / "data"),
        ready_timeout=60,
    ) as running:
        with Client(running.endpoint, timeout=120) as c:
            c.ingest("a1", _chat("a", ANA, JAN + DAY), user_id="ana")
            c.compact("a1", force=True, target_size=4)
            c.ingest("b1", _chat("b", BO, MAR + 2 * DAY), user_id="bo")
            c.call("authored.ingest", {"sourceDoc": "house.md", "text": DOC})
        yield running


def _chat(prefix: str, texts: list[str], start: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, text in enumerate(texts):
        ts = start + i * DAY
        out.append({"id": f"{prefix}u{i}", "role": "user", "content": text, "ts": ts})
        out.append({"id": f"{prefix}a{i}", "role": "assistant", "content": "Noted.", "ts": ts})
    return out


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LIBRAVDB_")}
    return {**clean, "HOME": str(tmp_path_factory.mktemp("home"))}


def _stats(daemon: DaemonProcess, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    done = run(["stats", "--endpoint", daemon.endpoint, *args], env, timeout=60)
    return done.returncode, done.stdout, done.stderr


def _scope_totals(daemon: DaemonProcess, ns: str) -> dict[str, int]:
    with Client(daemon.endpoint, timeout=60) as c:
        return {
            scope: c.call("memory.list", {"namespace": ns, "scope": scope, "limit": 1})["total"]
            for scope in ("durable", "history", "summary", "elevated", "dream")
        }


def test_json_counts_every_scope_sessions_summaries_and_authored_rules(
    daemon: DaemonProcess, env: dict[str, str]
) -> None:
    code, out, err = _stats(daemon, env, "--json")
    assert code == 0, err
    result = json.loads(out)
    ana, bo = result["namespaces"]
    assert (ana["namespace"], bo["namespace"]) == ("ana", "bo")
    for ns in (ana, bo):
        totals = _scope_totals(daemon, ns["namespace"])
        assert {k: ns[k] for k in totals} == totals
        assert ns["records"] == sum(totals.values()) + ns["superseded"]
        assert sum(b["records"] for b in ns["timeline"]) == ns["records"]
    assert (ana["history"], ana["sessions"], bo["history"], bo["sessions"]) == (20, 1, 4, 1)
    assert ana["summary"] > 0 and ana["depth"] >= 1 and bo["summary"] == 0
    assert sum(lv["count"] for lv in ana["summaryLevels"]) == ana["summary"]
    with Client(daemon.endpoint, timeout=60) as c:
        (doc,) = c.call("authored.list", {})["documents"]
    tiers = {k: doc[k] for k in ("hard", "soft", "variant")}
    assert result["authored"] == {"documents": 1, **tiers} and tiers["hard"] == 1
    assert result["disk"]["databaseBytes"] > 0


def test_one_namespace_as_text_with_its_chart(daemon: DaemonProcess, env: dict[str, str]) -> None:
    code, out, err = _stats(daemon, env, "--namespace", "bo")
    assert code == 0, err
    ns = json.loads(_stats(daemon, env, "--namespace", "bo", "--json")[1])["namespaces"][0]
    lines = out.splitlines()
    assert lines[0].startswith("store: ") and " records in " in lines[0] and "on disk" in lines[0]
    assert lines[1].startswith("authored rules: 1 document(s); 1 hard, ")
    assert lines[2] == ""
    assert lines[3] == (
        f"namespace bo: {ns['records']} records, 1 session(s), 2024-03-03 .. 2024-03-04"
    )
    assert lines[4] == (
        f"  durable {ns['durable']}, history 4, summary 0, elevated {ns['elevated']}, dream 0"
    )
    assert lines[5:] == ["  records by month", f"    2024-03  {'█' * BAR_WIDTH} {ns['records']}"]


def test_by_week_rows_are_contiguous_iso_weeks(daemon: DaemonProcess, env: dict[str, str]) -> None:
    code, out, err = _stats(daemon, env, "--namespace", "ana", "--by", "week", "--json")
    assert code == 0, err
    ns = json.loads(out)["namespaces"][0]
    labels = [b["label"] for b in ns["timeline"]]
    # turns on 2024-01-02 .. 2024-01-11: ISO weeks 1 and 2; the summaries are dated by
    # their compaction (now), so the rows run on, week by week, to this week
    assert labels[:2] == ["2024-W01", "2024-W02"] and labels[2] == "2024-W03"
    assert [b["startMs"] for b in ns["timeline"][:2]] == [1_704_067_200_000, 1_704_672_000_000]
    starts = [b["startMs"] for b in ns["timeline"]]
    assert all(b - a == 7 * DAY for a, b in itertools.pairwise(starts))
    code, text, _ = _stats(daemon, env, "--namespace", "ana", "--by", "week")
    rows = text.split("  records by week\n", 1)[1].splitlines()
    assert rows == ["    " + r for r in chart_rows(ns["timeline"], "week")]
    folded = len(ns["timeline"]) - 3
    counts = [b["records"] for b in ns["timeline"]]
    peak, digits = max(counts), len(str(max(counts)))
    assert counts[0] and counts[1] and counts[-1] and not any(counts[2:-1])
    assert rows == [
        f"    2024-W01  {bar(counts[0], peak)} {counts[0]:>{digits}}",
        f"    2024-W02  {bar(counts[1], peak)} {counts[1]:>{digits}}",
        f"              ... {folded} weeks without records ...",
        f"    {labels[-1]}  {bar(counts[-1], peak)} {counts[-1]:>{digits}}",
    ]
    assert "summaries: depth" in text


def test_an_unknown_namespace_and_no_daemon_fail_with_one_line(
    daemon: DaemonProcess, env: dict[str, str], tmp_path: Path
) -> None:
    code, out, err = _stats(daemon, env, "--namespace", "nobody")
    assert code == 1 and out == ""
    assert err.strip() == (
        "libravdb stats: namespace 'nobody' has no records; namespaces in this store: ana, bo"
    )
    done = run(["stats", "--endpoint", f"unix:{tmp_path / 'none.sock'}"], env)
    assert done.returncode == 2 and "Is the daemon running?" in done.stderr


@pytest.mark.sqlite_only("no store: the chart alone")
def test_bars_scale_to_the_largest_row_in_eighths() -> None:
    assert bar(10, 10, 4) == "████"
    assert bar(5, 10, 4) == "██  "
    assert bar(1, 16, 4) == "▎   "  # 2 of 32 eighths
    assert bar(1, 1000, 4) == "▏   "  # never invisible
    assert bar(0, 10, 4) == "    "


@pytest.mark.sqlite_only("no store: the text alone")
def test_records_dated_outside_the_range_are_named_apart_from_the_chart() -> None:
    ns = {
        "namespace": "zed",
        "records": 3,
        "durable": 0,
        "superseded": 0,
        "history": 3,
        "summary": 0,
        "elevated": 0,
        "dream": 0,
        "sessions": 1,
        "depth": 0,
        "summaryLevels": [],
        "firstTs": JAN,
        "lastTs": 253_402_300_799_999,
        "timeline": [{"label": "9999-12", "startMs": 253_399_622_400_000, "records": 1}],
        "earlier": 1,
        "outOfRange": 1,
    }
    assert format_namespace(ns, "month") == [
        "namespace zed: 3 records, 1 session(s), 2024-01-01 .. 9999-12-31",
        "  durable 0, history 3, summary 0, elevated 0, dream 0",
        "  1 record(s) dated outside 1970-01-01 .. 9999-12-31 (stored before ingest checked "
        "ts): counted above, not in the chart",
        "  records by month (1 earlier)",
        f"    9999-12  {'█' * BAR_WIDTH} 1",
    ]
