"""The backup format: a directory holding a copy of the store's database, the authored
watcher's state when there is one, and ``manifest.json`` describing both.

A directory rather than a bare SQLite file because restore must be able to tell, before it
touches anything, that the copy is whole (size and sha256 of every file), which store it
came from (schema version, embedding fingerprint and model) and what it holds (records,
collections): a truncated or altered copy is refused, not restored.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from pathlib import Path
from typing import Any

import msgspec

from sidecar.store.files import DB_NAME

FORMAT = "libravdb-backup"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
# The authored watcher's record of which files it ingested (sidecar/memory/authored/
# watcher.py STATE_FILE); named here because ops must not reach into the watcher for it.
WATCH_STATE_NAME = "authored_watch.json"


class BackupError(Exception):
    """A backup or restore refused or failed; printed as one line, exit status 1."""


class BackupFile(msgspec.Struct, frozen=True):
    name: str
    bytes: int
    sha256: str


class Manifest(msgspec.Struct, frozen=True):
    format: str
    format_version: int
    created_ms: int
    libravdb_version: str
    source_data_dir: str
    schema_version: int
    fingerprint: str
    model: str
    embed_dims: int
    seq: int
    records: int
    collections: int
    tombstones: int
    files: list[BackupFile]

    def file(self, name: str) -> BackupFile | None:
        return next((f for f in self.files if f.name == name), None)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def describe_file(path: Path) -> BackupFile:
    return BackupFile(path.name, path.stat().st_size, sha256_of(path))


def fsync_path(path: Path) -> None:
    """Flush a file's (or a directory's entries') data to disk."""
    flags = os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_manifest(directory: Path, manifest: Manifest) -> None:
    path = directory / MANIFEST_NAME
    path.write_bytes(msgspec.json.format(msgspec.json.encode(manifest), indent=2) + b"\n")
    os.chmod(path, 0o600)
    fsync_path(path)


def database_facts(conn: sqlite3.Connection) -> dict[str, Any]:
    """What a store database holds, read from one connection (one snapshot)."""
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    return {
        "schema_version": int(conn.execute("PRAGMA user_version").fetchone()[0]),
        "fingerprint": str(meta.get("fingerprint", "")),
        "model": str(meta.get("model", "")),
        "embed_dims": int(meta.get("embed_dims", "0") or 0),
        "seq": int(meta.get("seq", "0") or 0),
        "records": int(conn.execute("SELECT count(*) FROM records").fetchone()[0]),
        "collections": int(conn.execute("SELECT count(*) FROM collections").fetchone()[0]),
        "tombstones": int(conn.execute("SELECT count(*) FROM tombstones").fetchone()[0]),
    }


def check_database(path: Path) -> dict[str, Any]:
    """``PRAGMA integrity_check`` of a standalone database file (opened read-only and
    immutable, so checking never creates or changes a file), then its facts."""
    uri = f"file:{path}?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise BackupError(f"{path}: cannot open the database copy ({exc})") from exc
    try:
        rows = conn.execute("PRAGMA integrity_check(5)").fetchall()
        verdict = "; ".join(str(r[0]) for r in rows)
        if verdict.lower() != "ok":
            raise BackupError(f"{path}: integrity check failed: {verdict[:300]}")
        return database_facts(conn)
    except sqlite3.Error as exc:
        raise BackupError(f"{path}: not a readable store database ({exc})") from exc
    finally:
        conn.close()


def read_manifest(backup: Path) -> Manifest:
    path = backup / MANIFEST_NAME
    if not backup.is_dir():
        what = "does not exist" if not os.path.lexists(backup) else "is not a directory"
        raise BackupError(f"{backup} {what}; a backup is the directory `libravdb backup` wrote")
    try:
        manifest = msgspec.json.decode(path.read_bytes(), type=Manifest)
    except FileNotFoundError:
        raise BackupError(f"{backup} is not a libravdb backup (no {MANIFEST_NAME})") from None
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BackupError(f"{path} is damaged or not a backup manifest: {exc}") from exc
    if manifest.format != FORMAT:
        raise BackupError(f"{path}: format {manifest.format!r} is not {FORMAT!r}")
    if manifest.format_version > FORMAT_VERSION:
        raise BackupError(
            f"{path}: backup format {manifest.format_version} is newer than this version "
            f"reads ({FORMAT_VERSION}); restore it with a newer libravdb"
        )
    return manifest


def verify_backup(backup: Path) -> Manifest:
    """Everything restore relies on, checked without changing anything: the manifest,
    each file's size and checksum, the database's integrity and its counts."""
    manifest = read_manifest(backup)
    if manifest.file(DB_NAME) is None:
        raise BackupError(f"{backup}: the manifest lists no {DB_NAME}")
    for entry in manifest.files:
        path = backup / entry.name
        if entry.name != Path(entry.name).name or not path.is_file():
            raise BackupError(f"{backup}: {entry.name} is missing")
        size = path.stat().st_size
        if size != entry.bytes:
            raise BackupError(
                f"{path} is {size} bytes, the manifest says {entry.bytes} (truncated or altered)"
            )
        if sha256_of(path) != entry.sha256:
            raise BackupError(f"{path} does not match its checksum in the manifest (altered)")
    facts = check_database(backup / DB_NAME)
    stated = {key: getattr(manifest, key) for key in facts}
    if facts != stated:
        differ = ", ".join(
            f"{key} {facts[key]} (manifest: {stated[key]})"
            for key in facts
            if facts[key] != stated[key]
        )
        raise BackupError(f"{backup}: the database does not match its manifest: {differ}")
    return manifest


def remove_tree(path: Path) -> None:
    """Remove a temporary backup directory (flat: files only)."""
    with contextlib.suppress(FileNotFoundError):
        for child in path.iterdir():
            with contextlib.suppress(OSError):
                child.unlink()
        path.rmdir()
