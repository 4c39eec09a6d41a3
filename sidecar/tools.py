"""Offline maintenance on a data directory: reembed, export, import.

These open the store themselves, so the daemon must not be running on the same
directory (the store's directory lock refuses a second opener and names its pid).
Progress goes to stderr; stdout carries only data (export) or the final summary.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from sidecar.config import Settings
from sidecar.engines import EngineHub
from sidecar.engines.embedder import Embedder
from sidecar.store import Store, StoreError
from sidecar.store.reembed import reembed


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
    hub = EngineHub.from_settings(
        settings.embedding,
        settings.summarizer,
        search_roots=[settings.data_path.parent / "models"],
    )
    try:
        return hub.require_embedder()
    except Exception as exc:
        raise ToolError(f"no embedder: {exc}") from exc


def _embed_fn(embedder: Embedder) -> Callable[[list[str]], Any]:
    def embed(texts: list[str]) -> Any:
        return embedder.embed_sync(texts, "document").vectors

    return embed


@contextmanager
def _open_store(settings: Settings, embedder: Embedder) -> Iterator[Store]:
    tiers = (
        tuple(d for d in embedder.matryoshka_dims if d < embedder.dims)
        if embedder.supports_matryoshka
        else ()
    )
    try:
        store = Store.open(
            settings.data_path,
            embed_dims=embedder.dims,
            fingerprint=embedder.fingerprint,
            model=embedder.profile,
            tiers=tiers,
            settings=settings.store,
        )
    except StoreError as exc:
        raise ToolError(exc.message) from exc
    try:
        yield store
    finally:
        store.close()


def run_reembed(settings: Settings) -> str:
    embedder = _embedder(settings)
    bar = ProgressBar("re-embedding")
    try:
        stats = reembed(
            settings.data_path,
            _embed_fn(embedder),
            embedder.fingerprint,
            bar,
            embed_dims=embedder.dims,
            model=embedder.profile,
        )
    except StoreError as exc:
        raise ToolError(exc.message) from exc
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


def run_export(
    settings: Settings,
    out: TextIO,
    *,
    collections: list[str] | None,
    namespace: str | None,
    include_vectors: bool,
) -> str:
    embedder = _embedder(settings)
    try:
        with _open_store(settings, embedder) as store:
            names = collections
            if namespace:
                names = [c.name for c in store.collections(namespace=namespace)]
            bar = ProgressBar("exporting")
            stats = store.export_ndjson(
                out, collections=names, include_vectors=include_vectors, progress=bar
            )
            bar.finish()
    finally:
        embedder.close()
    return f"exported {stats.records} records from {stats.collections} collections"


def run_import(settings: Settings, source: Path) -> str:
    if not source.exists():
        raise ToolError(f"{source}: no such file")
    embedder = _embedder(settings)
    try:
        with _open_store(settings, embedder) as store, source.open(encoding="utf-8") as src:
            from sidecar.memory.forget import resurrection_guard

            bar = ProgressBar("importing")
            stats = store.import_ndjson(
                src,
                embed=_embed_fn(embedder),
                progress=bar,
                skip=resurrection_guard(store.list_tombstones()),
            )
            bar.finish()
    except StoreError as exc:
        raise ToolError(exc.message) from exc
    finally:
        embedder.close()
    return (
        f"imported {stats.records} records into {stats.collections} collections "
        f"({stats.reembedded} re-embedded, {stats.skipped} forgotten records skipped, "
        f"{stats.tombstones} tombstones)"
    )
