"""Offline maintenance on a store (a data directory or a PostgreSQL database): reembed,
export, import.

These open the store themselves, so the daemon must not be running on the same
directory (the store's directory lock refuses a second opener and names its pid).
Progress goes to stderr; stdout carries only data (export) or the final summary.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from sidecar.config import Settings
from sidecar.engines import EngineHub
from sidecar.engines.embedder import Embedder
from sidecar.memory.core import layout as C
from sidecar.memory.core import scope
from sidecar.store import StoreError, StoreLocked, page_check
from sidecar.store.backend import open_store, reembed
from sidecar.store.files import DB_NAME
from sidecar.store.interface import StoreBackend


class ToolError(Exception):
    """A maintenance command failed; printed as one line, exit code 1."""


class ProgressBar:
    """A one-line progress display on stderr, redrawn at most ten times a second."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self._tty = self.stream.isatty()
        self._last = 0.0
        self._done = 0
        self._total: int | None = None

    def __call__(self, done: int, total: int | None = None) -> None:
        self._done, self._total = done, total
        now = time.monotonic()
        if now - self._last >= 0.1 or (total is not None and done >= total):
            self._last = now
            self._draw(final=False)

    def _draw(self, *, final: bool) -> None:
        if self._total:
            share = min(1.0, self._done / self._total)
            bar = "#" * int(share * 30)
            text = f"{self.label} [{bar:<30}] {self._done}/{self._total} ({share:.0%})"
        else:
            text = f"{self.label} {self._done}"
        if self._tty:
            self.stream.write("\r" + text + ("\n" if final else ""))
        elif final:
            self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self) -> None:
        self._draw(final=True)


def _embedder(settings: Settings) -> Embedder:
    hub = EngineHub.for_tool(settings)
    try:
        return hub.require_embedder()
    except Exception as exc:
        raise ToolError(f"no embedder: {exc}") from exc


def _embed_fn(embedder: Embedder) -> Callable[[list[str]], Any]:
    def embed(texts: list[str]) -> Any:
        return embedder.embed_sync(texts, "document").vectors

    return embed


def _tool_error(exc: StoreError, command: str) -> ToolError:
    """The store's refusal, with what to do about it when a daemon holds the directory."""
    if (
        isinstance(exc, StoreLocked)
        and not exc.data.get("pid")
        and "://" in str(exc.data.get("data_dir", ""))
    ):
        return ToolError(
            f"{exc.message}. `libravdb {command}` needs every daemon on that database "
            "stopped; nothing was written."
        )
    if isinstance(exc, StoreLocked):
        who = f"process {exc.data['pid']}" if exc.data.get("pid") else "another process"
        return ToolError(
            f"data directory {exc.data['data_dir']} is in use by {who}, a running daemon. "
            f"`libravdb {command}` works on a stopped daemon's directory: stop the daemon "
            "(`libravdb call shutdown`, or Ctrl-C where it runs), then run this again. "
            "Nothing was written."
        )
    return ToolError(exc.message)


def _require_store(settings: Settings) -> None:
    """Offline commands other than ``import`` work on an existing store: a mistyped
    ``--data-dir`` must fail, not create an empty store and report success on it."""
    if settings.store_url:  # a PostgreSQL store: the server says whether it has one
        return
    db = settings.data_path / DB_NAME
    if not db.is_file():
        raise ToolError(
            f"no store in {settings.data_path} (no {DB_NAME} there): check --data-dir or "
            "LIBRAVDB_DATA_DIR; nothing was written"
        )


@contextmanager
def _open_store(settings: Settings, embedder: Embedder, command: str) -> Iterator[StoreBackend]:
    tiers = (
        tuple(d for d in embedder.matryoshka_dims if d < embedder.dims)
        if embedder.supports_matryoshka
        else ()
    )
    try:
        store = open_store(
            settings.store_location,
            embed_dims=embedder.dims,
            fingerprint=embedder.fingerprint,
            model=embedder.profile,
            tiers=tiers,
            settings=page_check.offline(settings.store),
        )
    except StoreError as exc:
        raise _tool_error(exc, command) from exc
    try:
        yield store
    finally:
        store.close()


def run_reembed(settings: Settings) -> str:
    _require_store(settings)
    embedder = _embedder(settings)
    bar = ProgressBar("re-embedding")
    try:
        stats = reembed(
            settings.store_location,
            _embed_fn(embedder),
            embedder.fingerprint,
            bar,
            embed_dims=embedder.dims,
            model=embedder.profile,
        )
    except StoreError as exc:
        raise _tool_error(exc, "reembed") from exc
    finally:
        embedder.close()
    bar.finish()
    blank = f" ({stats.blank} without text kept a zero vector)" if stats.blank else ""
    resumed = " (resumed)" if stats.resumed else ""
    return (
        f"re-embedded {stats.records} records in {stats.collections} collections{blank}"
        f"{resumed} in {stats.seconds:.1f} s; fingerprint "
        f"{stats.old_fingerprint[:12] or '(none)'} -> {stats.new_fingerprint[:12]}"
    )


@dataclass(frozen=True, slots=True)
class ExportRequest:
    """What ``libravdb export`` writes: everything, some collections, or one namespace."""

    output: Path | None = None  # None: standard output
    collections: list[str] | None = None
    namespace: str | None = None  # everything of one user/namespace, sessions included
    include_vectors: bool = True


def run_export(settings: Settings, request: ExportRequest, stdout: TextIO) -> str:
    """Export to ``request.output`` atomically (a temporary file renamed on success, so an
    existing backup is never truncated by a failed run), or to ``stdout``."""
    _require_store(settings)
    embedder = _embedder(settings)
    try:
        with _open_store(settings, embedder, "export") as store:
            names, scope_note = _export_selection(store, request)
            bar = ProgressBar("exporting")
            if request.output is None:
                stats = store.export_ndjson(
                    stdout,
                    collections=names,
                    include_vectors=request.include_vectors,
                    progress=bar,
                )
            else:
                with atomic_text_file(request.output) as out:
                    stats = store.export_ndjson(
                        out,
                        collections=names,
                        include_vectors=request.include_vectors,
                        progress=bar,
                    )
            bar.finish()
    finally:
        embedder.close()
    where = f" to {request.output}" if request.output is not None else ""
    summary = f"exported {stats.records} records from {stats.collections} collections{where}"
    if stats.records == 0:
        summary += "\nlibravdb export: warning: the export holds no records"
    return summary + scope_note


def _export_selection(store: StoreBackend, request: ExportRequest) -> tuple[list[str] | None, str]:
    """(collections to export or None for all, a note for the summary); refuses a filter
    that matches nothing, naming what exists instead."""
    if request.namespace is None:
        if request.collections is None:
            return None, ""
        missing = [c for c in request.collections if store.collection(c) is None]
        if missing:
            raise ToolError(f"no such collection: {', '.join(missing)}; nothing was written")
        return request.collections, ""
    ns = request.namespace.strip()
    names, sessions = scope.namespace_collections(store, ns, include_sessions=True)
    if not names and ns.startswith(C.USER_PREFIX):  # `user:dana` names the namespace dana
        ns = ns[len(C.USER_PREFIX) :]
        names, sessions = scope.namespace_collections(store, ns, include_sessions=True)
    if not names:
        known = scope.known_namespaces(store)
        hint = f"; namespaces in this store: {', '.join(known[:20])}" if known else ""
        raise ToolError(f"namespace {ns!r} has no records{hint}; nothing was written")
    if request.collections:
        names = sorted(set(names) | set(request.collections))
    return names, f"\nnamespace {ns}: {len(names)} collections, {len(sessions)} sessions"


@contextmanager
def atomic_text_file(path: Path) -> Iterator[TextIO]:
    """A text file that appears at ``path`` only when the block succeeds (written beside
    it, flushed to disk, renamed over it); on failure ``path`` is untouched."""
    path = path.expanduser()
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def run_import(settings: Settings, source: Path) -> str:
    if not source.exists():
        raise ToolError(f"{source}: no such file")
    new_store = not settings.store_url and not (settings.data_path / DB_NAME).is_file()
    embedder = _embedder(settings)
    try:
        with (
            _open_store(settings, embedder, "import") as store,
            source.open(encoding="utf-8") as src,
        ):
            from sidecar.memory.lifecycle.forget import resurrection_guard

            bar = ProgressBar("importing")
            stats = store.import_ndjson(
                src,
                embed=_embed_fn(embedder),
                progress=bar,
                skip=resurrection_guard(store.list_tombstones()),
            )
            bar.finish()
    except StoreError as exc:
        raise _tool_error(exc, "import") from exc
    finally:
        embedder.close()
    into = f"a new store at {settings.data_path}, " if new_store else ""
    return (
        f"imported {stats.records} records into {into}{stats.collections} collections "
        f"({stats.reembedded} re-embedded, {stats.skipped} forgotten records skipped, "
        f"{stats.tombstones} tombstones)"
    )
