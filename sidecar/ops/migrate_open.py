"""Both ends of ``libravdb migrate``: what a location names, the identity a store records
(embedding fingerprint, model, dimension), and opening either end for the copy.

A location is ``sqlite:DIR`` (or a plain directory) or a ``postgresql://`` /
``postgres://`` URL. The source's identity is read before it is opened, straight from its
``meta`` table (SQLite read-only; PostgreSQL one query), so that it opens with exactly the
dimension and fingerprint its vectors were written with, whatever model is configured here.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sidecar.config import SQLITE_SCHEME, is_postgres_url, mask_url
from sidecar.store.files import DB_NAME
from sidecar.store.interface import StoreBackend


class MigrateError(Exception):
    """What stops a migration, said in one line with what to do."""


@dataclass(frozen=True, slots=True)
class Location:
    """One end of a migration."""

    raw: str  # as given (a URL may hold a password: never print it, use ``shown``)
    postgres: bool
    path: Path | None = None  # the SQLite data directory

    @property
    def shown(self) -> str:
        return mask_url(self.raw) if self.postgres else f"sqlite:{self.path}"

    @property
    def store_location(self) -> str | Path:
        if self.postgres:
            return self.raw
        assert self.path is not None
        return self.path

    def same_as(self, other: Location) -> bool:
        if self.postgres or other.postgres:
            return self.raw == other.raw
        return self.path == other.path


def parse_location(raw: str) -> Location:
    """``sqlite:DIR``, a directory, or a PostgreSQL URL."""
    text = raw.strip()
    if not text:
        raise MigrateError("a location is empty: give sqlite:DIR or postgresql://...")
    if is_postgres_url(text):
        from sidecar.config import ConfigError, check_store_url

        try:
            check_store_url(text)
        except ConfigError as exc:
            raise MigrateError(str(exc)) from None
        return Location(text, True)
    if "://" in text:
        raise MigrateError(f"{mask_url(text)!r} is neither sqlite:DIR nor a postgresql:// URL")
    if text.lower().startswith(SQLITE_SCHEME):
        text = text[len(SQLITE_SCHEME) :]
    return Location(raw, False, Path(text).expanduser().absolute())


@dataclass(frozen=True, slots=True)
class Identity:
    """What a store records about the vectors it holds (its ``meta``)."""

    fingerprint: str = ""
    model: str = ""
    embed_dims: int = 0
    profile: dict[str, Any] | None = None
    exists: bool = False  # a store was found at all


def read_identity(where: Location) -> Identity:
    meta = _pg_meta(where.raw) if where.postgres else _sqlite_meta(where)
    if meta is None:
        return Identity()
    dims = meta.get("embed_dims", "")
    profile: dict[str, Any] | None = None
    if meta.get("profile"):
        import json

        try:
            loaded = json.loads(meta["profile"])
        except ValueError:
            loaded = None
        profile = loaded if isinstance(loaded, dict) else None
    return Identity(
        fingerprint=meta.get("fingerprint", ""),
        model=meta.get("model", ""),
        embed_dims=int(dims) if dims.isdigit() else 0,
        profile=profile,
        exists=True,
    )


def _sqlite_meta(where: Location) -> dict[str, str] | None:
    assert where.path is not None
    db = where.path / DB_NAME
    if not db.is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{quote(str(db))}?mode=ro", uri=True, timeout=5.0)
        try:
            return {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise MigrateError(f"cannot read {db}: {exc}") from None


def _pg_meta(url: str) -> dict[str, str] | None:
    import psycopg
    from psycopg import errors as pge

    from sidecar.store.pg.conn import SCHEMA

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            rows = conn.execute(f"SELECT key, value FROM {SCHEMA}.meta").fetchall()
    except pge.UndefinedTable:
        return None
    except psycopg.Error as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MigrateError(f"cannot read the database {mask_url(url)}: {detail}") from None
    return {str(k): str(v) for k, v in rows}


def open_end(where: Location, ident: Identity, embed_dims: int) -> StoreBackend:
    """Open one end with the source's identity. No background indexing: a daemon builds
    the vector indexes when it starts on the result."""
    from sidecar.store import page_check
    from sidecar.store.backend import open_store
    from sidecar.store.errors import StoreError

    kwargs: dict[str, Any] = {
        "embed_dims": embed_dims,
        "fingerprint": ident.fingerprint,
        "model": ident.model,
        "background": False,
        "settings": page_check.offline(),
    }
    if ident.profile is not None:
        kwargs["profile"] = ident.profile
    try:
        return open_store(where.store_location, **kwargs)
    except StoreError as exc:
        raise MigrateError(f"{where.shown}: {exc.message}") from None
