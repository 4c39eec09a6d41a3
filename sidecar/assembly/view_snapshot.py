"""A view's rows and matrix saved, so that a start does not read and decode every record
of a large collection again (issue 36).

Where a view is saved is the store's (``StoreBackend.view_place``,
``sidecar/store/view_place.py``): a file beside a SQLite store, the same bytes in rows of
a PostgreSQL database (``pg/saved_views.py``). The file (``sidecar/store/view_files.py``:
atomic streamed writes, the checksum, the scrub after a forget) holds the view's
:class:`~sidecar.assembly.view_rows.ViewRows` as they were when it was saved, section by
section: the ids, candidate texts and metadata JSON (each an offset array and a UTF-8
blob), the role and session tables, the byte flags and codes, the record numbers
(``seq``, version, times), the unit-vector matrix (row for row, in the view's type:
float32, or float16 for a view the store's index ranks), the implicit-recall density
when saved with it, and (version 3) each row's record-text digest, the key of its saved
BM25 terms (``view_terms.text_digests``: made by the save's thread, so that a start
compares two arrays instead of hashing a million texts, 2 s at 1M). Its header holds the
collection's ``cid``, ``removals`` and ``max_seq`` of the state the view held when saved,
the rows, the vectors' dimensions and the matrix's type (``matrix``; a version 1 file,
which has none, holds float32). A lean view's rows (float16) keep no metadata: its
metadata section is empty, and a float16 file's metadata, if any, is not read.

A view's full load (``CollectionView.reload``) takes the file when it holds for the
collection's current state (the same ``cid`` and ``removals``: nothing removed since, so
every saved row is still a record) and the store's dimensions: the rows are read into
their arrays and the matrix too, or mapped from the file when large (copy-on-write:
``sidecar/store/mapped_rows.py``), then the records put or patched since (``changed_since``
the saved ``max_seq``) are appended or rewritten in place, as a catch-up does. The rows
and vectors are the store's as the view read them (the same bytes: the matrix rows are
the unit vectors the load computed), so what the view serves is what the daemon that
saved it served. A saved view that does not hold, or is damaged, is removed; the view
loads from the store and saves anew. (From a database nothing is mapped: the matrix is
read into the view's own memory.)

A view of :data:`MIN_ROWS` rows or more saves when rows were loaded or changed since its
file was written (or read) for a tenth of its rows and at least :data:`SAVE_MIN_CHANGED`:
the lists and small arrays are copied under the caller's lock (:func:`snapshot`; the
matrix is not: a row rewritten in place afterwards is one whose record has a greater
``seq``, which the next start replays anyway) and written by a background thread.
"""

from __future__ import annotations

import itertools
import threading
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt
import structlog

from sidecar.assembly.density import SAVED, Density, SavedDensity
from sidecar.assembly.view_load import capacity
from sidecar.assembly.view_rows import FULL, HALF, NO_META, Matrix, ViewRows, record_texts
from sidecar.assembly.view_terms import text_digests
from sidecar.priority import lower_this_thread
from sidecar.store import lexical_files, mapped_rows, view_files
from sidecar.store.interface import StoreBackend
from sidecar.store.types import CollectionState
from sidecar.store.view_files import Section
from sidecar.store.view_place import ViewPlace

#: Layout tokens a view's first rows are, each with how many (``graph_file.py``).
Bases = tuple[tuple[str, int], ...]
log = structlog.get_logger(__name__)
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

VERSION = 3
#: Versions a start reads: 1 is version 2 with float32 matrices only, 2 is 3 without the
#: texts' digests (a start computes them).
READS = (1, 2, 3)
#: The matrix types a file may hold, by their header name.
MATRIX_TYPES: dict[str, np.dtype[Any]] = {"float32": FULL, "float16": HALF}
#: Views smaller than this load from the store quickly enough (10k rows: 0.3 s).
MIN_ROWS = 20_000
#: Rows changed since the file that make a new save worth it (besides a tenth).
SAVE_MIN_CHANGED = 1024
_NUMBERS = ("turn_seq", "ts", "seq", "version", "created", "updated", "ts_ms")
_FLAGS = ("own_text", "has_vector", "kind")
_PIECE = 1024  # strings encoded per piece of a blob


@dataclass(frozen=True)
class Snapshot:
    """What a save writes, taken under the caller's lock (module doc)."""

    collection: str
    state: CollectionState
    ids: list[str]
    texts: list[str]
    metas: list[bytes]
    roles: list[str]
    sessions: list[str]
    flags: tuple[bytes, ...]  # _FLAGS
    codes: tuple[bytes, bytes]  # role, session
    numbers: tuple[bytes, ...]  # _NUMBERS
    matrix: Matrix  # the view's; its first len(ids) rows are written
    density: SavedDensity | None = None  # in step with the rows (copies)
    layout: str = ""  # the rows' layout token (graph_file.py)
    bases: Bases = ()  # the layouts its first rows are, with their counts (graph_file.py)


def snapshot(
    collection: str,
    state: CollectionState,
    rows: ViewRows,
    matrix: Matrix,
    density: SavedDensity | None = None,
    layout: str = "",
    bases: Bases = (),
) -> Snapshot:
    return Snapshot(
        collection,
        state,
        list(rows.ids),
        list(rows.texts),
        list(rows.metas),
        list(rows.roles.names),
        list(rows.sessions.names),
        tuple(bytes(getattr(rows, f)) for f in _FLAGS),
        (rows.role.tobytes(), rows.session.tobytes()),
        tuple(getattr(rows, f).tobytes() for f in _NUMBERS),
        matrix,
        density,
        layout,
        bases,
    )


def _strings(items: Sequence[str]) -> tuple[Section, Section]:
    """The offsets (in characters: a start decodes the blob at once and slices it) and
    the UTF-8 blob of ``items``, encoded a piece at a time (counted first, then again
    when written: the blob is never held whole)."""

    def piece(a: int) -> bytes:
        return "".join(items[a : a + _PIECE]).encode("utf-8", "surrogatepass")

    size = sum(len(piece(a)) for a in range(0, len(items), _PIECE))
    return _blob([len(s) for s in items], size, piece)


def _bytes(items: Sequence[bytes]) -> tuple[Section, Section]:
    lens = [len(b) for b in items]
    return _blob(lens, sum(lens), lambda a: b"".join(items[a : a + _PIECE]))


def _blob(lens: list[int], size: int, piece: Callable[[int], bytes]) -> tuple[Section, Section]:
    off = np.zeros(len(lens) + 1, dtype=np.int64)
    off[1:] = np.cumsum(lens, dtype=np.int64)
    pieces = (piece(a) for a in range(0, len(lens), _PIECE))
    return view_files.of_buffer(off.data), Section(size, pieces)


def sections(snap: Snapshot) -> list[Section]:
    n = len(snap.ids)
    out = [
        *_strings(snap.ids),
        *_strings(snap.texts),
        *_bytes(snap.metas),
        *_strings(snap.roles),
        *_strings(snap.sessions),
    ]
    out += [view_files.of_buffer(memoryview(b)) for b in (*snap.flags, *snap.codes, *snap.numbers)]
    out.append(view_files.of_buffer(np.ascontiguousarray(snap.matrix[:n]).data))
    if snap.density is not None:
        out += [view_files.of_buffer(a.data) for a in _density_arrays(snap.density)]
    texts = record_texts(snap.texts, snap.flags[_FLAGS.index("own_text")])
    out.append(view_files.of_buffer(text_digests(texts).astype("<u8").data))
    return out


def _density_arrays(d: SavedDensity) -> list[npt.NDArray[np.generic]]:
    return [np.ascontiguousarray(d.arrays[name]) for name in SAVED]


def _density_header(d: SavedDensity) -> dict[str, Any]:
    shapes = [[a.dtype.str, list(a.shape)] for a in _density_arrays(d)]
    return {
        "k": d.k,
        "reference": d.reference,
        "labels": list(d.labels),
        "n": d.n,
        "arrays": shapes,
    }


def save(place: ViewPlace, snap: Snapshot, store: StoreBackend | None = None) -> bool:
    """Save ``snap`` in ``place``; with ``store``, only while the collection's state there
    still holds for it (nothing removed since the snapshot: ``view_files.write``; a
    database place checks it in its own transaction)."""

    def holds() -> bool:
        assert store is not None
        return lexical_files.holds(
            header, store.collection_states([snap.collection])[snap.collection]
        )

    header = header_of(snap)
    return place.write(snap.collection, header, sections(snap), None if store is None else holds)


def header_of(snap: Snapshot) -> dict[str, Any]:
    """The header a save of ``snap`` writes (before the file's own keys)."""
    return {
        "version": VERSION,
        "cid": snap.state.cid,
        "removals": snap.state.removals,
        "max_seq": snap.state.max_seq,
        "rows": len(snap.ids),
        "dims": int(snap.matrix.shape[1]),
        "matrix": snap.matrix.dtype.name,
        "roles": len(snap.roles),
        "sessions": len(snap.sessions),
        "density": None if snap.density is None else _density_header(snap.density),
        "layout": snap.layout,
        "layout_bases": [list(b) for b in snap.bases],
        "digests": True,
    }


def save_in_background(
    place: ViewPlace, snap: Snapshot, store: StoreBackend | None = None
) -> threading.Thread:
    """:func:`save` in a daemon thread at the lowest CPU priority (a failure is logged;
    the next start loads from the store)."""

    def run() -> None:
        lower_this_thread()  # nothing waits for it but a shutdown: the CPU loads leave
        try:
            save(place, snap, store)
        except Exception as exc:
            log.warning("view.save_failed", collection=snap.collection[:200], error=repr(exc))

    thread = threading.Thread(target=run, name="libravdb-view-save", daemon=True)
    thread.start()
    return thread


class _Reader:
    """The buffers a file's sections are read into, made from its header's counts."""

    def __init__(self, meta: dict[str, Any]) -> None:
        self.n = n = int(meta["rows"])
        self.dims = int(meta["dims"])
        dtype = MATRIX_TYPES[str(meta.get("matrix", "float32"))]
        counts = [n, n, n, int(meta["roles"]), int(meta["sessions"])]
        # no buffer larger than the file's body (read_checked checked its sizes)
        body = sum(int(x) for x in meta["sections"])
        if min(counts) < 0 or n * self.dims * dtype.itemsize > body or 8 * max(counts) > body:
            raise ValueError("counts larger than the file")
        self.blobs: list[tuple[I64, bytearray | None]] = [
            (np.zeros(c + 1, np.int64), None) for c in counts
        ]
        self.flags = [bytearray(n) for _ in _FLAGS]
        self.codes = [array("I", bytes(4 * n)) for _ in range(2)]
        self.numbers = [array("q", bytes(8 * n)) for _ in _NUMBERS]
        # a large matrix is mapped from the file, copy-on-write (mapped_rows.py)
        big = mapped_rows.supported() and n * self.dims * dtype.itemsize >= mapped_rows.MIN_BYTES
        self._mapped = mapped_rows.MappedRows(capacity(n), n, self.dims, dtype) if big else None
        self._matrix: Matrix | None = None if big else np.zeros((capacity(n), self.dims), dtype)
        self.density: SavedDensity | None = None
        self.digests: U64 | None = np.zeros(n, "<u8") if meta.get("digests") is True else None
        d = meta.get("density")
        if isinstance(d, dict):
            specs = [(np.dtype(code), tuple(int(x) for x in shape)) for code, shape in d["arrays"]]
            if sum(t.itemsize * int(np.prod(sh)) for t, sh in specs) > body:
                raise ValueError("arrays larger than the file")
            arrays = {
                name: np.zeros(shape, dtype=t)
                for name, (t, shape) in zip(SAVED, specs, strict=True)
            }
            labels = tuple(str(x) for x in d["labels"])
            self.density = SavedDensity(
                int(d["k"]), int(d["reference"]), labels, int(d["n"]), arrays
            )

    @property
    def matrix(self) -> Matrix:
        if self._matrix is None:
            assert self._mapped is not None  # one of the two
            self._matrix = self._mapped.array()
        return self._matrix

    def target(self, i: int, size: int) -> memoryview | view_files.Mappable | None:
        if i < 10:
            k, blob = divmod(i, 2)
            off = self.blobs[k][0]
            if not blob:
                return off.data
            if int(off[0]) != 0 or bool(np.any(np.diff(off) < 0)):
                return None
            if int(off[-1]) > size or (k == 2 and int(off[-1]) != size):  # chars, bytes
                return None
            buf = bytearray(size)
            self.blobs[k] = (off, buf)
            return memoryview(buf)
        i -= 10
        plain: list[Any] = [*self.flags, *self.codes, *self.numbers]
        if i < len(plain):
            return memoryview(plain[i])
        if i == len(plain):
            if self._mapped is not None:
                return self._mapped
            return self.matrix[: self.n].data.cast("B")
        i -= len(plain) + 1
        if self.density is not None:
            if i < len(SAVED):
                return self.density.arrays[SAVED[i]].data.cast("B")
            i -= len(SAVED)
        if i == 0 and self.digests is not None:
            return self.digests.data.cast("B")
        return None

    def rows(self) -> ViewRows:
        """The rows the sections hold; each blob is let go once its strings are made (a
        large view's blobs and strings are not all held at once)."""
        off, buf = self.blobs[2]  # the metadata JSON: bytes, at byte offsets
        # lean rows (float16 views; every JSON kept is "{}" at least): none kept or taken
        rows = ViewRows(lean=self.matrix.dtype == HALF or (self.n > 0 and int(off[-1]) == 0))
        rows.ids, rows.texts = self._strings(0), self._strings(1)
        if rows.lean:
            rows.metas = [NO_META] * self.n
        else:
            bounds, mv = off.tolist(), memoryview(buf if buf is not None else b"")
            rows.metas = [bytes(mv[a:b]) for a, b in itertools.pairwise(bounds)]
            del mv
        self.blobs[2] = (off, None)
        for name in (3, 4):
            codes = rows.roles if name == 3 else rows.sessions
            codes.names = self._strings(name)
            codes.code = {s: j for j, s in enumerate(codes.names)}
        rows.own_text, rows.has_vector, rows.kind = self.flags
        rows.role, rows.session = self.codes
        for f, a in zip(_NUMBERS, self.numbers, strict=True):
            setattr(rows, f, a)
        rows.chars = int(self.blobs[0][0][-1] + self.blobs[1][0][-1])
        rows.chars += 0 if rows.lean else int(off[-1])
        return rows

    def _strings(self, k: int) -> list[str]:
        off, buf = self.blobs[k]
        self.blobs[k] = (off, None)
        return _split(off, buf)


def _split(off: I64, buf: bytearray | None) -> list[str]:
    """The strings of a blob at character offsets ``off`` (ValueError: they do not fit)."""
    text = buf.decode("utf-8", "surrogatepass") if buf is not None else ""
    bounds = off.tolist()
    if len(text) != bounds[-1]:
        raise ValueError("the offsets do not fit the text")
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


class Loaded(NamedTuple):
    """A file's rows and matrix, the ``max_seq`` to replay changes after, the density it
    held (None: none), the rows' layout token ("": a file saved before tokens) and the
    layouts its first rows are, with their counts (``layout_bases``: a view saved in a
    database, ``graph_file.py``)."""

    rows: ViewRows
    matrix: Matrix
    max_seq: int
    density: SavedDensity | None
    layout: str = ""
    bases: Bases = ()
    digests: U64 | None = None  # each row's record-text digest (None: not saved)


def load(
    place: ViewPlace | None, collection: str, state: CollectionState, dims: int, min_rows: int = 0
) -> Loaded | None:
    """What ``collection``'s saved view holds when it holds for ``state`` and ``dims``
    (module doc); one that does not is removed. None without asking ``place`` when the
    collection has fewer than ``min_rows`` records (no view of fewer is saved, and no
    collection shrinks without a removal, which ends what was saved)."""
    if place is None or state.count < min_rows:
        return None
    reader: list[_Reader] = []

    def check(meta: dict[str, Any]) -> bool:
        reader.clear()  # (a read started again)
        ok = (
            meta.get("version") in READS
            and meta.get("dims") == dims
            and str(meta.get("matrix", "float32")) in MATRIX_TYPES
            and lexical_files.holds(meta, state)
            and all(isinstance(meta.get(k), int) for k in ("rows", "roles", "sessions", "max_seq"))
            # a store put back from an older copy (a restore) has the same collection and
            # no removal, but not the records written after the copy that the file holds
            and meta["max_seq"] <= state.max_seq
        )
        if ok:
            try:
                reader.append(_Reader(meta))
            except (KeyError, TypeError, ValueError):
                return False
        return ok

    existed, meta = place.read(collection, check, lambda i, size: reader[0].target(i, size))
    got = None
    if meta is not None:
        try:
            r = reader[0]
            layout = meta.get("layout")
            layout = layout if isinstance(layout, str) else ""
            rows = r.rows()
            got = Loaded(
                rows, r.matrix, int(meta["max_seq"]), r.density, layout, _bases(meta), r.digests
            )
        except (ValueError, UnicodeDecodeError):
            place.remove(collection)
    if got is None and existed:
        log.info("view.saved_rows_dropped", collection=collection[:200])
    return got


def _bases(meta: dict[str, Any]) -> Bases:
    """The header's ``layout_bases`` that are well formed."""
    got = meta.get("layout_bases")
    out: list[tuple[str, int]] = []
    for base in got if isinstance(got, list) else ():
        if isinstance(base, list) and len(base) == 2:
            token, rows = base
            if isinstance(token, str) and isinstance(rows, int) and 0 <= rows <= meta["rows"]:
                out.append((token, rows))
    return tuple(out)


class SavedView(Protocol):
    """What :class:`RowsFile` reads of a view (:class:`~sidecar.assembly.cache.
    CollectionView`)."""

    name: str
    rows: ViewRows
    gen: int
    stamp: int
    touched: list[str]
    layout: str
    layout_bases: Bases

    @property
    def matrix(self) -> Matrix | None: ...


class RowsFile:
    """When a view saves its rows (module doc), the save running, and the density to
    save with them."""

    def __init__(self, min_rows: int) -> None:
        self.min_rows = min_rows
        self.changed = 0  # rows loaded or changed since the file was written or read
        self.thread: threading.Thread | None = None
        self.gen = -1  # the view's ``gen`` when its rows were those of the file
        self.with_density = False  # whether that file holds the density
        self.density: Density | None = None  # the view's (told by density_synced)
        self.store: StoreBackend | None = None  # a save checks the state there

    def loaded(self, gen: int, changed: int, got: Loaded | None) -> None:
        """The view was loaded (``gen``; from ``got``, then ``changed`` rows replayed, or
        all of them from the store)."""
        self.changed = changed
        self.gen = gen if got is not None else -1
        self.with_density = got is not None and got.density is not None
        self.density = None

    def _in_step(self, view: SavedView) -> Density | None:
        """The view's density when it is in step with the view's rows (None: not)."""
        d = self.density
        if d is None or d.key is None or d.key[0] != view.stamp:
            return None
        if d.n != len(view.rows) or d.seen != len(view.touched):
            return None
        return d

    def save(self, place: ViewPlace | None, view: SavedView, state: CollectionState) -> None:
        """Save when enough changed since the file and no save is running."""
        n = len(view.rows)
        if place is None or n < self.min_rows or view.matrix is None:
            return
        if self.changed < max(SAVE_MIN_CHANGED, n // 10):
            return
        self._start(place, view, state)

    def density_synced(
        self, place: ViewPlace | None, view: SavedView, state: CollectionState | None, d: Density
    ) -> None:
        """``d`` was synced with the view: saved with the rows when the file holds the
        rows as they are but not the density yet (a first build after a load)."""
        self.density = d
        if place is None or state is None or self.with_density or self.gen != view.gen:
            return
        if len(view.rows) >= self.min_rows and self._in_step(view) is not None:
            self._start(place, view, state)

    def _start(self, place: ViewPlace, view: SavedView, state: CollectionState) -> None:
        if self.thread is not None and self.thread.is_alive():
            return
        mat = view.matrix
        assert mat is not None
        d = self._in_step(view)
        density = None if d is None else d.saved()  # copied once, for the save only
        snap = snapshot(view.name, state, view.rows, mat, density, view.layout, view.layout_bases)
        self.thread = save_in_background(place, snap, self.store)
        self.changed = 0
        self.gen, self.with_density = view.gen, density is not None

    def close(self, wait: float) -> None:
        if self.thread is not None:
            self.thread.join(wait)
            self.thread = None
