"""Lossless compaction on random sessions, through the real memory service (in-process
App with the daemon's services: real store in a tmp dir, real MiniLM embedder).

After any sequence of ingests and compactions, expanding every active summary plus the
uncovered turns (the recent tail among them) reproduces the raw history exactly, and raw
turns are never deleted or changed.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.app import App
from sidecar.config import load_settings
from sidecar.memory.compaction.compactor import CompactionOptions, active_view, expand_summary
from sidecar.memory.core import layout as C
from sidecar.memory.ingest.sessions import MessageIn
from sidecar.memory.service import MemoryService
from sidecar.services import install_services
from tests.support import current_store

WORDS = [
    "garden",
    "deploy",
    "invoice",
    "must",
    "never",
    "tests",
    "the",
    "dog",
    "rain",
    "postgres",
    "```",
    "tool",
    "Always",
    "use",
    "tabs",
    "2026-03-01",
    "api",
    "error",
]

message = st.tuples(
    st.sampled_from(["user", "assistant", "tool", "system"]),
    st.lists(st.sampled_from(WORDS), min_size=0, max_size=30).map(" ".join),
)
step = st.one_of(
    st.lists(message, min_size=1, max_size=25).map(lambda m: ("ingest", m)),
    st.tuples(st.just("compact"), st.integers(min_value=2, max_value=7)),
)


async def _run(steps: list[Any], root: Path) -> None:
    cfg = load_settings(
        flags={
            "data_dir": str(root / "data"),
            **current_store().flags(root / "data"),
            "summarizer.backend": "extractive",
            "compaction.auto": False,
            "compaction.max_active_summaries": 2,
        },
        env={},
    )
    app = App(cfg)
    install_services(app)
    await app.start()
    try:
        mem = app.service(MemoryService)
        sid = "prop"
        ts = 1_000
        raw_before: dict[str, str] = {}
        for kind, arg in steps:
            if kind == "ingest":
                msgs = []
                for role, text in arg:
                    ts += 7 if text else 0  # equal timestamps happen too
                    msgs.append(MessageIn(role, text, None, ts))
                out = await mem.ingest(sid, msgs, user_id="pu")
                assert out.ingested + out.skipped == len(msgs)
            else:
                opts = CompactionOptions.from_settings(
                    cfg, target_size=arg, min_turns=2, tail_tokens=8, max_active_summaries=2
                )
                await mem.compact(sid, opts)
            recs = await mem.store.list_records(C.session_raw(sid))
            now = {r.id: r.text for r in recs}
            assert all(now.get(k) == v for k, v in raw_before.items())  # never deleted/changed
            raw_before = now
        raw = await mem.store.list_records(C.session_raw(sid))
        history = [
            r.id for r in sorted(raw, key=lambda r: (r.metadata["ts"], r.metadata["seq"], r.id))
        ]
        rebuilt: list[str] = []
        for ref in await active_view(mem, sid):
            if ref.kind == "turn":
                rebuilt.append(ref.id)
            else:
                items = await expand_summary(mem, sid, ref.id, None)
                assert items is not None and all(i.kind == "turn" for i in items)
                rebuilt.extend(i.id for i in items)
        assert rebuilt == history
        # a second compaction with the same options changes nothing
        opts = CompactionOptions.from_settings(cfg, target_size=3, min_turns=2, tail_tokens=8)
        first = await mem.compact(sid, opts)
        second = await mem.compact(sid, opts)
        assert not second.did_compact or not set(second.summary_ids) & set(first.summary_ids)
    finally:
        await app.close()


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(step, min_size=1, max_size=6))
def test_lossless_random_sessions(steps: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_run(steps, Path(tmp)))
