"""The rows of a cached collection view in compact form, and their candidates on demand.

A view used to keep, per record, the store's :class:`~sidecar.store.types.Record` and the
planner's :class:`~sidecar.assembly.candidates.Candidate`, sharing the decoded metadata
dict: about 3.4 KB of Python objects a record (a durable memory's 25-key dict alone took
1.8 KB, its key strings repeated in every row). A request reads a few hundred of a large
view's rows, so :class:`ViewRows` keeps what every row needs in compact form and builds a
row's record or candidate only when it is asked for:

* ids and texts (the candidate's: the record's text, else ``metadata.text``), one
  string each, and the metadata as compact JSON bytes;
* the record's numbers (``seq``, version, times) and the candidate's (kind, role and
  session as codes into small tables, ``metadata.seq``, its time) in typed arrays,
  8 bytes or less a value.

Lean rows (a view the store's index ranks) keep no metadata at all: the few rows a
request makes candidates of read theirs from the store (``CollectionView.candidates``),
and every walk over the rows reads only the arrays and strings above.

:func:`candidate_of` is the one place a record becomes a candidate: the load computes a
row's fields from it (:func:`row_fields`), and :meth:`ViewRows.record` rebuilds the
record they were computed from, so a candidate made later is the one the load would have
made (the JSON round trip of metadata read from JSON gives an equal dict, key order
included).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar, overload

import msgspec
import numpy as np
import numpy.typing as npt

from sidecar.assembly.candidates import Candidate
from sidecar.memory.core import layout as C
from sidecar.memory.core.tokens import estimate_tokens
from sidecar.store.rows import Columns
from sidecar.store.types import Record

F32 = npt.NDArray[np.float32]
#: A view's matrix: float32 rows, or float16 for a view the store's index ranks
#: (``CollectionView.ann``; half the bytes, docs/store.md "Half-precision matrices").
Matrix = npt.NDArray[np.float32] | npt.NDArray[np.float16]
FULL = np.dtype(np.float32)
HALF = np.dtype(np.float16)
T = TypeVar("T")

_SCOPE_OF_PREFIX: tuple[tuple[str, str, str], ...] = (
    (C.TURNS_PREFIX, "history", "turn"),
    (C.USER_PREFIX, "durable", "memory"),
    (C.DREAM_PREFIX, "dream", "dream"),
    (C.SESSION_SUMMARY_PREFIX, "summary", "summary"),
    (C.SESSION_RAW_PREFIX, "session", "turn"),
    (C.ELEVATED_USER_PREFIX, "elevated", "guidance"),
    (C.ELEVATED_SESSION_PREFIX, "elevated", "guidance"),
    (C.AUTHORED_VARIANT, "authored", "authored"),
    (C.GLOBAL, "global", "memory"),
)


def scope_of(collection: str) -> tuple[str, str]:
    """``(scope, kind)`` of a collection's records."""
    for prefix, scope, kind in _SCOPE_OF_PREFIX:
        if collection.startswith(prefix):
            return scope, kind
    return "history", "memory"


def as_int(v: object) -> int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return int(v)


def as_str(v: object) -> str:
    return v if isinstance(v, str) else ""


def lineage(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    """A summary's lineage fields: the ``continuity_lineage`` block over the top level."""
    block = meta.get("continuity_lineage")
    return {**meta, **block} if isinstance(block, dict) else meta


class RowFields(NamedTuple):
    """What a candidate takes from its record besides the id, the vector and the token
    count (:func:`row_fields`)."""

    kind: str
    session_id: str
    role: str
    text: str
    ts: int | None
    seq: int | None
    source_turn_id: str


def row_fields(name: str, r: Record) -> RowFields:
    """The candidate fields of record ``r`` of collection ``name`` (:func:`candidate_of`;
    a view's load keeps these without building the candidate)."""
    _scope, kind = scope_of(name)
    meta = r.metadata
    if meta.get("type") == C.TYPE_SUMMARY:
        kind = "summary"
    # A summary's time is the latest event it covers, not when it was compacted.
    ts = as_int(meta.get("source_ts_max")) if kind == "summary" else None
    ts = ts if ts is not None else as_int(meta.get("ts"))
    return RowFields(
        kind=kind,
        session_id=as_str(meta.get("sessionId")) or (C.session_id_of(name) or ""),
        role=as_str(meta.get("role")),
        text=r.text or as_str(meta.get("text")),
        ts=ts if ts is not None else (r.ts_ms or None),
        seq=as_int(meta.get("seq")),
        source_turn_id=as_str(meta.get("source_turn_id")),
    )


def record_texts(texts: Sequence[str], own_text: Sequence[int]) -> list[str]:
    """Each row's stored record text: its candidate text where the record has its own
    (``own_text``), else empty (the candidate took ``metadata.text``)."""
    return [t if own else "" for t, own in zip(texts, own_text, strict=True)]


def candidate_of(name: str, r: Record, vec: F32, has_vector: bool | None = None) -> Candidate:
    """The candidate of record ``r`` of collection ``name`` whose unit vector is ``vec``
    (``has_vector``: whether it is not all zeros, when the caller knows)."""
    f = row_fields(name, r)
    kind, src = f.kind, f.source_turn_id
    if kind == "turn":
        turn_ids: tuple[str, ...] = (src or r.id,)
    elif kind == "summary":
        # The lineage block holds the covered turns (the top level keeps the reference's
        # summary shape); parents are resolved transitively by the view.
        meta = lineage(r.metadata)
        turn_ids = tuple(x for x in meta.get("source_turn_ids", ()) if isinstance(x, str))
    else:
        turn_ids = (src,) if src else ()
    return Candidate(
        kind=kind,
        collection=name,
        id=r.id,
        text=f.text,
        scope=scope_of(name)[0],
        turn_ids=turn_ids,
        session_id=f.session_id,
        role=f.role,
        ts=f.ts,
        seq=f.seq,
        vector=vec if (bool(np.any(vec)) if has_vector is None else has_vector) else None,
        tokens=estimate_tokens(f.text),
        metadata=r.metadata,
    )


#: A lean row's metadata (no JSON is empty: ``{}`` at least).
NO_META = b""
#: Stands for None in the arrays of optional numbers.
NONE = -(1 << 63)
KINDS: tuple[str, ...] = ("turn", "summary", "memory", "authored", "guidance", "dream")
TURN, SUMMARY = 0, 1


class _Codes:
    """Strings that repeat across rows (roles, sessions), each kept once."""

    __slots__ = ("code", "names")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.code: dict[str, int] = {}

    def of(self, name: str) -> int:
        c = self.code.get(name)
        if c is None:
            c = self.code[name] = len(self.names)
            self.names.append(name)
        return c


def _opt(v: int | None) -> int:
    return NONE if v is None else v


class ViewRows:
    """Every row of a view, compactly (module doc). Rows are appended or rewritten in
    place; a rewrite or a new layout is the caller's to announce to its caches."""

    __slots__ = (
        "chars",
        "created",
        "has_vector",
        "ids",
        "kind",
        "lean",
        "metas",
        "own_text",
        "role",
        "roles",
        "seq",
        "session",
        "sessions",
        "texts",
        "ts",
        "ts_ms",
        "turn_seq",
        "updated",
        "version",
    )

    def __init__(self, lean: bool = False) -> None:
        self.ids: list[str] = []
        self.texts: list[str] = []  # the candidate's text
        # lean: no metadata kept (each b""), the store has it (CollectionView.candidates)
        self.lean = lean
        self.metas: list[bytes] = []  # metadata, compact JSON
        self.own_text = bytearray()  # 1: the record's text is texts[i], 0: it was ""
        self.has_vector = bytearray()
        self.kind = bytearray()  # index into KINDS
        self.roles, self.sessions = _Codes(), _Codes()
        self.role = array("I")
        self.session = array("I")
        self.turn_seq = array("q")  # the candidate's seq (metadata.seq) or NONE
        self.ts = array("q")  # the candidate's time or NONE
        self.seq = array("q")  # the record's: store seq, version, times
        self.version = array("q")
        self.created = array("q")
        self.updated = array("q")
        self.ts_ms = array("q")
        self.chars = 0  # characters of the ids, texts and metadata (for nbytes)

    def __len__(self) -> int:
        return len(self.ids)

    def append(self, r: Record, c: RowFields, has_vector: bool) -> None:
        """A new last row: record ``r`` (its metadata as read), its candidate's fields
        ``c`` (:func:`row_fields`) and whether its vector is not all zeros."""
        meta = NO_META if self.lean else _encode(r.metadata)
        self.chars += len(r.id) + len(c.text) + len(meta)
        self.ids.append(r.id)
        self.texts.append(c.text)
        self.metas.append(meta)
        self.own_text.append(1 if r.text else 0)
        self.has_vector.append(1 if has_vector else 0)
        self.kind.append(KINDS.index(c.kind))
        self.role.append(self.roles.of(c.role))
        self.session.append(self.sessions.of(c.session_id))
        self.turn_seq.append(_opt(c.seq))
        self.ts.append(_opt(c.ts))
        self.seq.append(r.seq)
        self.version.append(r.version)
        self.created.append(r.created_ms)
        self.updated.append(r.updated_ms)
        self.ts_ms.append(r.ts_ms)

    def extend(self, name: str, recs: Sequence[Record], has_vector: Sequence[bool]) -> None:
        """:meth:`append` of each of ``recs`` (records of collection ``name``) in turn,
        each typed array extended once (a load's page: a method call per value cost a
        third of the load)."""
        fields = [row_fields(name, r) for r in recs]
        metas = [NO_META] * len(recs) if self.lean else [_encode(r.metadata) for r in recs]
        self.chars += sum(
            len(r.id) + len(c.text) + len(m) for r, c, m in zip(recs, fields, metas, strict=True)
        )
        self.ids.extend(r.id for r in recs)
        self.texts.extend(c.text for c in fields)
        self.metas.extend(metas)
        self.own_text.extend(1 if r.text else 0 for r in recs)
        self.has_vector.extend(1 if h else 0 for h in has_vector)
        kind = {k: i for i, k in enumerate(KINDS)}
        self.kind.extend(kind[c.kind] for c in fields)
        roles, sessions = self.roles.of, self.sessions.of
        self.role.extend([roles(c.role) for c in fields])
        self.session.extend([sessions(c.session_id) for c in fields])
        self.turn_seq.extend([NONE if c.seq is None else c.seq for c in fields])
        self.ts.extend([NONE if c.ts is None else c.ts for c in fields])
        self.seq.extend([r.seq for r in recs])
        self.version.extend([r.version for r in recs])
        self.created.extend([r.created_ms for r in recs])
        self.updated.extend([r.updated_ms for r in recs])
        self.ts_ms.extend([r.ts_ms for r in recs])

    def extend_columns(
        self, name: str, cols: Columns, metas: Sequence[MetaFields], has_vector: Sequence[bool]
    ) -> None:
        """:meth:`extend` of a page read as columns (``metas``: the keys :func:`row_fields`
        reads, decoded from ``cols.metas``): the same rows, without a record per row or
        its whole metadata decoded. ``metas`` keeps the JSON as stored, which is what
        :meth:`extend` encodes: the store writes it with the same encoder, and what it
        decodes it encodes back to the same text."""
        _scope, base = scope_of(name)
        base_code = KINDS.index(base)
        own_session = C.session_id_of(name) or ""
        role_code, session_code = self.roles.code, self.sessions.code
        kind, role, session = bytearray(), array("I"), array("I")
        turn_seq, ts, texts = array("q"), array("q"), []
        # row_fields inlined, and as_int in it (a JSON value's type is exactly int or
        # float, a bool is neither): a call per row and value cost as much as the rest
        for m, text, ts_ms in zip(metas, cols.texts, cols.ts, strict=True):
            summary = base_code == SUMMARY or m.type == C.TYPE_SUMMARY
            kind.append(SUMMARY if summary else base_code)
            v = m.source_ts_max if summary else None
            t = v if type(v) is int else int(v) if type(v) is float else None
            if t is None:
                v = m.ts
                t = v if type(v) is int else int(v) if type(v) is float else None
            if t is None:
                t = ts_ms or None
            ts.append(NONE if t is None else t)
            v = m.seq
            turn_seq.append(v if type(v) is int else int(v) if type(v) is float else NONE)
            v = m.sessionId
            v = v if type(v) is str and v else own_session
            c = session_code.get(v)
            session.append(self.sessions.of(v) if c is None else c)
            v = m.role if type(m.role) is str else ""
            c = role_code.get(v)
            role.append(self.roles.of(v) if c is None else c)
            texts.append(text or (m.text if type(m.text) is str else ""))
        raw = [NO_META] * len(cols.metas) if self.lean else [m.encode() for m in cols.metas]
        self.chars += sum(map(len, cols.ids)) + sum(map(len, texts)) + sum(map(len, raw))
        self.ids.extend(cols.ids)
        self.texts.extend(texts)
        self.metas.extend(raw)
        self.own_text.extend([1 if t else 0 for t in cols.texts])
        self.has_vector.extend([1 if h else 0 for h in has_vector])
        self.kind.extend(kind)
        self.role.extend(role)
        self.session.extend(session)
        self.turn_seq.extend(turn_seq)
        self.ts.extend(ts)
        self.seq.extend(cols.seqs)
        self.version.extend(cols.versions)
        self.created.extend(cols.created)
        self.updated.extend(cols.updated)
        self.ts_ms.extend(cols.ts)

    def rewrite(self, i: int, r: Record, c: RowFields, has_vector: bool) -> None:
        """Row ``i`` replaced by record ``r`` (same id), as :meth:`append`."""
        meta = NO_META if self.lean else _encode(r.metadata)
        self.chars += len(c.text) + len(meta) - len(self.texts[i]) - len(self.metas[i])
        self.texts[i] = c.text
        self.metas[i] = meta
        self.own_text[i] = 1 if r.text else 0
        self.has_vector[i] = 1 if has_vector else 0
        self.kind[i] = KINDS.index(c.kind)
        self.role[i] = self.roles.of(c.role)
        self.session[i] = self.sessions.of(c.session_id)
        self.turn_seq[i] = _opt(c.seq)
        self.ts[i] = _opt(c.ts)
        self.seq[i] = r.seq
        self.version[i] = r.version
        self.created[i] = r.created_ms
        self.updated[i] = r.updated_ms
        self.ts_ms[i] = r.ts_ms

    def share_strings(self, twin: ViewRows, twin_rows: Mapping[str, int]) -> None:
        """Take ``twin``'s string objects for the ids, and the texts equal to its own, of
        the rows it holds too (``twin_rows``: its row by id): a durable memory and its
        history turn have the same id and text, so a durable view keeps no copy of either
        (about 330 bytes a row)."""
        ids, texts, tids, ttexts = self.ids, self.texts, twin.ids, twin.texts
        for i, rid in enumerate(ids):
            j = twin_rows.get(rid)
            if j is not None:
                ids[i] = tids[j]
                if (t := ttexts[j]) == texts[i]:
                    texts[i] = t

    def record_text(self, i: int) -> str:
        """The stored record's own text (empty when the candidate took ``metadata.text``)."""
        return self.texts[i] if self.own_text[i] else ""

    def record_texts(self) -> list[str]:
        """Every row's :meth:`record_text`, in row order (one pass, for a view's load)."""
        return record_texts(self.texts, self.own_text)

    def texts_not_in(self, before: ViewRows) -> tuple[list[str], list[tuple[str, str]]]:
        """The ids of ``before`` whose record text changed or went, and the ``(id, text)``
        of these rows ``before`` does not hold as they are (every row when it is empty)."""
        if not len(before):
            return [], list(zip(self.ids, self.record_texts(), strict=True))
        old = dict(zip(before.ids, before.record_texts(), strict=True))
        new = dict(zip(self.ids, self.record_texts(), strict=True))
        gone = [rid for rid, text in old.items() if new.get(rid) != text]
        return gone, [item for item in new.items() if old.get(item[0]) != item[1]]

    def metadata(self, i: int) -> dict[str, Any]:
        """A new dict of row ``i``'s metadata (LookupError: lean rows keep none)."""
        if self.lean:
            raise LookupError("lean rows keep no metadata: the store has it")
        meta: dict[str, Any] = _decode(self.metas[i])
        return meta

    def drop_metas(self) -> None:
        """Keep no metadata from now on (a view grown large enough to be lean)."""
        if not self.lean:
            self.chars -= sum(map(len, self.metas))
            self.metas = [NO_META] * len(self.metas)
            self.lean = True

    def record(self, name: str, i: int, metadata: dict[str, Any] | None = None) -> Record:
        """The record row ``i`` was loaded from (without its vector: the view's matrix
        holds it); ``metadata``: its metadata read from the store (lean rows)."""
        return Record(
            collection=name,
            id=self.ids[i],
            text=self.record_text(i),
            metadata=self.metadata(i) if metadata is None else metadata,
            version=self.version[i],
            created_ms=self.created[i],
            updated_ms=self.updated[i],
            ts_ms=self.ts_ms[i],
            seq=self.seq[i],
        )

    def kind_of(self, i: int) -> str:
        return KINDS[self.kind[i]]

    def role_of(self, i: int) -> str:
        return self.roles.names[self.role[i]]

    def session_of(self, i: int) -> str:
        return self.sessions.names[self.session[i]]

    def rows_of_kind(self, code: int) -> list[int]:
        """The rows of candidates of kind ``KINDS[code]``, ascending."""
        kinds = np.frombuffer(bytes(self.kind), dtype=np.uint8)
        return [int(i) for i in np.flatnonzero(kinds == code).tolist()]

    @property
    def nbytes(self) -> int:
        """An estimate of what the rows hold: the strings' characters, their objects, the
        arrays and the view's maps over them (:data:`ROW_OVERHEAD` a row); O(1)."""
        return self.chars + len(self.ids) * (ROW_OVERHEAD - (STRING if self.lean else 0))


#: A string object's bytes beside its characters, and its list slot.
STRING = 58
#: Bytes per row beside the strings' characters: three string objects (two in lean rows,
#: whose metadata slots all hold the one empty bytes), 7 typed-array values and 3 byte
#: flags, and the view's ``by_id`` and ``by_pos`` entries (about 100 bytes each).
ROW_OVERHEAD = 3 * STRING + 7 * 8 + 3 + 2 * 100


# msgspec, as the store decodes it: 10x faster than the json module both ways, and what
# it decodes it encodes back to the same text (the store's JSON has no NaN or infinity)
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class MetaFields(msgspec.Struct):
    """The metadata keys :func:`row_fields` reads (absent: None, as ``dict.get``); the
    decoder skips the others, a third of the cost of the whole dict."""

    type: Any = None
    sessionId: Any = None
    role: Any = None
    text: Any = None
    ts: Any = None
    source_ts_max: Any = None
    seq: Any = None


decode_fields = msgspec.json.Decoder(MetaFields).decode


class RowsView(Protocol):
    """What :class:`RecordRows` and :class:`CandidateRows` read of a view
    (:class:`~sidecar.assembly.cache.CollectionView`)."""

    name: str
    rows: ViewRows

    def candidate(self, i: int) -> Candidate: ...

    def record(self, i: int) -> Record: ...


class _BuiltRows(Sequence[T]):
    """A view's rows as items built from them on read (``_item``); what the view keeps
    is its arrays, not these objects."""

    __slots__ = ("_view",)

    def __init__(self, view: RowsView) -> None:
        self._view = view

    def _item(self, j: int) -> T:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._view.rows)

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            return [self._item(j) for j in range(*i.indices(len(self)))]
        return self._item(_index(i, len(self)))

    def __iter__(self) -> Iterator[T]:
        return (self._item(j) for j in range(len(self)))


class RecordRows(_BuiltRows[Record]):
    """A view's rows as the store's records (:meth:`ViewRows.record`, built per read)."""

    __slots__ = ()

    def _item(self, j: int) -> Record:
        return self._view.record(j)


class CandidateRows(_BuiltRows[Candidate]):
    """A view's rows as candidates (:meth:`CollectionView.candidate`: built on first use,
    then the same object)."""

    __slots__ = ()

    def _item(self, j: int) -> Candidate:
        return self._view.candidate(j)


def _index(i: int, n: int) -> int:
    j = i + n if i < 0 else i
    if not 0 <= j < n:
        raise IndexError(i)
    return j
