"""The PostgreSQL store's state and primitives: what its parts receive.

The parts of the PostgreSQL store (``opening``, ``reads``, ``writes``, ``search``,
``time_reads``, ``indexes``, ``bulk``) are functions over a :class:`PgState`: the pool
(``db``: transactions and reads, conn.py), the options the store was opened with, the
collections known to have a valid ANN index, and the presence lock. Two hooks are the
store's to implement (``_after_write``, ``_refresh_indexed``: they wake the indexer and
the bulk load, which are parts themselves). It imports none of the parts, so the parts
depend on it and never on :class:`sidecar.store.pg.store.PgStore`, which is this state
plus the operations of :class:`sidecar.store.core.StoreCore`.
"""

from __future__ import annotations

import abc
import contextlib
from typing import Any

import psycopg

from sidecar.config import StoreSettings
from sidecar.store.core import Closable, check_dims
from sidecar.store.index import AnnParams
from sidecar.store.pg import locks as _locks
from sidecar.store.pg.conn import Db, redact


class PgState(Closable, abc.ABC):
    """The state the PostgreSQL store's parts share, and their primitives."""

    db: Db
    bad_records: dict[tuple[str, str], str]

    def _setup(
        self,
        url: str,
        *,
        embed_dims: int,
        fingerprint: str,
        tiers: tuple[int, ...],
        ann_dims: int | None,
        settings: StoreSettings,
        exact_threshold: int | None,
        model: str,
    ) -> None:
        """The state of a store about to connect to ``url`` (nothing opened yet)."""
        ann = check_dims(embed_dims, tiers, ann_dims)
        s = settings
        self.url, self._location = url, redact(url)
        self.embed_dims, self.fingerprint, self.model = embed_dims, fingerprint, model
        self.tiers, self.ann_dims = tiers, ann
        self.exact_threshold = exact_threshold if exact_threshold is not None else s.exact_threshold
        self.params = AnnParams(
            m=s.hnsw_m,
            ef_construction=s.hnsw_ef_construction,
            ef_search=s.hnsw_ef_search,
            threads=1,
            oversample=s.oversample,
        )
        self._indexed: set[int] = set()  # cids with a valid ANN index (indexes.Plan)
        self._presence: psycopg.Connection[Any] | None = None

    @property
    def location(self) -> str:
        return self._location

    def _keep_presence(self) -> None:
        """Re-take the presence lock if its connection was lost (server restart)."""
        presence = self._presence
        if presence is not None and not presence.closed and not presence.broken:
            return
        with contextlib.suppress(Exception):
            self._presence = _locks.hold_presence(self.db)

    # ---- the store's hooks -------------------------------------------------------------

    @abc.abstractmethod
    def _after_write(self, changed: list[tuple[int, int]]) -> None:
        """A write committed; ``changed``: (cid, records now) of each collection it moved."""

    @abc.abstractmethod
    def _refresh_indexed(self) -> None:
        """Re-read which collections have a valid index and wake the indexer."""
