"""Every v2 method as a typed client method, sync and async, against the real daemon.

One naming rule for every result: the wire is camelCase, Python attributes are the same
names in snake_case (``status().memory_count`` for ``memoryCount``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from libravdb_client import (
    AsyncClient,
    Client,
    InvalidInput,
    InvalidParams,
    NotFound,
    ProgressParams,
)
from libravdb_client.testing import DaemonProcess

from protocol.assemble import AssembleResult, SearchFilters
from protocol.authored import DreamPromoteParams, LifecycleHintParams
from protocol.sessions import IngestMessage

FACTS = [
    {"id": "f1", "role": "user", "content": "My daughter Lena studies marine biology."},
    {"id": "f2", "role": "assistant", "content": "Marine biology suits someone who loves the sea."},
    {"id": "f3", "role": "user", "content": "She moved to Aberdeen for the degree."},
]


def test_sync_typed_methods(unix_daemon: DaemonProcess) -> None:
    with Client(unix_daemon.endpoint, timeout=120) as c:
        status = c.status()
        assert isinstance(status.memory_count, int)  # snake_case attribute of memoryCount
        stored = c.ingest("typed-s1", FACTS, user_id="typed")
        assert stored.ingested == 3 and stored.ids == ["f1", "f2", "f3"] and stored.empty == 0
        again = c.ingest("typed-s1", [IngestMessage(role="user", content="hi", id="f4")])
        assert again.ingested == 1
        turn = [{"id": "t5", "role": "user", "content": "I collect vinyl records."}]
        committed = c.ingest("typed-s1", turn, advancement_key="turn-5")
        assert committed.ingested == 1 and committed.duplicate is False
        retried = c.ingest("typed-s1", turn, advancement_key="turn-5")
        assert retried.duplicate is True and retried.ingested == 0

        ctx = c.assemble(
            "fresh", prompt="Where does Lena study?", token_budget=4000, user_id="typed"
        )
        assert isinstance(ctx, AssembleResult) and "Aberdeen" in ctx.system_prompt_addition
        assert ctx.budget.used <= ctx.budget.total

        hits = c.search("marine biology", user_id="typed", k=3, filters=SearchFilters(role="user"))
        assert hits.hits and all(h.role == "user" for h in hits.hits)
        got = c.memory_get(hits.hits[0].collection, hits.hits[0].id, user_id="typed")
        assert got.record.text == hits.hits[0].text
        with pytest.raises(NotFound):
            c.memory_get(hits.hits[0].collection, hits.hits[0].id, user_id="someone-else")

        seen: list[ProgressParams] = []
        many = [{"role": "user", "content": f"Point {i} about the boat trip."} for i in range(30)]
        c.ingest("typed-s2", many, user_id="typed")
        compacted = c.compact("typed-s2", force=True, on_progress=seen.append)
        assert compacted.did_compact and compacted.summary_ids and seen
        expanded = c.expand("typed-s2", compacted.summary_ids[0])
        assert expanded.turns and expanded.turns[0].text.startswith("Point")

        vectors = c.embed(["a sentence"], kind="query")
        assert vectors.dims == 384 and len(vectors.vectors[0]) == 384
        summary = c.summarize(["first turn about boats", "second turn about sails"])
        assert summary.summary and summary.method

        doc = c.authored_ingest("style.md", "- Write short sentences.\n", core=False)
        assert doc.nodes >= 1
        assert [d.source_doc for d in c.authored_list().documents] == ["style.md"]
        assert c.authored_delete("style.md").deleted >= 1

        promoted = c.dream_promote(
            DreamPromoteParams(source_doc="dream.md", user_id="typed", text="# Dreams\n")
        )
        assert promoted.collection == "dream:typed"
        hint = c.lifecycle_hint(LifecycleHintParams(hook="session_start", session_id="typed-s1"))
        assert hint.hook == "session_start"
        journal = c.lifecycle_journal(session_id="typed-s1")
        assert journal.entries[0].id == hint.id

        sessions = c.sessions_list(namespace="typed", limit=1)
        assert sessions.total == 2 and len(sessions.sessions) == 1 and sessions.next_cursor
        stats = c.memory_stats(namespace="typed", bucket="day")
        assert [n.namespace for n in stats.namespaces] == ["typed"]
        assert stats.namespaces[0].sessions == sessions.total and stats.disk.total_bytes > 0

        page = c.memory_list(user_id="typed", scope="history", limit=2)
        assert len(page.records) == 2 and page.total > 2 and page.next_cursor
        rest = c.memory_list(user_id="typed", scope="history", cursor=page.next_cursor, limit=500)
        assert len(rest.records) == page.total - 2
        fixed = c.memory_update(
            "turns:typed", page.records[0].id, "Lena studies in Dundee.", user_id="typed"
        )
        assert fixed.record.collection == "user:typed" and fixed.record.text.endswith("Dundee.")
        # 30 turns clearly match: a query forget takes them all or none (limit)
        with pytest.raises(InvalidInput, match="30 memories clearly match"):
            c.forget(user_id="typed", query="boat trip", limit=2, dry_run=True)
        dry = c.forget(user_id="typed", query="boat trip", limit=50, dry_run=True)
        assert dry.dry_run and len(dry.items) == 30 and dry.items[0].session_id
        one = c.forget(user_id="typed", message_ids=[dry.items[0].id])
        assert [i.id for i in one.items] == [dry.items[0].id] and one.deleted >= 2
        by_record = c.forget(user_id="typed", records=[(hits.hits[0].collection, hits.hits[0].id)])
        assert by_record.items and not by_record.missing
        assert c.forget(user_id="typed", include_sessions=True).deleted > 0
        with pytest.raises(NotFound):
            c.compact("never-ingested")
        with pytest.raises(InvalidParams, match="did you mean `content`"):
            c.ingest("typed-s3", [{"role": "user", "text": "oops"}])  # type: ignore[list-item]


async def test_async_typed_methods(tcp_daemon: DaemonProcess) -> None:
    async with AsyncClient(tcp_daemon.endpoint, timeout=120) as c:
        stored = await c.ingest("atyped", FACTS, user_id="atyped", advancement_key="k")
        assert stored.ingested == 3 and stored.duplicate is False
        assert (await c.ingest("atyped", FACTS, advancement_key="k")).duplicate is True
        ctx = await c.assemble(
            "fresh", prompt="Which city did Lena move to?", token_budget=4000, user_id="atyped"
        )
        assert "Aberdeen" in ctx.system_prompt_addition
        hits = await c.search("Aberdeen", user_id="atyped")
        assert hits.hits[0].text == "She moved to Aberdeen for the degree."
        got = await c.memory_get(hits.hits[0].collection, hits.hits[0].id, user_id="atyped")
        assert got.record.role == "user" and got.record.session_id == "atyped"
        sessions = await c.sessions_list(user_id="atyped")
        assert [x.session_id for x in sessions.sessions] == ["atyped"]
        assert sessions.sessions[0].turn_count == 3 and sessions.next_cursor == ""
        stats = await c.memory_stats(namespace="atyped")
        assert stats.namespaces[0].history == 3 and stats.bucket == "month"
        listed = await c.authored_list()
        assert listed.documents == [] or all(d.source_doc for d in listed.documents)
        gone = await c.forget(user_id="atyped", message_ids=[stored.ids[0], "no-such-id"])
        assert len(gone.items) == 1 and [m.id for m in gone.missing] == ["no-such-id"]
        assert (await c.forget(user_id="atyped")).deleted > 0


def test_auth_token_is_sent_first(tmp_path: Path, home: Path) -> None:
    token = tmp_path / "token"
    token.write_text("client-side-token-long-enough\n")
    token.chmod(0o600)
    env = {"LIBRAVDB_AUTH_TOKEN_FILE": str(token)}
    with DaemonProcess.start("tcp", data_dir=tmp_path / "d", home=home, env=env) as daemon:
        with Client(daemon.endpoint, auth_token="client-side-token-long-enough") as c:
            assert c.health().ok
        with pytest.raises(Exception, match="unauthorized"), Client(daemon.endpoint) as c:
            c.health()
