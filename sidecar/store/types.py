"""Value types of the store API."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class CollectionInfo:
    name: str
    cid: int
    dims: int
    kind: str  # "vector" | "vectorless"
    created_ms: int

    @property
    def has_vectors(self) -> bool:
        return self.kind == "vector"


@dataclass(frozen=True, slots=True)
class CollectionState:
    """What a cache of a collection needs to catch up with it (``collection_states``).

    ``cid``: the collection's id (0 when it does not exist; a dropped and re-created
    collection has a new one). ``version``: as ``collection_versions``. ``count``: its
    records. ``removals``: how many records were ever deleted from it (delete, delete_many,
    forget), kept in the database and moved in the transaction of the delete.
    ``max_seq``: a watermark: every record of the collection put or patched in a write
    committed after this state was read has a greater ``seq`` (and every put or patch the
    state reflects has a ``seq`` no greater). A missing collection is all zeros.
    """

    cid: int = 0
    version: int = 0
    count: int = 0
    removals: int = 0
    max_seq: int = 0

    @property
    def exists(self) -> bool:
        return self.cid != 0

    def unchanged_since(self, old: CollectionState) -> bool:
        """Nothing was put, patched or deleted (and no re-creation) since ``old``."""
        return self.cid == old.cid and self.version == old.version

    def appended_since(self, old: CollectionState) -> bool:
        """Only puts and patches since ``old`` (same collection, no removal): a cache
        loaded at ``old`` catches up with ``changed_since(name, old.max_seq)``; otherwise
        it must reload."""
        return self.cid == old.cid != 0 and self.removals == old.removals


@dataclass(slots=True)
class Record:
    collection: str
    id: str
    text: str
    metadata: dict[str, Any]
    version: int
    created_ms: int
    updated_ms: int
    ts_ms: int
    seq: int
    vector: Vector | None = None  # only when asked for (include_vectors=True)


@dataclass(slots=True)
class Hit:
    collection: str
    id: str
    text: str
    metadata: dict[str, Any]
    version: int
    score: float
    created_ms: int = 0
    ts_ms: int = 0


@dataclass(frozen=True, slots=True)
class TimeRange:
    """Half-open interval ``[start_ms, end_ms)`` on the record timestamp.

    The record timestamp is ``metadata.ts`` (milliseconds; a number or a numeric string) when
    present, else the creation time. ``None`` leaves that side open.
    """

    start_ms: int | None = None
    end_ms: int | None = None

    def bounds(self) -> list[tuple[str, int]]:
        """The SQL comparisons of ``ts_ms`` it stands for: ``(">=", start)``, ``("<", end)``."""
        out = [] if self.start_ms is None else [(">=", int(self.start_ms))]
        return out + ([] if self.end_ms is None else [("<", int(self.end_ms))])


# ---- listing by time (list_by_time, count_by_time, time_histogram, time_spans) ----------


@dataclass(frozen=True, slots=True)
class TimeKey:
    """A record's place in newest-first order: ``ts_ms`` descending, then ``collection``
    and ``id`` ascending (byte order). ``list_by_time(after=key)`` continues after it."""

    ts_ms: int
    collection: str
    id: str


@dataclass(frozen=True, slots=True)
class TimeQuery:
    """Which records a listing by time covers: those of ``collections`` (missing ones hold
    none) whose ``metadata.sessionId`` is ``session`` (when given), whose time is within
    ``since_ms``..``until_ms`` (both inclusive; None leaves a side open), and that carry
    none of the ``exclude_marks`` bits (``record_keys``: superseded, internal)."""

    collections: tuple[str, ...]
    session: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    exclude_marks: int = 0


@dataclass(frozen=True, slots=True)
class TimeSpan:
    """A collection's records and their earliest and latest time (None when empty)."""

    count: int = 0
    first_ms: int | None = None
    last_ms: int | None = None


@dataclass(frozen=True, slots=True)
class TimeHistogram:
    """Records per bucket of time (``buckets``: ``ts_ms // width`` -> records) for the times
    within the asked bounds, how many are ``outside`` them, and the earliest and latest
    time within them (None when no record is)."""

    buckets: dict[int, int] = field(default_factory=dict)
    outside: int = 0
    first_ms: int | None = None
    last_ms: int | None = None


# ---- write operations (for Store.write, executed atomically) -------------------------------


@dataclass(frozen=True, slots=True)
class Put:
    """Upsert by (collection, id); bumps the version of an existing record.

    ``if_version``: ``None`` = unconditional; ``0`` = only if the record does not exist;
    ``n > 0`` = only if the stored version is ``n`` (compare-and-swap).
    ``vector`` is required for vector collections and ignored (may be None) for vectorless.
    """

    collection: str
    id: str
    text: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    vector: Any = None
    if_version: int | None = None
    created_ms: int | None = None  # keep a creation time (import); only for new records


@dataclass(frozen=True, slots=True)
class Patch:
    """Merge ``metadata`` into an existing record (new keys override old ones).

    ``text`` replaces the text when not None. Bumps the version unless ``bump_version`` is
    False. ``missing_ok``: a missing record is skipped instead of raising NotFound.
    """

    collection: str
    id: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    text: str | None = None
    if_version: int | None = None
    bump_version: bool = True
    missing_ok: bool = False


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete one record. Idempotent: deleting a missing record is not an error."""

    collection: str
    id: str


@dataclass(frozen=True, slots=True)
class DropCollection:
    """Delete a whole collection and its records. Idempotent."""

    collection: str


Op = Put | Patch | Delete | DropCollection


@dataclass(frozen=True, slots=True)
class OpResult:
    """Outcome of one operation: the record's version after it (0 when absent/deleted)
    and whether something changed (``created`` for puts of new records)."""

    version: int
    changed: bool
    created: bool = False


@dataclass(frozen=True, slots=True)
class ImportStats:
    records: int = 0
    reembedded: int = 0
    without_vector: int = 0
    collections: int = 0
    tombstones: int = 0
    skipped: int = 0  # records dropped by the caller's skip predicate (tombstoned)


@dataclass(frozen=True, slots=True)
class ExportStats:
    records: int = 0
    collections: int = 0
    tombstones: int = 0


@dataclass(frozen=True, slots=True)
class IndexStatus:
    collection: str
    dims: int
    count: int
    # "unloaded" | "saved" (a saved graph, loaded on first use) | "exact" | "hnsw" | "broken"
    mode: str
    ann_count: int
    pending: int
    deleted_fraction: float


@dataclass(frozen=True, slots=True)
class StorageBytes:
    """Space a store takes, in bytes: ``database`` (SQLite file; PostgreSQL tables),
    ``log`` (SQLite WAL and shared memory; 0 for PostgreSQL, whose WAL is the server's)
    and ``indexes`` (saved HNSW graphs; PostgreSQL indexes)."""

    database: int = 0
    log: int = 0
    indexes: int = 0


@dataclass(frozen=True, slots=True)
class ScrubReport:
    """What ``scrub_deleted`` did. ``ran``: something was deleted since the last scrub (if
    not, nothing was done). ``complete``: the database file and its log no longer hold
    the deleted text (False: readers of an older snapshot kept the log busy past the wait;
    the store retries in the background). ``attempts`` and ``seconds``: checkpoint tries
    and the time they took."""

    ran: bool = False
    complete: bool = True
    attempts: int = 0
    seconds: float = 0.0


Names = Sequence[str]


@dataclass(frozen=True, slots=True)
class ListQuery:
    """What ``list_records`` was asked for, as the backends' primitive receives it."""

    where: Mapping[str, Any] | None = None
    time_range: TimeRange | None = None
    limit: int | None = None
    after_id: str | None = None
    include_vectors: bool = False


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """What narrows a ``search``, as the backends' primitive receives it."""

    exclude_ids: Iterable[str] = ()
    where: Mapping[str, Any] | None = None
    time_range: TimeRange | None = None
