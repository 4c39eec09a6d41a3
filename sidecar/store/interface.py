"""The one store interface, implemented by both backends.

:class:`StoreBackend` lists what the layers above the store call: it is the store core
(:class:`sidecar.store.core.StoreCore`, where each method is declared once, with what both
backends do alike written there); the embedded SQLite + hnswlib
:class:`sidecar.store.store.Store` (the default) and the PostgreSQL + pgvector
:class:`sidecar.store.pg.store.PgStore` subclass it with the same semantics (docs/store.md,
"PostgreSQL backend", says where they differ and why). Open either with
:func:`sidecar.store.backend.open_store`.

Two methods exist for several daemons sharing one database (a PostgreSQL store):

* :meth:`StoreBackend.collection_versions` gives, per collection, a number that changes
  whenever a record of the collection is put, patched or deleted, or the collection is
  created or dropped, by any process. A cache that remembers the number it loaded at is
  stale exactly when the number differs. ``increment`` (access counts) does not change it,
  as it does not change the record's version: bookkeeping is not an edit.
* :meth:`StoreBackend.collection_states` and :meth:`StoreBackend.changed_since` let such a
  cache catch up in O(changes): the state says whether only puts and patches happened
  since the one it loaded at (its ``removals`` counter did not move), and
  ``changed_since(name, state.max_seq)`` reads them.
* :meth:`StoreBackend.session_lock` excludes every other holder of the same key, in this
  process or (PostgreSQL) any other daemon on the database, until the block exits: what
  compaction and forget take so that two daemons never work on one session at once.
"""

from __future__ import annotations

from sidecar.store.core import EmbedFn, Progress, SessionLease, SkipFn, StoreCore

StoreBackend = StoreCore

__all__ = ["EmbedFn", "Progress", "SessionLease", "SkipFn", "StoreBackend"]
