"""A large view's graph (``view_graph.py``) saved where its rows are saved, so that a
start loads it instead of building it again and never needs the store's own graph (issue
36). Where it is saved is the store's (``StoreBackend.graph_place``,
``sidecar/store/graph_place.py``: two files beside a SQLite store, a blob of a PostgreSQL
one); what it says and when it holds is decided here.

Labels are the view's row numbers, so a graph only means something over the row layout
it was built on. A view gets a layout token when it loads from the store; its saved rows
(``view_snapshot.py``) carry the token, and a start that takes them takes the token with
them. A graph's header holds, beside usearch's serialisation:

* ``layout``, ``cid``, ``removals``: the layout and collection state it was built over. A
  start uses the graph only when the view took its rows from a saved view of that layout
  (or whose ``layout_bases`` name it, below) and nothing was removed since
  (``lexical_files.holds``; the scrub after a forget removes a graph file that no longer
  holds, as it removes the rows' and terms' files; on PostgreSQL the removal's
  transaction deletes it);
* ``seq`` and ``rows``: rows ``0 .. rows-1`` are in the graph, as their records were at
  ``seq``. A load inserts again every row past ``rows`` and every row whose record's
  ``seq`` is greater (appended or rewritten since), from the view's matrix, before the
  graph answers;
* ``dims`` and ``m``: a graph of other parameters is rebuilt.

Rows past those a daemon took are in the order it saw their records, and two daemons
on one PostgreSQL database may see them in different orders (a record patched between
one's two syncs comes after another for the daemon that synced once). So a PostgreSQL
view is saved under a new layout token each time, with ``layout_bases``: the token and
row count of the layout its first rows are, then the bases of the view the saving daemon
took (``saved_views.py``). A graph matches the view's own token, or a base's when it
holds no more rows than that base does: every daemon that took one saved view has those
rows in the same order, and its own later saves keep them first.

A build from scratch saves its graph before it answers; a load that had to insert a
tenth of the rows again saves anew.
"""

from __future__ import annotations

import secrets
from array import array
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import structlog
from usearch.index import Index

from sidecar.assembly.view_graph import GraphParams, Resume, Saver, new_index
from sidecar.assembly.view_snapshot import Bases
from sidecar.store import lexical_files
from sidecar.store.graph_place import GraphPlace
from sidecar.store.interface import StoreBackend
from sidecar.store.types import CollectionState

log = structlog.get_logger(__name__)

VERSION = 1
I64 = npt.NDArray[np.int64]
#: The layouts a view's rows are: its own token, and the layouts of its first rows with
#: their counts (``layout_bases``), each with the most rows a graph over it may hold.
Layouts = dict[str, int]


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


def layouts(layout: str, bases: Bases) -> Layouts:
    """The layouts of a view's rows (:data:`Layouts`): ``layout``, any number of rows,
    and each of ``bases`` (a saved view's ``layout_bases``) up to its count."""
    out = {token: rows for token, rows in reversed(bases)}
    out[layout] = 1 << 62
    return out


def resumable(place: GraphPlace | None, collection: str, graph: bool) -> bool:
    """Whether a view with a ``graph`` will likely load it from ``place``: the store's own
    graph is then not loaded ahead."""
    return graph and place is not None and place.exists(collection)


def save(
    place: GraphPlace,
    collection: str,
    stamp: GraphStamp,
    params: GraphParams,
    index: Index,
    store: StoreBackend | None = None,
) -> bool:
    """Save ``index`` in ``place``; with ``store``, only while nothing was removed from
    the collection since ``stamp`` (a forget's records must not be saved again)."""
    header: dict[str, Any] = {"version": VERSION, **asdict(stamp), "dims": int(index.ndim)}
    header["m"] = params.m

    def holds() -> bool:
        return store is None or lexical_files.holds(
            header, store.collection_states([collection])[collection]
        )

    def dump(path: Path) -> None:
        index.save(str(path))  # usearch writes it: no copy of the graph in memory

    return place.write(collection, header, dump, holds)


def load(
    place: GraphPlace,
    collection: str,
    allowed: Layouts,
    state: CollectionState,
    dims: int,
    params: GraphParams,
) -> tuple[Index, GraphStamp] | None:
    """The saved graph when it was built over one of the view's layouts (``allowed``, with
    no more rows than the layout allows) at ``state``'s ``cid`` and ``removals`` with these
    parameters; one that does not hold is removed. The stamp returned names the graph's
    own layout, seq and rows."""

    def check(meta: dict[str, Any]) -> bool:
        return (
            meta.get("version") == VERSION
            and isinstance(meta.get("layout"), str)
            and lexical_files.holds(meta, state)
            and (meta.get("dims"), meta.get("m")) == (dims, params.m)
            and all(isinstance(meta.get(k), int) and meta[k] >= 0 for k in ("seq", "rows"))
            and meta["rows"] <= allowed.get(meta["layout"], -1)
        )

    def read_index(path: Path) -> Index:
        # mapped, not read: the file's pages are the page cache's, which the kernel can
        # take back (at 1M memories two graphs held 1.7 GB of anonymous memory read whole);
        # the file is only ever replaced or unlinked, never written in place, so the
        # mapping stays as it was (view_graph.py keeps what changed since beside it)
        index = new_index(dims, params)
        index.view(str(path))
        return index

    got = place.read(collection, check, read_index)
    if got is None:
        return None
    meta, index = got
    if index.ndim != dims or index.connectivity != params.m or len(index) > int(meta["rows"]):
        place.remove(collection)
        return None
    stamp = GraphStamp(
        meta["layout"], state.cid, state.removals, int(meta["seq"]), int(meta["rows"])
    )
    return index, stamp


def redo(seqs: array[int], rows: int, stamp: GraphStamp) -> I64:
    """The rows a graph saved at ``stamp`` lacks or holds an old version of: past its
    rows, or of a record written after its ``seq``."""
    seq = np.frombuffer(seqs, dtype=np.int64, count=rows)
    stale = np.flatnonzero(seq[: min(rows, stamp.rows)] > stamp.seq)
    return np.concatenate([stale, np.arange(stamp.rows, rows, dtype=np.int64)])


def hooks(
    place: GraphPlace | None,
    collection: str,
    store: StoreBackend,
    stamp: GraphStamp,
    seqs: array[int],
    dims: int,
    params: GraphParams,
    bases: Bases = (),
) -> tuple[Resume | None, Saver | None]:
    """How a graph over a view's current rows (``stamp``; ``seqs``: a copy of the rows'
    record seqs; ``bases``: the saved view's ``layout_bases``) resumes from ``place`` and
    saves itself; (None, None) without a place."""
    if place is None:
        return None, None
    where = place

    def resume() -> tuple[Index, I64] | None:
        state = CollectionState(cid=stamp.cid, removals=stamp.removals)
        got = load(where, collection, layouts(stamp.layout, bases), state, dims, params)
        if got is None:
            return None
        index, saved = got
        return index, redo(seqs, stamp.rows, saved)

    def saver(index: Index) -> None:
        try:
            save(where, collection, stamp, params, index, store)
        except (OSError, ValueError, RuntimeError) as exc:  # the next start builds again
            log.warning("view_graph.save_failed", collection=collection[:200], error=str(exc))

    return (resume if where.exists(collection) else None), saver
