"""The write operations inside the writer's transaction: validation of a Put / Patch /
Delete / DropCollection, and what each does to the records, tombstones and index rows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from sidecar.store import commits as _commits
from sidecar.store import names as N
from sidecar.store.common import check_patch_target, check_put_numbers, prepare_change
from sidecar.store.errors import (
    InvalidInput,
    VersionConflict,
)
from sidecar.store.exact import F32
from sidecar.store.record_keys import derived_columns, record_marks, session_key
from sidecar.store.rows import decode_meta, json_encode
from sidecar.store.types import Delete, Op, OpResult, Patch, Put
from sidecar.store.writer import Effect, Tx

if TYPE_CHECKING:
    from sidecar.store.sqlite_state import SqliteState

log = structlog.get_logger(__name__)


# a Put: inserted, or the existing record replaced with its version moved
UPSERT = (
    "INSERT INTO records (cid, id, text, metadata, vector, version, seq, vseq, "
    "created_ms, updated_ms, ts_ms, session_key, marks) "
    "VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, COALESCE(?, ?), ?, ?) "
    "ON CONFLICT (cid, id) DO UPDATE SET text = excluded.text, "
    "metadata = excluded.metadata, vector = excluded.vector, version = version + 1, "
    "seq = excluded.seq, "
    "vseq = CASE WHEN vector IS excluded.vector THEN vseq ELSE excluded.seq END, "
    "updated_ms = excluded.updated_ms, ts_ms = COALESCE(?, created_ms), "
    "session_key = excluded.session_key, marks = excluded.marks "
    "RETURNING rid, version, vseq"
)


def _prepare(store: SqliteState, op: Op) -> Op:
    """Validate an operation in the caller's thread (cheap; nothing touches the DB)."""
    if isinstance(op, Put):
        name = (
            op.collection
            if op.collection in store._collections
            else N.validate_collection(op.collection)
        )
        rid = N.validate_id(op.id)
        text = N.validate_text(op.text)
        meta = N.validate_metadata(op.metadata)
        dims = store.dims_for(name)
        vec: Any = None
        if dims == 1:
            if op.vector is not None:
                arr = N.as_vector(op.vector, 1, name)
                del arr
        else:
            if op.vector is None:
                raise InvalidInput(
                    f"a vector of {dims} dimensions is required for collection {name}"
                )
            vec = N.as_vector(op.vector, dims, name)
        check_put_numbers(op)
        return Put(name, rid, text, meta, vec, op.if_version, op.created_ms)
    return prepare_change(op)


def _apply_op(store: SqliteState, tx: Tx, op: Op) -> OpResult:
    if isinstance(op, Put):
        return _op_put(store, tx, op)
    if isinstance(op, Patch):
        return _op_patch(store, tx, op)
    if isinstance(op, Delete):
        return _op_delete(store, tx, op)
    return _op_drop(store, tx, op.collection)


def _op_put(store: SqliteState, tx: Tx, op: Put) -> OpResult:
    info = _commits._ensure_in_tx(store, tx, op.collection)
    blob: bytes | None = None
    vec: F32 | None = None
    if info.has_vectors:
        vec = op.vector
        if not isinstance(vec, np.ndarray) or vec.shape != (info.dims,):
            vec = N.as_vector(op.vector, info.dims, info.name)
        blob = vec.tobytes()
    if op.if_version is not None:
        row = tx.conn.execute(
            "SELECT version FROM records WHERE cid = ? AND id = ?", (info.cid, op.id)
        ).fetchone()
        actual = None if row is None else int(row[0])
        if (op.if_version == 0 and row is not None) or (
            op.if_version > 0 and actual != op.if_version
        ):
            raise VersionConflict(info.name, op.id, op.if_version, actual)
    seq = tx.next_seq()
    now = tx.now_ms
    ts = N.explicit_ts(op.metadata)
    created = now if op.created_ms is None else op.created_ms
    rid, version, vseq = tx.conn.execute(
        UPSERT,
        (
            info.cid,
            op.id,
            op.text,
            json_encode(op.metadata).decode(),
            blob,
            seq,
            seq,
            created,
            now,
            ts,
            created,
            session_key(op.metadata),
            record_marks(op.metadata),
            ts,
        ),
    ).fetchall()[0]
    if version == 1:
        tx.count(info.cid, 1)
    tx.touch(info.cid)
    if vec is not None and vseq == seq:
        tx.effects.append(Effect("put", info.cid, rid, op.id, vec, seq))
    return OpResult(version, True, version == 1)


def _op_patch(store: SqliteState, tx: Tx, op: Patch) -> OpResult:
    info = tx.lookup(op.collection)
    row = None
    if info is not None:
        row = tx.conn.execute(
            "SELECT rid, version, metadata, text, created_ms FROM records WHERE cid = ? AND id = ?",
            (info.cid, op.id),
        ).fetchone()
    if not check_patch_target(op, None if row is None else int(row[1])):
        return OpResult(0, False)
    assert info is not None and row is not None
    rid, version, meta_raw, text, created = row
    meta = decode_meta(meta_raw)
    meta.update(op.metadata)
    new_version = version + 1 if op.bump_version else version
    tx.conn.execute(
        "UPDATE records SET text = ?, metadata = ?, version = ?, seq = ?, updated_ms = ?, "
        "ts_ms = ?, session_key = ?, marks = ? WHERE rid = ?",
        (
            text if op.text is None else op.text,
            json_encode(meta).decode(),
            new_version,
            tx.next_seq(),
            tx.now_ms,
            *derived_columns(meta, created),
            rid,
        ),
    )
    tx.touch(info.cid)
    return OpResult(new_version, True)


def _op_delete(store: SqliteState, tx: Tx, op: Delete) -> OpResult:
    info = tx.lookup(op.collection)
    if info is None:
        return OpResult(0, False)
    row = tx.conn.execute(
        "SELECT rid FROM records WHERE cid = ? AND id = ?", (info.cid, op.id)
    ).fetchone()
    if row is None:
        return OpResult(0, False)
    tx.conn.execute("DELETE FROM records WHERE rid = ?", (row[0],))
    tx.conn.execute("UPDATE collections SET removals = removals + 1 WHERE cid = ?", (info.cid,))
    tx.next_seq()
    tx.count(info.cid, -1)
    tx.removed[info.cid] = tx.removed.get(info.cid, 0) + 1
    tx.touch(info.cid)
    if info.has_vectors:
        tx.effects.append(Effect("del", info.cid, row[0]))
    return OpResult(0, True)


def _op_drop(store: SqliteState, tx: Tx, name: str) -> OpResult:
    info = tx.lookup(name)
    if info is None:
        return OpResult(0, False)
    tx.conn.execute("DELETE FROM records WHERE cid = ?", (info.cid,))
    tx.conn.execute("DELETE FROM dirty_tiers WHERE cid = ?", (info.cid,))
    tx.conn.execute("DELETE FROM collections WHERE cid = ?", (info.cid,))
    tx.next_seq()
    tx.set_group(name, None)
    tx.effects.append(Effect("drop", info.cid))
    return OpResult(0, True)
