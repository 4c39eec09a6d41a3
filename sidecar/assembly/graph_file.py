"""A large view's graph (``view_graph.py``) saved beside its rows, so that a start loads it
instead of building it again and never needs the store's own graph (issue 36).

Labels are the view's row numbers, so a graph only means something over the row layout
it was built on. A view gets a layout token when it loads from the store; its saved rows
(``view_snapshot.py``) carry the token, and a start that takes them takes the token with
them. A graph is two files: ``<data dir>/views/<hash>.usearch``, usearch's own
serialisation (written and read by usearch itself: no second copy of the graph in
memory), and ``<hash>.graph``, its header (written as the rows' files are:
``view_files``, atomic, CRC-checked) with the body's size and CRC-32 and:

* ``layout``, ``cid``, ``removals``: the layout and collection state it was built over. A
  start uses the file only when the view took its rows from a file of that layout and
  nothing was removed since (``lexical_files.holds``; the scrub after a forget removes a
  graph file that no longer holds, as it removes the rows' and terms' files);
* ``seq`` and ``rows``: rows ``0 .. rows-1`` are in the graph, as their records were at
  ``seq``. A load inserts again every row past ``rows`` and every row whose record's
  ``seq`` is greater (appended or rewritten since), from the view's matrix, before the
  graph answers;
* ``dims`` and ``m``: a file of other parameters is rebuilt.

A build from scratch saves its graph before it answers; a load that had to insert a
tenth of the rows again saves anew. Nothing is saved for a store without a local
directory (PostgreSQL: each daemon's graph is its own).
"""

from __future__ import annotations

import os
import secrets
import zlib
from array import array
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import structlog
from usearch.index import Index

from sidecar.assembly.view_graph import GraphParams, Resume, Saver, new_index
from sidecar.store import lexical_files, view_files
from sidecar.store.interface import StoreBackend
from sidecar.store.types import CollectionState

log = structlog.get_logger(__name__)

VERSION = 1
KIND = lexical_files.GRAPHS
companion = lexical_files.companion  # the graph's body beside its header file
CHUNK = 1 << 20
I64 = npt.NDArray[np.int64]


def new_layout() -> str:
    """A token for a row layout loaded from the store (no file has its graph)."""
    return secrets.token_hex(8)


@dataclass(frozen=True, slots=True)
class GraphStamp:
    """What a saved graph was built over (module doc)."""

    layout: str
    cid: int
    removals: int
    seq: int
    rows: int


def exists(data_dir: Path | None, collection: str) -> bool:
    return data_dir is not None and view_files.path_of(data_dir, collection, KIND).exists()


def resumable(data_dir: Path | None, collection: str, graph: bool) -> bool:
    """Whether a view with a ``graph`` will likely load it from its file (the rows' file
    and the graph's are there): the store's own graph is then not loaded ahead."""
    return (
        graph
        and data_dir is not None
        and exists(data_dir, collection)
        and view_files.path_of(data_dir, collection).exists()
    )


def save(
    data_dir: Path,
    collection: str,
    stamp: GraphStamp,
    params: GraphParams,
    index: Index,
    store: StoreBackend | None = None,
) -> bool:
    """Write ``index``'s files; with ``store``, only while nothing was removed from the
    collection since ``stamp`` (a forget's records must not go back on disk)."""
    folder = lexical_files.directory(data_dir, KIND)
    folder.mkdir(mode=0o700, exist_ok=True)
    body = companion(view_files.path_of(data_dir, collection, KIND))
    raw = body.with_name(f"{body.stem}-usearch.{os.getpid()}.tmp")
    try:
        index.save(str(raw))  # usearch writes it: no copy of the graph in memory
        size, crc = _size_and_crc(raw)
        header: dict[str, Any] = {
            "version": VERSION,
            **asdict(stamp),
            "dims": int(index.ndim),
            "m": params.m,
            "size": size,
            "crc": crc,
        }

        def holds() -> bool:
            # under the files' lock, as the scrub after a forget: the body is renamed into
            # place only when the header follows it
            if store is not None and not lexical_files.holds(
                header, store.collection_states([collection])[collection]
            ):
                return False
            os.replace(raw, body)
            return True

        return view_files.write(data_dir, collection, header, [], holds, KIND)
    finally:
        lexical_files.unlink(raw)


def load(
    data_dir: Path,
    collection: str,
    layout: str,
    state: CollectionState,
    dims: int,
    params: GraphParams,
) -> tuple[Index, GraphStamp] | None:
    """The saved graph when it was built over ``layout`` at ``state``'s ``cid`` and
    ``removals`` with these parameters; files that do not hold are removed."""

    def check(meta: dict[str, Any]) -> bool:
        return (
            meta.get("version") == VERSION
            and meta.get("layout") == layout
            and lexical_files.holds(meta, state)
            and (meta.get("dims"), meta.get("m")) == (dims, params.m)
            and all(
                isinstance(meta.get(k), int) and meta[k] >= 0
                for k in ("seq", "rows", "size", "crc")
            )
            and meta.get("sections") == []
        )

    meta = view_files.read(data_dir, collection, check, lambda _i, _n: None, KIND)
    body = companion(view_files.path_of(data_dir, collection, KIND))
    index = None
    try:
        if meta is not None and _size_and_crc(body) == (meta["size"], meta["crc"]):
            index = new_index(dims, params)
            index.load(str(body))  # read by usearch into its own memory: no copy
    except (OSError, RuntimeError, ValueError) as exc:  # checked, yet not a graph it reads
        log.warning("view_graph.file_unreadable", collection=collection[:200], error=str(exc))
        index = None
    if meta is None or index is None:
        remove(data_dir, collection)
        return None
    if index.ndim != dims or index.connectivity != params.m or len(index) > int(meta["rows"]):
        remove(data_dir, collection)
        return None
    stamp = GraphStamp(layout, state.cid, state.removals, int(meta["seq"]), int(meta["rows"]))
    return index, stamp


def remove(data_dir: Path, collection: str) -> None:
    """Both files of ``collection``'s graph."""
    path = view_files.path_of(data_dir, collection, KIND)
    with lexical_files.lock:
        lexical_files.unlink(path)
        lexical_files.unlink(companion(path))


def _size_and_crc(path: Path) -> tuple[int, int]:
    crc, size = 0, 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            crc, size = zlib.crc32(chunk, crc), size + len(chunk)
    return size, crc


def redo(seqs: array[int], rows: int, stamp: GraphStamp) -> I64:
    """The rows a graph saved at ``stamp`` lacks or holds an old version of: past its
    rows, or of a record written after its ``seq``."""
    seq = np.frombuffer(seqs, dtype=np.int64, count=rows)
    stale = np.flatnonzero(seq[: min(rows, stamp.rows)] > stamp.seq)
    return np.concatenate([stale, np.arange(stamp.rows, rows, dtype=np.int64)])


def hooks(
    data_dir: Path | None,
    collection: str,
    store: StoreBackend,
    stamp: GraphStamp,
    seqs: array[int],
    dims: int,
    params: GraphParams,
) -> tuple[Resume | None, Saver | None]:
    """How a graph over a view's current rows (``stamp``; ``seqs``: a copy of the rows'
    record seqs) resumes from its file and saves itself; (None, None) without a local
    directory."""
    if data_dir is None:
        return None, None
    where = data_dir

    def resume() -> tuple[Index, I64] | None:
        state = CollectionState(cid=stamp.cid, removals=stamp.removals)
        got = load(where, collection, stamp.layout, state, dims, params)
        if got is None:
            return None
        index, saved = got
        return index, redo(seqs, stamp.rows, saved)

    def saver(index: Index) -> None:
        try:
            save(where, collection, stamp, params, index, store)
        except (OSError, ValueError, RuntimeError) as exc:  # the next start builds again
            log.warning("view_graph.save_failed", collection=collection[:200], error=str(exc))

    return (resume if exists(where, collection) else None), saver
