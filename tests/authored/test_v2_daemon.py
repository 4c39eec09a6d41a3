"""v2 authored / dream / lifecycle methods against a real daemon process (with the
markdown watcher enabled through a TOML config file)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from protocol.codes import ErrorCode
from sidecar.memory.core.layout import content_tombstone_id, tombstone_key
from tests.support import RawConnection, open_test_store, start_daemon

DIARY = """# Dream diary

## Deep Sleep
- the user prefers green tea in the morning {score=0.82 recall=3 unique=2}
- weak memory {score=0.2 recall=1 unique=1}

```
- fenced {score=0.9 recall=9 unique=9}
```
"""


API_DOC = "---\ncore: true\nhop_targets: [x]\n---\n- be brief\n\nplain lore\n"


def _ok(reply: dict[str, Any]) -> Any:
    assert "error" not in reply, reply
    return reply["result"]


def _wait(conn: RawConnection, collection: str, pred: Any, timeout: float = 20.0) -> list[Any]:
    deadline = time.monotonic() + timeout
    while True:
        recs = _ok(conn.call("list_collection", {"collection": collection}))["results"]
        if pred(recs) or time.monotonic() > deadline:
            return list(recs)
        time.sleep(0.1)


def test_v2_methods_and_watcher(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "core.md").write_text("- always cite sources\n\nbackground lore\n")
    config = tmp_path / "libravdb.toml"
    config.write_text(
        f'[authored]\nroots = ["generic:{notes}"]\ncore_globs = ["core.md"]\n'
        "debounce_ms = 0\n\n[journal]\nmax_entries = 3\n"
    )
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0", extra_args=("--config", str(config)))
    try:
        with RawConnection(daemon.endpoint, timeout=60) as conn:
            # the watcher ingested the root's file (core by core_globs)
            hard = _wait(conn, "authored:hard", lambda r: len(r) == 1)
            assert [r["text"] for r in hard] == ["always cite sources"]
            status = _ok(conn.call("status"))
            assert status["ok"] is True

            res = _ok(
                conn.call(
                    "authored.ingest",
                    {
                        "sourceDoc": "api.md",
                        "text": API_DOC,
                        "source": {"root": "/r", "path": "api.md", "kind": "Obsidian"},
                    },
                )
            )
            # the front matter is metadata, not a rule (the reference made it a hard node)
            assert res["core"] is True and (res["hard"], res["soft"], res["variant"]) == (1, 0, 1)
            assert res["hopTargets"] == ["x"] and res["unchanged"] is False
            again = _ok(
                conn.call(
                    "authored.ingest",
                    {
                        "sourceDoc": "api.md",
                        "text": API_DOC,
                        "source": {"root": "/r", "path": "api.md", "kind": "Obsidian"},
                    },
                )
            )
            assert again["unchanged"] is True
            dry = _ok(
                conn.call(
                    "authored.ingest",
                    {"sourceDoc": "api.md", "text": "- x rule\n", "core": False, "dryRun": True},
                )
            )
            assert dry["hard"] == 0 and dry["soft"] + dry["variant"] == 1
            err = conn.call("authored.ingest", {"sourceDoc": " ", "text": "x"})["error"]
            assert (
                err["code"] == ErrorCode.INVALID_INPUT and err["message"] == "sourceDoc is required"
            )
            err = conn.call("authored.ingest", {"text": "x"})["error"]
            assert err["code"] == ErrorCode.INVALID_PARAMS
            deleted = _ok(conn.call("authored.delete", {"sourceDoc": "api.md"}))
            assert deleted == {"sourceDoc": "api.md", "deleted": 2}

            # dream.promote from raw diary text
            prom = _ok(
                conn.call("dream.promote", {"userId": "u1", "sourceDoc": "diary.md", "text": DIARY})
            )
            assert (prom["promoted"], prom["rejected"], prom["collection"]) == (1, 1, "dream:u1")
            assert prom["ids"] == ["diary.md#dream#000000"]
            assert prom["rejections"][0]["line"] == 5 and prom["rejections"][0]["reasons"]
            (rec,) = _ok(conn.call("list_collection", {"collection": "dream:u1"}))["results"]
            assert rec["metadata"]["dream_line"] == 4 and rec["metadata"]["source_kind"] == "dream"
            hits = _ok(conn.call("search_text", {"collection": "dream:u1", "text": "tea", "k": 1}))[
                "results"
            ]
            assert hits[0]["id"] == "diary.md#dream#000000"
            # entries form; all rejected -> earlier entries removed
            prom = _ok(
                conn.call(
                    "dream.promote",
                    {
                        "namespace": "u1",
                        "sourceDoc": "diary.md",
                        "entries": [
                            {"text": "x", "score": 0.9, "recallCount": 5, "uniqueQueries": 5}
                        ],
                    },
                )
            )
            assert (prom["promoted"], prom["rejected"], prom["removed"]) == (0, 1, 1)
            err = conn.call("dream.promote", {"userId": "u1", "sourceDoc": "d"})["error"]
            assert err["code"] == ErrorCode.INVALID_INPUT

            # lifecycle journal: cap 3, newest first, filters
            for i in range(4):
                hint = _ok(
                    conn.call(
                        "lifecycle.hint",
                        {"hook": "session_end", "sessionId": f"s{i % 2}", "reason": f"r{i}"},
                    )
                )
                assert hint["hook"] == "session_end" and hint["pruned"] == (1 if i == 3 else 0)
            j = _ok(conn.call("lifecycle.journal", {}))
            assert [e["reason"] for e in j["entries"]] == ["r3", "r2", "r1"] and j["total"] == 3
            j = _ok(conn.call("lifecycle.journal", {"sessionId": "s1", "limit": 1}))
            assert [e["reason"] for e in j["entries"]] == ["r3"] and j["total"] == 2
            err = conn.call("lifecycle.hint", {"hook": ""})["error"]
            assert err["code"] == ErrorCode.INVALID_INPUT

            # the watcher notices a deleted file
            (notes / "core.md").unlink()
            assert _wait(conn, "authored:hard", lambda r: not r) == []
    finally:
        assert daemon.stop() == 0


def test_forget_tombstones_block_resurrection(tmp_path: Path) -> None:
    store = open_test_store(tmp_path / "data", embed_dims=384, fingerprint="")
    try:
        green_tea = content_tombstone_id("the user prefers green tea in the morning")
        store.add_tombstones("u1", [tombstone_key("dream:u1", green_tea)], "forget")
        store.add_tombstones(
            "authored", [tombstone_key("authored:variant", "doc.md#000001")], "forget"
        )
        store.add_tombstones("authored", ["authored:gone.md"], "forget")
    finally:
        store.close()
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint, timeout=60) as conn:
            prom = _ok(
                conn.call("dream.promote", {"userId": "u1", "sourceDoc": "diary.md", "text": DIARY})
            )
            assert (prom["promoted"], prom["suppressed"]) == (0, 1)
            res = _ok(
                conn.call(
                    "authored.ingest",
                    {"sourceDoc": "doc.md", "text": "# Title\n\nkept lore\n\nforgotten lore\n"},
                )
            )
            assert (res["variant"], res["suppressed"]) == (1, 1)
            variants = _ok(conn.call("list_collection", {"collection": "authored:variant"}))
            assert [r["id"] for r in variants["results"]] == ["doc.md#000000"]
            res = _ok(conn.call("authored.ingest", {"sourceDoc": "gone.md", "text": "- a\n"}))
            assert res["nodes"] == 0 and res["suppressed"] == 1
    finally:
        assert daemon.stop() == 0


def test_forgotten_dream_entries_stay_forgotten_after_diary_edits(tmp_path: Path) -> None:
    # Regression: dream tombstones were positional, so a new bullet above a forgotten one
    # suppressed the new entry and brought the forgotten one back.
    daemon = start_daemon(tmp_path, "--tcp", "127.0.0.1:0")
    try:
        with RawConnection(daemon.endpoint, timeout=60) as conn:
            first = {"userId": "u9", "sourceDoc": "diary.md", "text": DIARY}
            assert _ok(conn.call("dream.promote", first))["promoted"] == 1
            _ok(conn.call("forget", {"userId": "u9"}))
            edited = DIARY.replace(
                "## Deep Sleep\n",
                "## Deep Sleep\n- the user is learning the cello {score=0.9 recall=4 unique=3}\n",
            )
            again = _ok(
                conn.call(
                    "dream.promote", {"userId": "u9", "sourceDoc": "diary.md", "text": edited}
                )
            )
            assert (again["promoted"], again["suppressed"]) == (1, 1)
            rows = _ok(conn.call("list_collection", {"collection": "dream:u9"}))["results"]
            assert [r["text"] for r in rows] == ["the user is learning the cello"]
    finally:
        assert daemon.stop() == 0
