"""The SQLite store's state and primitives: what its parts receive.

The parts of the SQLite store (``opening``, ``reads``, ``ops``, ``commits``, ``search``,
``time_reads``, ``maintenance``, ``tombstones``, ``scrub``) are functions over a
:class:`SqliteState`: the open database's connections, the collections and their counters
in memory, the vector indexes, the writer thread and the background threads' handles, and
the primitives every part needs (a connection, an immediate transaction, a job on the
writer thread, the next record sequence, a new index). It imports none of the parts, so
the parts depend on it and never on :class:`sidecar.store.store.Store`, which is this
state plus the operations of :class:`sidecar.store.core.StoreCore`.
"""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sidecar.config import StoreSettings
from sidecar.store import names as N
from sidecar.store.core import Closable, closed_future
from sidecar.store.files import DB_NAME, INDEX_DIR, now_ms
from sidecar.store.index import GRAPH_IDLE_S, AnnParams, VectorIndex
from sidecar.store.indexer import Indexer
from sidecar.store.lock import DirLock
from sidecar.store.page_check import PageCheck
from sidecar.store.rows import lenient_text
from sidecar.store.scrub import BUSY_TIMEOUT_MS, SECURE_DELETE, Scrubber
from sidecar.store.session_locks import LocalLocks
from sidecar.store.types import CollectionInfo
from sidecar.store.writer import Tx, Writer


class SqliteState(Closable):
    """The state the SQLite store's parts share, and their primitives."""

    _shut: bool  # SQLite connections closed
    _wconn: sqlite3.Connection  # the writer thread's connection (opening.py opens it)
    _writer: Writer
    _lock: DirLock
    open_report: dict[str, int]

    def _setup(  # noqa: PLR0913 - the options of Store.open
        self,
        data_dir: Path,
        *,
        embed_dims: int,
        fingerprint: str,
        model: str,
        tiers: tuple[int, ...],
        ann_dims: int,
        settings: StoreSettings | None,
        synchronous: str,
        index_threads: int,
        exact_threshold: int | None,
        checkpoint_idle_s: float | None,
    ) -> None:
        """The state of a store about to open ``data_dir`` (nothing opened yet)."""
        self.data_dir = data_dir.expanduser().absolute()
        self.embed_dims = embed_dims
        self.fingerprint = fingerprint
        self.model = model
        self.tiers = tiers
        self.ann_dims = ann_dims
        # One source of defaults: a store opened without settings (benchmarks, tests,
        # tools) builds the same graph as the daemon's.
        s = settings if settings is not None else StoreSettings()
        self.exact_threshold = exact_threshold if exact_threshold is not None else s.exact_threshold
        self.rebuild_fraction = s.rebuild_deleted_fraction
        self.checkpoint_idle_s = (
            checkpoint_idle_s if checkpoint_idle_s is not None else s.checkpoint_idle_s
        )
        self.params = AnnParams(
            m=s.hnsw_m,
            ef_construction=s.hnsw_ef_construction,
            ef_search=s.hnsw_ef_search,
            threads=index_threads,
            oversample=s.oversample,
        )
        self._synchronous = synchronous.upper()
        # the database's page check (page_check.py): before the open returns for a small
        # file, beside the start for one of at least this many bytes, writes waiting
        self.page_check_bytes = s.page_check_background_bytes
        self._pages = PageCheck(self.db_path)
        self._collections: dict[str, CollectionInfo] = {}
        self._by_cid: dict[int, CollectionInfo] = {}
        # (collection, id) -> why: records found damaged on read (skipped, reported once)
        self.bad_records: dict[tuple[str, str], str] = {}
        self._counts: dict[int, int] = {}
        # cid -> collection version (collection_versions): one process owns the directory,
        # so a clock in memory is enough; it starts past every version handed out before
        self._versions: dict[int, int] = {}
        self._vclock = itertools.count(1)
        # cid -> records ever removed (collections.removals); the seq of the last commit
        # applied in memory; both read with the versions under _state_lock
        self._removals: dict[int, int] = {}
        self._state_seq = 0
        self._state_lock = threading.Lock()
        self._session_locks = LocalLocks(str(self.data_dir))
        self._indexes: dict[int, VectorIndex] = {}
        self.graph_idle_s = GRAPH_IDLE_S  # a graph unused this long goes back to its file
        self._seq = 0
        self._applied_seq = 0
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._ckpt_lock = threading.Lock()
        self._last_write = time.monotonic()
        self._last_checkpoint = time.monotonic()
        self._dirty_since_ckpt = False
        self._stop_event = threading.Event()
        self._indexer: Indexer | None = None
        self._ticker: threading.Thread | None = None
        self._scrubber = Scrubber(self._submit)
        # saved graphs loaded ahead of their first search (graph_lazy.prefetch): one at a
        # time, so a core stays free for the request that asked
        self._prefetcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-prefetch")

    # ---- files and connections ---------------------------------------------------------

    @property
    def location(self) -> str:
        return str(self.data_dir)

    @property
    def db_path(self) -> Path:
        return self.data_dir / DB_NAME

    @property
    def index_dir(self) -> Path:
        return self.data_dir / INDEX_DIR

    def _connect(self, read_only: bool) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.db_path, isolation_level=None, check_same_thread=False, timeout=30.0
        )
        conn.text_factory = lenient_text
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute(SECURE_DELETE)  # deleted rows zeroed, not left in free space (scrub.py)
        if read_only:
            conn.execute("PRAGMA query_only = ON")
        return conn

    @contextlib.contextmanager
    def _txn(self, conn: sqlite3.Connection) -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # ---- the writer thread -------------------------------------------------------------

    def _submit(self, fn: Callable[[Tx], Any], raw: bool = False) -> Future[Any]:
        if self._closed:
            return closed_future()
        return self._writer.submit(fn, raw)

    @staticmethod
    def _result(fut: Future[Any]) -> Any:
        return fut.result()

    def _now_ms(self) -> int:
        return now_ms()

    def _alloc_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _persist_seq(self, conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'seq'", (str(self._seq),))

    # ---- collections and their indexes -------------------------------------------------

    def dims_for(self, name: str) -> int:
        """Dimension a collection has (existing) or would get (new), by the naming rule."""
        info = self._collections.get(name)
        return info.dims if info else N.dims_for_collection(name, self.embed_dims)

    def _ann_dims_for(self, dims: int) -> int:
        return self.ann_dims if dims == self.embed_dims else dims

    def _new_index(self, info: CollectionInfo) -> VectorIndex:
        return VectorIndex(
            info.cid, info.name, info.dims, self._ann_dims_for(info.dims), self.params
        )
