"""Writes of the PostgreSQL store: each call is one transaction, committed before it returns.

Operations are validated in the caller's thread first (as the SQLite store does), then run
in the transaction. Compare-and-swap is done by the statement itself (``ON CONFLICT DO
NOTHING`` for "only if absent", ``UPDATE ... WHERE version = n`` otherwise), so two daemons
racing on one record cannot both win. At the end of the transaction every collection it
touched gets its record count adjusted and a fresh ``version`` (the next value of the store
sequence, taken under the row's lock, so it only grows), in cid order (no deadlock between
two writers of the same collections).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg

from sidecar.store import names as N
from sidecar.store.common import check_patch_target, check_put_numbers, counted, prepare_change
from sidecar.store.errors import InvalidInput, VersionConflict
from sidecar.store.files import now_ms
from sidecar.store.pg.codec import filter_json, split_text
from sidecar.store.pg.reads import COLL, info, nul, storable
from sidecar.store.record_keys import derived_columns, record_marks, session_key
from sidecar.store.rows import decode_meta, json_encode
from sidecar.store.types import CollectionInfo, Delete, Op, OpResult, Patch, Put

if TYPE_CHECKING:
    from sidecar.store.pg.state import PgState

Conn = psycopg.Connection[Any]

_INSERT = (
    "INSERT INTO records AS r (cid, id, text, text_raw, metadata, meta, embedding, version, "
    "seq, created_ms, updated_ms, ts_ms, session_key, marks) VALUES (%(cid)s, %(id)s, "
    "%(text)s, %(raw)s, %(md)s, %(meta)s::jsonb, %(vec)s, 1, nextval('seq'), %(created)s, "
    "%(now)s, coalesce(%(ts)s::bigint, %(created)s), %(skey)s, %(marks)s)"
)
_SET = (
    "text = %(text)s, text_raw = %(raw)s, metadata = %(md)s, meta = %(meta)s::jsonb, "
    "embedding = %(vec)s, version = r.version + 1, seq = nextval('seq'), "
    "updated_ms = %(now)s, ts_ms = coalesce(%(ts)s::bigint, r.created_ms), "
    "session_key = %(skey)s, marks = %(marks)s"
)
# PgTx's first lookup: the collection (NULLs when missing) and the sequence's last value
FIRST_LOOKUP = (
    "SELECT c.cid, c.name, c.dims, c.kind, c.created_ms, s.last_value FROM seq s "
    "LEFT JOIN collections c ON c.name = %s"
)
UPSERT = f"{_INSERT} ON CONFLICT (cid, id) DO UPDATE SET {_SET} RETURNING r.version"
INSERT_IF_ABSENT = f"{_INSERT} ON CONFLICT (cid, id) DO NOTHING RETURNING r.version"
UPDATE_IF_VERSION = (
    f"UPDATE records AS r SET {_SET} WHERE r.cid = %(cid)s AND r.id = %(id)s "
    "AND r.version = %(if_version)s RETURNING r.version"
)


def prepare(op: Op) -> Op:
    """Validate in the caller's thread; vector sizes are checked in the transaction, against
    the collection's dimension as stored (another daemon may have created it)."""
    if isinstance(op, Put):
        check_put_numbers(op)
        return Put(
            N.validate_collection(op.collection),
            N.validate_id(op.id),
            N.validate_text(op.text),
            N.validate_metadata(op.metadata),
            op.vector,
            op.if_version,
            op.created_ms,
        )
    return prepare_change(op)


@dataclass(slots=True)
class PgTx:
    """One write transaction: its connection, the collections it has looked up, and what
    it changed per collection (applied to the collection rows by :meth:`finish`)."""

    store: PgState
    conn: Conn
    now_ms: int
    infos: dict[str, CollectionInfo | None] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)
    removed: dict[int, int] = field(default_factory=dict)  # cid -> records deleted
    dropped: set[int] = field(default_factory=set)
    # the store sequence's value at the first lookup, before this transaction took a seq
    # (every write to a collection looks it up first): finish_collection's p_start
    start: int | None = None

    def lookup(self, name: str) -> CollectionInfo | None:
        if name not in self.infos:
            if self.start is None:
                row = self.conn.execute(FIRST_LOOKUP, (name,)).fetchone()
                assert row is not None  # one row: the sequence's
                self.start = int(row[5])
                self.infos[name] = None if row[0] is None else info(row)
            else:
                row = self.conn.execute(COLL + " WHERE name = %s", (name,)).fetchone()
                self.infos[name] = None if row is None else info(row)
        return self.infos[name]

    def ensure(self, name: str) -> CollectionInfo:
        found = self.lookup(name)
        if found is not None:
            return found
        dims = N.dims_for_collection(name, self.store.embed_dims)
        row = None
        while row is None:
            row = self.conn.execute(
                "INSERT INTO collections (name, dims, kind, created_ms) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (name) DO NOTHING RETURNING cid, name, dims, kind, created_ms",
                (name, dims, N.kind_for_dims(dims), self.now_ms),
            ).fetchone()
            if row is None:  # another transaction created it and committed meanwhile
                row = self.conn.execute(COLL + " WHERE name = %s", (name,)).fetchone()
                # (None again: it was dropped as well since; insert anew)
        self.infos[name] = made = info(row)
        return made

    def touch(self, cid: int, delta: int = 0) -> None:
        self.counts[cid] = self.counts.get(cid, 0) + delta

    def finish(self) -> list[tuple[int, int]]:
        """Counts, removal counters and versions of the touched collections (and fresh
        seqs for this transaction's records where another writer committed meanwhile:
        schema ``_FINISH``); returns (cid, n_records)."""
        live = sorted(c for c in self.counts if c not in self.dropped)
        out: list[tuple[int, int]] = []
        start = 0 if self.start is None else self.start
        for cid in live:
            row = self.conn.execute(
                "SELECT finish_collection(%s, %s, %s, %s)",
                (cid, self.counts[cid], self.removed.get(cid, 0), start),
            ).fetchone()
            if row is not None and row[0] is not None:
                out.append((cid, int(row[0])))
        return out


def _vector(op: Put, coll: CollectionInfo) -> Any:
    if not coll.has_vectors:
        if op.vector is not None:
            N.as_vector(op.vector, 1, coll.name)
        return None
    if op.vector is None:
        raise InvalidInput(
            f"a vector of {coll.dims} dimensions is required for collection {coll.name}"
        )
    return N.as_vector(op.vector, coll.dims, coll.name)


def _put_params(tx: PgTx, op: Put, coll: CollectionInfo) -> dict[str, Any]:
    text, raw = split_text(op.text)
    md = json_encode(op.metadata).decode()
    created = tx.now_ms if op.created_ms is None else op.created_ms
    return {
        "cid": coll.cid,
        "id": op.id,
        "text": text,
        "raw": raw,
        "md": md,
        "meta": filter_json(md, op.metadata),
        "vec": _vector(op, coll),
        "created": created,
        "now": tx.now_ms,
        "ts": N.explicit_ts(op.metadata),
        "skey": session_key(op.metadata),
        "marks": record_marks(op.metadata),
        "if_version": op.if_version,
    }


def _actual(tx: PgTx, cid: int, rec_id: str) -> int | None:
    row = tx.conn.execute(
        "SELECT version FROM records WHERE cid = %s AND id = %s", (cid, rec_id)
    ).fetchone()
    return None if row is None else int(row[0])


def _put(tx: PgTx, op: Put) -> OpResult:
    coll = tx.ensure(op.collection)
    params = _put_params(tx, op, coll)
    if op.if_version is None:
        sql = UPSERT
    elif op.if_version == 0:
        sql = INSERT_IF_ABSENT
    else:
        sql = UPDATE_IF_VERSION
    row = tx.conn.execute(sql, params).fetchone()
    if row is None:
        raise VersionConflict(coll.name, op.id, op.if_version or 0, _actual(tx, coll.cid, op.id))
    version = int(row[0])
    tx.touch(coll.cid, 1 if version == 1 else 0)
    return OpResult(version, True, version == 1)


def _put_run(tx: PgTx, run: list[Put]) -> list[OpResult]:
    """Unconditional puts in a row: one pipelined ``executemany`` (bulk loads)."""
    params = [_put_params(tx, op, tx.ensure(op.collection)) for op in run]
    out: list[OpResult] = []
    with tx.conn.cursor() as cur:
        cur.executemany(UPSERT, params, returning=True)
        for p in params:
            row = cur.fetchone()
            assert row is not None
            version = int(row[0])
            tx.touch(p["cid"], 1 if version == 1 else 0)
            out.append(OpResult(version, True, version == 1))
            cur.nextset()
    return out


def _patch(tx: PgTx, op: Patch) -> OpResult:
    coll = tx.lookup(op.collection)
    row = None
    if coll is not None:
        row = tx.conn.execute(
            "SELECT rid, version, metadata, text, text_raw, created_ms FROM records "
            "WHERE cid = %s AND id = %s FOR UPDATE",
            (coll.cid, op.id),
        ).fetchone()
    if not check_patch_target(op, None if row is None else int(row[1])):
        return OpResult(0, False)
    assert coll is not None and row is not None
    rid, version, meta_raw, text, raw, created = row
    meta = decode_meta(meta_raw)
    meta.update(op.metadata)
    md = json_encode(meta).decode()
    new_text, new_raw = (text, raw) if op.text is None else split_text(op.text)
    new_version = version + 1 if op.bump_version else version
    tx.conn.execute(
        "UPDATE records SET text = %s, text_raw = %s, metadata = %s, meta = %s::jsonb, "
        "version = %s, seq = nextval('seq'), updated_ms = %s, ts_ms = %s, session_key = %s, "
        "marks = %s WHERE rid = %s",
        (
            new_text,
            new_raw,
            md,
            filter_json(md, meta),
            new_version,
            tx.now_ms,
            *derived_columns(meta, created),
            rid,
        ),
    )
    tx.touch(coll.cid)
    return OpResult(new_version, True)


def _delete(tx: PgTx, op: Delete) -> OpResult:
    coll = tx.lookup(op.collection)
    if coll is None:
        return OpResult(0, False)
    row = tx.conn.execute(
        "DELETE FROM records WHERE cid = %s AND id = %s RETURNING rid", (coll.cid, op.id)
    ).fetchone()
    if row is None:
        return OpResult(0, False)
    tx.touch(coll.cid, -1)
    tx.removed[coll.cid] = tx.removed.get(coll.cid, 0) + 1
    return OpResult(0, True)


def _drop(tx: PgTx, name: str) -> OpResult:
    coll = tx.lookup(name)
    if coll is None:
        return OpResult(0, False)
    tx.conn.execute("DELETE FROM collections WHERE cid = %s", (coll.cid,))  # records cascade
    tx.conn.execute("SELECT nextval('seq')")
    tx.infos[name] = None
    tx.dropped.add(coll.cid)
    return OpResult(0, True)


def _plain_put(op: Op) -> bool:
    return isinstance(op, Put) and op.if_version is None


def apply_ops(tx: PgTx, ops: Sequence[Op]) -> list[OpResult]:
    out: list[OpResult] = []
    i = 0
    while i < len(ops):
        op = ops[i]
        run: list[Put] = []
        while i < len(ops) and _plain_put(ops[i]):
            run.append(ops[i])  # type: ignore[arg-type]  # _plain_put: a Put
            i += 1
        if run:
            out += _put_run(tx, run) if len(run) > 1 else [_put(tx, run[0])]
            continue
        if isinstance(op, Put):
            out.append(_put(tx, op))
        elif isinstance(op, Patch):
            out.append(_patch(tx, op))
        elif isinstance(op, Delete):
            out.append(_delete(tx, op))
        else:
            out.append(_drop(tx, op.collection))
        i += 1
    return out


def write(store: PgState, ops: Sequence[Op]) -> list[OpResult]:
    """Apply ``ops`` in one transaction: every one or none."""
    store._guard()
    prepared = [prepare(op) for op in ops]
    if not prepared:
        return []
    changed: list[tuple[int, int]] = []

    def run(conn: Conn) -> list[OpResult]:
        tx = PgTx(store, conn, now_ms())
        res = apply_ops(tx, prepared)
        changed[:] = tx.finish()
        if tx.dropped:
            changed.extend((cid, 0) for cid in tx.dropped)
        return res

    results = store.db.transact(run)
    store._after_write(changed)
    return results


def ensure_collections(store: PgState, names: Iterable[str]) -> list[CollectionInfo]:
    store._guard()
    wanted = [N.validate_collection(n) for n in names]

    def run(conn: Conn) -> list[CollectionInfo]:
        tx = PgTx(store, conn, now_ms())
        return [tx.ensure(n) for n in wanted]

    return store.db.transact(run) if wanted else []


def increment(
    store: PgState, updates: Mapping[str, Sequence[str]], key: str = "access_count"
) -> int:
    """``metadata[key] += 1`` for each existing (collection, id); the record's version and
    its collection's version stay (bookkeeping is not an edit)."""
    store._guard()
    plan = [
        (N.validate_collection(c), sorted({N.validate_id(i) for i in ids}))
        for c, ids in updates.items()
    ]

    def run(conn: Conn) -> int:
        n = 0
        for name, ids in plan:
            rows = conn.execute(
                "SELECT rid, metadata, created_ms FROM records WHERE cid = "
                "(SELECT cid FROM collections WHERE name = %s) AND id = ANY(%s) "
                "ORDER BY rid FOR UPDATE",
                (name, ids),
            ).fetchall()
            params = []
            for rid, raw, created in rows:
                meta = counted(decode_meta(raw), key)
                md = json_encode(meta).decode()
                params.append((md, filter_json(md, meta), *derived_columns(meta, created), rid))
            if params:
                # the derived columns follow the metadata (record_keys.py)
                with conn.cursor() as cur:
                    cur.executemany(
                        "UPDATE records SET metadata = %s, meta = %s::jsonb, seq = nextval('seq'), "
                        "ts_ms = %s, session_key = %s, marks = %s WHERE rid = %s",
                        params,
                    )
            n += len(params)
        return n

    return store.db.transact(run) if plan else 0


def add_tombstones(store: PgState, namespace: str, keys: Iterable[str], reason: str = "") -> int:
    store._guard()
    items = [str(k) for k in keys]
    if nul(namespace, *items):
        raise InvalidInput("a tombstone's namespace or key cannot contain a NUL character")
    why = reason.replace("\x00", "\ufffd")

    def run(conn: Conn) -> int:
        now = now_ms()
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO tombstones (namespace, key, reason, created_ms) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (namespace, key) DO UPDATE SET "
                "reason = excluded.reason, created_ms = excluded.created_ms",
                [(namespace, k, why, now) for k in items],
            )
        return len(items)

    return store.db.transact(run) if items else 0


def remove_tombstones(store: PgState, namespace: str, keys: Iterable[str] | None = None) -> int:
    store._guard()
    if nul(namespace):
        return 0
    items = None if keys is None else storable(str(k) for k in keys)

    def run(conn: Conn) -> int:
        if items is None:
            cur = conn.execute("DELETE FROM tombstones WHERE namespace = %s", (namespace,))
        else:
            cur = conn.execute(
                "DELETE FROM tombstones WHERE namespace = %s AND key = ANY(%s)",
                (namespace, items),
            )
        return cur.rowcount

    return store.db.transact(run)
