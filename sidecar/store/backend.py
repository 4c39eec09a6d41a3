"""Opening a store by location: a ``postgresql://`` (or ``postgres://``) URL opens the
PostgreSQL + pgvector backend; anything else is a data directory for the embedded SQLite
store (``sqlite:DIR`` names one explicitly). The PostgreSQL modules and their driver are
imported only when such a URL is opened."""

from __future__ import annotations

import os
from typing import Any

from sidecar.store.interface import EmbedFn, Progress, StoreBackend
from sidecar.store.reembed_job import ReembedArgs, ReembedStats
from sidecar.store.store import Store

PG_SCHEMES = ("postgresql://", "postgres://")
SQLITE_PREFIX = "sqlite:"


def is_store_url(location: object) -> bool:
    """True for a PostgreSQL URL (the SQLite store takes a directory)."""
    return isinstance(location, str) and location.startswith(PG_SCHEMES)


def sqlite_dir(location: str | os.PathLike[str]) -> str | os.PathLike[str]:
    """The data directory of a SQLite location (``sqlite:DIR`` or ``DIR``)."""
    if isinstance(location, str) and location.startswith(SQLITE_PREFIX):
        return location[len(SQLITE_PREFIX) :]
    return location


def open_store(location: str | os.PathLike[str], **kwargs: Any) -> StoreBackend:
    """Open the store at ``location`` with :meth:`Store.open`'s keyword arguments (the
    PostgreSQL store also takes ``pool_size`` and ``timeout``)."""
    if is_store_url(location):
        from sidecar.store.pg.store import PgStore

        return PgStore.open(str(location), **kwargs)
    return Store.open(sqlite_dir(location), **kwargs)


def reembed(
    location: str | os.PathLike[str],
    embed: EmbedFn,
    fingerprint: str,
    progress: Progress | None = None,
    *,
    embed_dims: int | None = None,
    batch: int = 64,
    model: str = "",
) -> ReembedStats:
    """``libravdb reembed``: re-embed every vector record of the store at ``location``
    (either backend; the design is in :mod:`sidecar.store.reembed`) with ``embed``.

    ``embed(texts) -> array (len(texts), D)``; ``fingerprint``: the current model's;
    ``model``: its name, for messages. ``embed_dims``: D (probed with one call when None).
    Collections sized by the embedder take the new D; Matryoshka tier collections
    (``:64d``/``:256d``) take the re-normalized prefix. ``progress(done, total)`` is called
    after each batch.
    """
    args = ReembedArgs(embed, fingerprint, progress, embed_dims, batch, model)
    if is_store_url(location):
        from sidecar.store.pg.reembed import reembed as pg_reembed

        return pg_reembed(str(location), args)
    from sidecar.store.reembed import reembed as sqlite_reembed

    return sqlite_reembed(sqlite_dir(location), args)
