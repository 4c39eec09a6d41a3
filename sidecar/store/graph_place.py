"""Where a store keeps its large views' saved graphs (``sidecar/assembly/graph_file.py``,
which decides what a graph's header says and when it holds).

A saved graph is a header (``view_files``' format, kind ``GRAPHS``) and a body:
usearch's own serialisation, which usearch writes to and reads from a file. It may lag
the collection (a start inserts again what changed since) but, like a saved view, must
never outlive a removal: it holds the removed records' vectors (in int8).

* SQLite (:class:`FileGraphPlace`): ``<data dir>/views/<hash>.graph``, the header (atomic,
  CRC-checked, with the body's size and CRC-32), and ``<hash>.usearch`` beside it, read
  by usearch in place. ``lexical_files.scrub`` removes both after a forget when they no
  longer hold. One daemon owns the directory.
* PostgreSQL (``pg/saved_graphs.py``): one blob of ``saved_parts`` (the header, then the
  body as its one section), which any removal's transaction deletes and a save taken
  before a removal cannot write. A read streams the body to a temporary file for usearch,
  a part at a time, and removes the file once usearch has read it.

Either way the body goes through a file, never whole through this process's memory
beside the graph usearch holds (at 1M memories each graph is about 530 MB).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import structlog

from sidecar.store import lexical_files, view_files

log = structlog.get_logger(__name__)

KIND = lexical_files.GRAPHS
CHUNK = 1 << 20
T = TypeVar("T")
#: Writes a graph's body to the file it is given (usearch's ``Index.save``).
Dump = Callable[[Path], None]
#: Reads a graph's body from the file it is given (usearch's ``Index.view``, which maps it).
Load = Callable[[Path], T]
#: Errors of a body that checked yet is not a graph its library reads.
UNREADABLE = (OSError, RuntimeError, ValueError)


class GraphPlace(Protocol):
    """The saved graphs of a store's collections, one per collection."""

    def exists(self, collection: str) -> bool:
        """Whether ``collection`` has a saved graph (a start waits for one it loads)."""

    def read(
        self, collection: str, check: Callable[[dict[str, Any]], bool], load: Load[T]
    ) -> tuple[dict[str, Any], T] | None:
        """``collection``'s graph when its header passes ``check`` and its body checks:
        the header and what ``load(body file)`` made of it. A graph that does not check,
        or that ``load`` cannot read (:data:`UNREADABLE`), is removed: None."""

    def write(
        self,
        collection: str,
        header: Mapping[str, Any],
        dump: Dump,
        holds: Callable[[], bool] | None = None,
    ) -> bool:
        """Save the body ``dump`` writes under ``header``, replacing any graph before,
        unless the collection changed under it (dropped, or a record removed since
        ``header``'s ``removals``; ``holds`` asks the store where the place cannot)."""

    def remove(self, collection: str) -> None:
        """Drop ``collection``'s saved graph."""


@dataclass(frozen=True, slots=True)
class FileGraphPlace:
    """Saved graphs as two files each in ``data_dir`` (a SQLite store's directory)."""

    data_dir: Path

    def _header(self, collection: str) -> Path:
        return view_files.path_of(self.data_dir, collection, KIND)

    def exists(self, collection: str) -> bool:
        return self._header(collection).exists()

    def read(
        self, collection: str, check: Callable[[dict[str, Any]], bool], load: Load[T]
    ) -> tuple[dict[str, Any], T] | None:
        def whole(meta: dict[str, Any]) -> bool:
            return (
                check(meta)
                and all(isinstance(meta.get(k), int) and meta[k] >= 0 for k in ("size", "crc"))
                and meta.get("sections") == []
            )

        meta = view_files.read(self.data_dir, collection, whole, lambda _i, _n: None, KIND)
        body = lexical_files.companion(self._header(collection))
        try:
            whole_body = meta is not None and size_and_crc(body) == (meta["size"], meta["crc"])
        except OSError:
            whole_body = False
        got = load_body(collection, load, body) if meta is not None and whole_body else None
        if meta is None or got is None:
            self.remove(collection)
            return None
        return meta, got

    def write(
        self,
        collection: str,
        header: Mapping[str, Any],
        dump: Dump,
        holds: Callable[[], bool] | None = None,
    ) -> bool:
        lexical_files.directory(self.data_dir, KIND).mkdir(mode=0o700, exist_ok=True)
        body = lexical_files.companion(self._header(collection))
        raw = body.with_name(f"{body.stem}-usearch.{os.getpid()}.tmp")
        try:
            dump(raw)  # usearch writes it: no copy of the graph in memory
            size, crc = size_and_crc(raw)

            def moved() -> bool:
                # under the files' lock, as the scrub after a forget: the body is renamed
                # into place only when the header follows it
                if holds is not None and not holds():
                    return False
                os.replace(raw, body)
                return True

            full = {**header, "size": size, "crc": crc}
            return view_files.write(self.data_dir, collection, full, [], moved, KIND)
        finally:
            lexical_files.unlink(raw)

    def remove(self, collection: str) -> None:
        """Both files of ``collection``'s graph."""
        path = self._header(collection)
        with lexical_files.lock:
            lexical_files.unlink(path)
            lexical_files.unlink(lexical_files.companion(path))


def load_body(collection: str, load: Load[T], body: Path) -> T | None:
    """``load(body)`` (usearch maps or reads the file itself: no copy here), or None when
    the body checked yet is not a graph it reads."""
    try:
        return load(body)
    except UNREADABLE as exc:
        log.warning("view_graph.file_unreadable", collection=collection[:200], error=str(exc))
        return None


def chunks_of(path: Path) -> Iterator[bytes]:
    """The file's bytes, a chunk at a time."""
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            yield chunk


def size_and_crc(path: Path) -> tuple[int, int]:
    crc, size = 0, 0
    for chunk in chunks_of(path):
        crc, size = zlib.crc32(chunk, crc), size + len(chunk)
    return size, crc
