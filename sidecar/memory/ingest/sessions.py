"""Session ingest: immutable raw history, the namespace turn index, gated durable admission.

One ``ingest`` call stores a batch of messages of one session:

1. Validate everything first (roles, content, ids, timestamps): bad input raises
   :class:`IngestError` and nothing is written.
2. Ids: the client's message id, else ``turns.derive_turn_id(session, position, role,
   text)`` with the session position (never wall-clock). Ids already stored in
   ``session_raw:<sid>``, repeated in the batch, or tombstoned by ``forget`` are skipped.
3. One batched embedding call for the new turns.
4. Gating from neighbour scores computed **before** anything is inserted: the ``k =
   centroid_k`` nearest user turns of ``turns:<ns>`` and the ``memory_k`` nearest
   durable memories of ``user:<ns>``, plus the earlier turns of the same batch (as if
   the batch had been ingested one message at a time). A turn is never its own
   neighbour. Every turn gets its signals; user turns with ``G >= threshold`` are
   admitted to ``user:<ns>``.
5. One store transaction writes ``session_raw:<sid>`` (every role), ``turns:<ns>``
   (every role; id ``<sid>:<turnId>``), ``user:<ns>`` (admitted user turns) and the
   session's ingest state (position counter, CAS).

With an ``advancement_key`` (a host's accepted-turn commit, OpenClaw ``commitTurn``) the
same transaction also writes a commit marker in ``session_state:<sid>``: a retry with a
key already committed writes nothing and reports ``duplicate``. Marker and turns land
together or not at all, so a crash between them cannot commit a turn twice or lose it.

Afterwards the token count goes to the auto-compaction accumulator, which may start a
background compaction; ingest never waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from sidecar.memory.core import layout as C
from sidecar.memory.core.errors import MemoryInputError
from sidecar.memory.core.ownership import namespace_of_session, stored_owner
from sidecar.memory.core.progress import PROGRESS_CHUNK, Progress, no_progress
from sidecar.memory.core.temporal import mentioned_windows
from sidecar.memory.core.tokens import estimate_tokens, message_text
from sidecar.memory.core.turns import derive_turn_id, normalize_role, stability_weight
from sidecar.memory.ingest.changes import is_change, superseded, superseded_marks
from sidecar.memory.ingest.gate import GatingSignals, compute_gating
from sidecar.memory.ingest.neighbours import (
    Proposals,
    ViewNeighbours,
    neighbour_hits,
    neighbour_scores,
    proposals,
)
from sidecar.store.interface import StoreBackend
from sidecar.store.timestamps import ts_problem
from sidecar.store.types import Patch, Put

if TYPE_CHECKING:
    from sidecar.memory.ingest.gate import GatingConfig
    from sidecar.store.aio import AsyncStore

INGEST_STATE_ID = C.INGEST_STATE_ID


class IngestHost(Protocol):
    """What ingest uses of its owner (the memory service): the store, the gate's settings,
    the session's ingest lock, the embedder and the change and pressure bookkeeping."""

    @property
    def store(self) -> AsyncStore: ...

    @property
    def gating(self) -> GatingConfig: ...

    def ingest_lock(self, session_id: str) -> AbstractAsyncContextManager[None]: ...

    def namespace_lock(self, namespace: str) -> AbstractAsyncContextManager[None]: ...

    async def embed(self, texts: Sequence[str], kind: str = "document") -> F32: ...

    def note_ingested(self, session_id: str, tokens: int) -> Any: ...

    @property
    def neighbours(self) -> ViewNeighbours | None:
        """Retrieval's views, which propose a large collection's neighbours (None: the
        store's index alone)."""


F32 = np.ndarray[Any, np.dtype[np.float32]]
# Metadata kept on the namespace index copy in turns:<ns> (the full record is in session_raw).
_INDEX_KEYS = (
    "type",
    "role",
    "ts",
    "sessionId",
    "userId",
    "namespace",
    "source_turn_id",
    "seq",
    "token_count",
    "stability_weight",
    "gating_score",
    "gating_admitted",
)
MAX_BATCH = 10_000
CHANGE_K = 8  # earlier user turns a change is matched against
STATED_FACT = "stated_fact"  # metadata: the caller said the message is a fact to keep


class IngestError(MemoryInputError):
    """Invalid ingest input; nothing was written."""


@dataclass(frozen=True, slots=True)
class MessageIn:
    role: str
    content: Any = None
    id: str | None = None
    ts: int | None = None
    durable: bool = False  # the caller says it is a fact: durable whatever the gate says


@dataclass(slots=True)
class IngestOutcome:
    ingested: int
    skipped: int
    ids: list[str]
    namespace: str
    admitted: list[str] = field(default_factory=list)
    gating: dict[str, GatingSignals] = field(default_factory=dict)
    empty: int = 0
    duplicate: bool = False
    # why a message with text was not stored, by its index in the request
    skips: dict[int, str] = field(default_factory=dict)


SKIP_STORED = "already stored"
SKIP_REPEATED = "repeated in this batch"
SKIP_FORGOTTEN = "forgotten"


@dataclass(slots=True)
class _Prepared:
    index: int
    id: str
    role: str
    text: str
    ts: int
    position: int
    durable: bool = False


def _validate(
    session_id: str, messages: Sequence[MessageIn]
) -> list[tuple[str, str, str | None, int | None]]:
    if not isinstance(session_id, str) or not session_id.strip():
        raise IngestError("sessionId is required")
    if len(messages) > MAX_BATCH:
        raise IngestError(f"at most {MAX_BATCH} messages per ingest call, got {len(messages)}")
    out: list[tuple[str, str, str | None, int | None]] = []
    for i, m in enumerate(messages):
        try:
            role = normalize_role(m.role if isinstance(m.role, str) else "")
        except ValueError as exc:
            raise IngestError(f"messages[{i}].role: {exc}") from None
        try:
            text = message_text(m.content)
        except TypeError as exc:
            raise IngestError(f"messages[{i}].content: {exc}") from None
        if "\x00" in text:
            raise IngestError(f"messages[{i}].content contains a NUL character")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise IngestError(f"messages[{i}].content is not valid Unicode text") from None
        mid = m.id
        if mid is not None:
            if not isinstance(mid, str) or not mid.strip():
                raise IngestError(f"messages[{i}].id must be a non-empty string when given")
            if len(mid.encode("utf-8", "surrogatepass")) > 512 or "\x00" in mid:
                raise IngestError(f"messages[{i}].id is too long or contains NUL")
        ts = m.ts
        if ts is not None and (bad_ts := ts_problem(ts)) is not None:
            raise IngestError(f"messages[{i}].ts {bad_ts}")
        out.append((role, text, mid, ts))
    return out


MAX_ADVANCEMENT_KEY_BYTES = 1024


def commit_marker_id(advancement_key: str) -> str:
    """Record id of a commit marker: a digest, so any key the host sends is a valid id."""
    digest = hashlib.sha256(advancement_key.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{C.COMMIT_MARKER_PREFIX}{digest[:40]}"


def _validate_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key.strip():
        raise IngestError("advancementKey must be a non-empty string when given")
    if len(key.encode("utf-8", "surrogatepass")) > MAX_ADVANCEMENT_KEY_BYTES or "\x00" in key:
        raise IngestError(
            f"advancementKey is longer than {MAX_ADVANCEMENT_KEY_BYTES} bytes or contains NUL"
        )
    return key


def _turn_metadata(p: _Prepared, session_id: str, ns: str, gating: GatingSignals) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "type": C.TYPE_TURN,
        "role": p.role,
        "ts": p.ts,
        "sessionId": session_id,
        "userId": ns,
        "namespace": ns,
        "provenance_class": C.PROVENANCE_SESSION_TURN,
        "stability_weight": stability_weight(p.role),
        "source_turn_id": p.id,
        "seq": p.position,
        "token_count": estimate_tokens(p.text),
        "raw_history": True,
        "active_view": False,
    }
    meta.update(gating.to_metadata())
    mentions = mentioned_windows(p.text, p.ts)
    if mentions:
        meta["mentions"] = mentions
    if p.durable:
        meta[STATED_FACT] = True
    return meta


def _gate_asks(ns: str, cfg: GatingConfig) -> list[tuple[str, int, str | None]]:
    """The neighbours gating reads: ``centroid_k`` user turns, ``memory_k`` memories."""
    return [(C.turns(ns), cfg.centroid_k, "user"), (C.user(ns), cfg.memory_k, None)]


def _gate_batch(
    store: StoreBackend,
    ns: str,
    prepared: Sequence[_Prepared],
    vecs: F32,
    svc: IngestHost,
    proposed: Proposals,
) -> tuple[list[GatingSignals], list[bool]]:
    """Gating for each new turn, sequentially, before anything is inserted (thread)."""
    cfg = svc.gating
    stored_turns, stored_mems = (
        neighbour_scores(store, name, vecs, k, role, proposed)
        for name, k, role in _gate_asks(ns, cfg)
    )
    n = len(prepared)
    sims = vecs @ vecs.T if n > 1 else np.zeros((n, n), dtype=np.float32)
    signals: list[GatingSignals] = []
    admitted: list[bool] = []
    user_rows: list[int] = []
    mem_rows: list[int] = []
    for i, p in enumerate(prepared):
        turn_scores = stored_turns[i] + [float(sims[i, j]) for j in user_rows]
        mem_scores = stored_mems[i] + [float(sims[i, j]) for j in mem_rows]
        sig = compute_gating(p.text, turn_scores, mem_scores, cfg)
        ok = (p.durable or (p.role == "user" and sig.admitted)) and bool(p.text.strip())
        signals.append(sig)
        admitted.append(ok)
        if p.role == "user":
            user_rows.append(i)
        if ok:
            mem_rows.append(i)
    return signals, admitted


def _changing(new: Sequence[_Prepared]) -> list[int]:
    """The turns of the batch that say a fact of the user changed."""
    return [i for i, p in enumerate(new) if p.role == "user" and is_change(p.text)]


def _changes(
    store: StoreBackend,
    ns: str,
    session_id: str,
    new: Sequence[_Prepared],
    vecs: F32,
    now: int,
    proposed: Proposals,
) -> list[Patch]:
    """Marks for the earlier user turns that turns of this batch say have changed
    (``changes`` module doc), read before the batch is stored."""
    turns = C.turns(ns)
    if store.collection(turns) is None:
        return []
    marks: list[Patch] = []
    ids = proposed.get((turns, "user"))
    for at, i in enumerate(_changing(new)):
        p = new[i]
        mine = None if ids is None else ids[at]
        old = superseded(p.text, neighbour_hits(store, turns, vecs[i], CHANGE_K, "user", mine))
        if old is None:
            continue
        by = C.namespace_turn_id(session_id, p.id)
        marks += superseded_marks(ns, old.id, old.metadata.get("sessionId"), by, now)
    return marks


def _turn_puts(
    session_id: str,
    ns: str,
    new: Sequence[_Prepared],
    vecs: F32,
    signals: Sequence[GatingSignals],
    admitted: Sequence[bool],
) -> tuple[list[Put], list[str]]:
    """The raw turns, their ``turns:<ns>`` copies and the admitted durable copies; and the
    ids admitted."""
    raw_coll, turns_coll, user_coll = C.session_raw(session_id), C.turns(ns), C.user(ns)
    puts: list[Put] = []
    admitted_ids: list[str] = []
    for p, vec, sig, ok in zip(new, vecs, signals, admitted, strict=True):
        meta = _turn_metadata(p, session_id, ns, sig)
        puts.append(Put(raw_coll, p.id, p.text, meta, vec, if_version=0))
        nid = C.namespace_turn_id(session_id, p.id)
        index_meta = {k: meta[k] for k in _INDEX_KEYS}
        if "mentions" in meta:
            index_meta["mentions"] = meta["mentions"]
        index_meta["provenance_class"] = C.PROVENANCE_TURN_INDEX
        puts.append(Put(turns_coll, nid, p.text, index_meta, vec))
        if ok:
            dmeta = {
                **meta,
                "provenance_class": C.PROVENANCE_DURABLE,
                "stability_weight": max(stability_weight(p.role), sig.g),
                "raw_history": False,
            }
            puts.append(Put(user_coll, nid, p.text, dmeta, vec))
            admitted_ids.append(p.id)
    return puts, admitted_ids


def _change_lock(
    svc: IngestHost, ns: str, new: Sequence[_Prepared]
) -> AbstractAsyncContextManager[None]:
    """The namespace lock when a user turn of the batch says a fact changed, else none."""
    if _changing(new):
        return svc.namespace_lock(ns)
    return contextlib.nullcontext()


def _split_new(
    prepared: Sequence[_Prepared], existing: set[str], dead: set[str], raw_coll: str
) -> tuple[list[_Prepared], dict[int, str]]:
    """The messages to store, and why each other one is not."""
    seen: set[str] = set()
    new: list[_Prepared] = []
    skips: dict[int, str] = {}
    for p in prepared:
        if p.id in existing:
            skips[p.index] = SKIP_STORED
        elif p.id in seen:
            skips[p.index] = SKIP_REPEATED
        elif C.tombstone_key(raw_coll, p.id) in dead:
            skips[p.index] = SKIP_FORGOTTEN
        else:
            seen.add(p.id)
            new.append(p)
    return new, skips


def _int(value: object, default: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return int(value) if math.isfinite(value) else default


async def ingest(
    svc: IngestHost,
    session_id: str,
    messages: Sequence[MessageIn],
    *,
    namespace: str | None = None,
    user_id: str | None = None,
    progress: Progress = no_progress,
    advancement_key: str | None = None,
) -> IngestOutcome:
    checked = _validate(session_id, messages)
    key = _validate_key(advancement_key)
    raw_coll = C.session_raw(session_id)
    state_coll = C.session_state(session_id)
    store = svc.store
    async with svc.ingest_lock(session_id):
        state = await store.get(state_coll, INGEST_STATE_ID)
        owner = await stored_owner(store, session_id)  # v1 sessions have one too
        ns = namespace_of_session(session_id, owner, namespace, user_id)
        marker: Put | None = None
        if key is not None:
            marker_id = commit_marker_id(key)
            if await store.get(state_coll, marker_id) is not None:
                given = [m.id or "" for m in messages]
                return IngestOutcome(0, len(checked), given, ns, duplicate=True)
            marker_meta = {
                "type": C.TYPE_COMMIT_MARKER,
                "sessionId": session_id,
                "advancementKey": key,
                "messages": len(checked),
                "committed_at": int(time.time() * 1000),
            }
            # if_version=0: two racing commits of one key cannot both succeed.
            marker = Put(state_coll, marker_id, "", marker_meta, None, if_version=0)
        base = _int(state.metadata.get("next_position")) if state is not None else 0
        now = int(time.time() * 1000)
        prepared: list[_Prepared] = []
        ids: list[str] = []
        for i, (role, text, mid, ts) in enumerate(checked):
            pos = base + i  # a message without text keeps its position: later ids are stable
            if not text.strip():  # e.g. a tool call alone: nothing to remember or embed
                ids.append("")
                continue
            tid = mid if mid is not None else derive_turn_id(session_id, pos, role, text)
            stated = messages[i].durable is True
            prepared.append(_Prepared(i, tid, role, text, now if ts is None else ts, pos, stated))
            ids.append(tid)
        empty = len(checked) - len(prepared)
        existing = {r.id for r in await store.get_many(raw_coll, ids)}
        dead = await store.tombstoned_anywhere(C.tombstone_keys(raw_coll, ids))
        new, skips = _split_new(prepared, existing, dead, raw_coll)
        skipped = len(checked) - len(new)
        if not new:
            if marker is not None:
                await store.write([marker])
            return IngestOutcome(0, skipped, ids, ns, empty=empty, skips=skips)

        vecs = await _embed_reporting(svc, [p.text for p in new], progress)
        near = await proposals(svc.neighbours, _gate_asks(ns, svc.gating), vecs)
        signals, admitted = await asyncio.to_thread(
            _gate_batch, store.store, ns, new, vecs, svc, near
        )
        puts, admitted_ids = _turn_puts(session_id, ns, new, vecs, signals, admitted)
        state_meta = {
            "type": "ingest_state",
            "sessionId": session_id,
            "namespace": ns,
            "next_position": base + len(checked),
            "turn_count": (_int(state.metadata.get("turn_count")) if state else 0) + len(new),
            "updated_at": now,
        }
        version = state.version if state is not None else 0
        puts.append(Put(state_coll, INGEST_STATE_ID, "", state_meta, None, if_version=version))
        if marker is not None:
            puts.append(marker)
        # Change marks patch earlier facts of the namespace (other sessions' too): read and
        # written under the namespace lock, taken only by a batch that states a change.
        async with _change_lock(svc, ns, new):
            changes = await _changes_now(svc, ns, session_id, new, vecs, now)
            ops: list[Put | Patch] = [*puts, *changes]
            await store.write(ops)

    svc.note_ingested(session_id, sum(estimate_tokens(p.text) for p in new))
    return IngestOutcome(
        ingested=len(new),
        skipped=skipped,
        ids=ids,
        namespace=ns,
        admitted=admitted_ids,
        gating={p.id: s for p, s in zip(new, signals, strict=True)},
        empty=empty,
        skips=skips,
    )


async def _changes_now(
    svc: IngestHost, ns: str, session_id: str, new: Sequence[_Prepared], vecs: F32, now: int
) -> list[Patch]:
    """:func:`_changes`, with the neighbours proposed once the namespace lock is held (a
    turn another session stored meanwhile is among them)."""
    changing = _changing(new)
    if not changing:
        return []
    asks = [(C.turns(ns), CHANGE_K, "user")]
    near = await proposals(svc.neighbours, asks, vecs[changing])
    store = svc.store.store
    return await asyncio.to_thread(_changes, store, ns, session_id, new, vecs, now, near)


async def _embed_reporting(svc: IngestHost, texts: list[str], progress: Progress) -> F32:
    """One embedding call for a batch that fits a progress step; a larger batch in steps of
    ``PROGRESS_CHUNK`` texts, reporting after each (a 5,000-message import takes seconds)."""
    if len(texts) <= PROGRESS_CHUNK:
        return await svc.embed(texts, "document")
    parts: list[F32] = []
    for start in range(0, len(texts), PROGRESS_CHUNK):
        parts.append(await svc.embed(texts[start : start + PROGRESS_CHUNK], "document"))
        done = min(start + PROGRESS_CHUNK, len(texts))
        await progress(done, len(texts), "embedding messages")
    return np.concatenate(parts)


def messages_from_wire(items: Sequence[Mapping[str, Any] | Any]) -> list[MessageIn]:
    """``MessageIn`` from wire structs or mappings (role, content, id, ts)."""
    out: list[MessageIn] = []
    for m in items:
        if isinstance(m, Mapping):
            out.append(
                MessageIn(
                    m.get("role", ""),
                    m.get("content"),
                    m.get("id"),
                    m.get("ts"),
                    m.get("durable") is True,
                )
            )
        else:
            out.append(MessageIn(m.role, m.content, m.id, m.ts, m.durable))
    return out
