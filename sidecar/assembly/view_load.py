"""Loading a view's rows and matrix: pages of the store's records or columns into
:class:`~sidecar.assembly.view_rows.ViewRows` and a matrix of unit rows, without holding
every record's vector twice, and the unit vectors themselves (a page at a time, with the
bits of one vector at a time)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from sidecar.assembly.view_rows import F32, FULL, Matrix, ViewRows, decode_fields
from sidecar.store.types import Record

if TYPE_CHECKING:
    from sidecar.store.interface import StoreBackend


#: Records read per page when a view is loaded: their vectors go into the matrix page by
#: page, so a load never holds every record's vector twice (the store's rows and the
#: matrix; 300 MB more peak memory at 100k records before it was paged).
READ_PAGE = 2048


def load_rows(
    name: str,
    pages: Iterable[list[Record]],
    count: int,
    dims: int,
    dtype: np.dtype[Any] = FULL,
    lean: bool = False,
) -> tuple[ViewRows, Matrix]:
    """The rows of ``name``'s records (in the order given, ``count`` expected) and the
    matrix of their unit vectors (rows of ``dtype``: the float32 unit vector, rounded
    once to float16 for :data:`HALF`), one page at a time: a page's records (with their
    vectors and decoded metadata) are dropped once their rows are kept. ``lean``: the
    rows keep no metadata (:class:`ViewRows`)."""
    mat: Matrix = np.zeros((capacity(count), dims), dtype=dtype)
    rows = ViewRows(lean)
    for page in pages:
        mat = _records_into(rows, mat, name, page, dims)
    return rows, mat


def read_rows(
    store: StoreBackend,
    name: str,
    count: int,
    dims: int,
    dtype: np.dtype[Any] = FULL,
    lean: bool = False,
) -> tuple[ViewRows, Matrix]:
    """:func:`load_rows` of every record of ``name`` (``count`` expected), read from the
    store as pages of columns (``StoreBackend.columns``): the same rows and matrix,
    without a record per row or the metadata's other keys decoded. A page whose metadata
    is not all JSON objects is read again as records, which say what such metadata is
    (``{}``, or a damaged record skipped)."""
    mat: Matrix = np.zeros((capacity(count), dims), dtype=dtype)
    rows = ViewRows(lean)
    after: str | None = None
    while (cols := store.columns(name, after, READ_PAGE)).ids:
        try:
            metas = [decode_fields(m) for m in cols.metas]
        except msgspec.DecodeError:
            # every record of such a page may be damaged (and skipped): the load goes on
            # after the page, not after what the records gave back
            page = store.list_records(name, after_id=after, limit=READ_PAGE, include_vectors=True)
            mat = _records_into(rows, mat, name, page, dims)
        else:
            a = len(rows)
            mat = with_room(mat, a, a + len(cols.ids))
            vectors_into(mat[a : a + len(cols.ids)], cols.vectors, dims)
            nonzero: list[bool] = np.any(mat[a : a + len(cols.ids)], axis=1).tolist()
            rows.extend_columns(name, cols, metas, nonzero)
        after = cols.ids[-1]
    return rows, mat


def with_room(mat: Matrix, live: int, rows: int) -> Matrix:
    """``mat`` (``live`` rows filled) with room for ``rows``: more were written since the
    state was read. Only the live rows are copied: the spare ones stay untouched, so not
    resident."""
    if rows <= mat.shape[0]:
        return mat
    bigger: Matrix = np.zeros((capacity(rows), mat.shape[1]), dtype=mat.dtype)
    bigger[:live] = mat[:live]
    return bigger


def _records_into(rows: ViewRows, mat: Matrix, name: str, page: list[Record], dims: int) -> Matrix:
    """A page of records appended to ``rows`` and ``mat`` (returned, grown if need be)."""
    a = len(rows)
    b = a + len(page)
    mat = with_room(mat, a, b)
    units_into(mat[a:b], [r.vector for r in page], dims)
    for r in page:
        r.vector = None  # the matrix holds it
    nonzero: list[bool] = np.any(mat[a:b], axis=1).tolist()
    rows.extend(name, page, nonzero)
    return mat


def capacity(rows: int) -> int:
    return max(16, rows + rows // 4)


def units_into(out: Matrix, vectors: Sequence[Any], dims: int) -> None:
    """``out[k] = unit(vectors[k], dims)`` for rows of zeros, with the same bits, a page
    at once (a call per row cost 1.5 s of a 100k-row load). The norm is still each
    vector's own dot product (``np.linalg.norm`` of a 1-D array is the square root of
    that BLAS call); the square root and the division are elementwise in float32, which
    rounds as the scalar ones do (a float32 quotient computed in float64 rounds to the
    same float32)."""
    at: list[int] = []
    vs: list[F32] = []
    for k, vector in enumerate(vectors):
        if vector is not None:
            v = np.asarray(vector, dtype=np.float32).reshape(-1)
            if v.shape[0] == dims:
                at.append(k)
                vs.append(v)
    if vs:
        _scaled_into(out, at, np.stack(vs))


def vectors_into(out: Matrix, vectors: Sequence[bytes | None], dims: int) -> None:
    """:func:`units_into` of vectors given as their float32 bytes (the store's
    :class:`~sidecar.store.rows.Columns`): one array of the page's bytes, no array per
    vector."""
    size = 4 * dims
    at = [k for k, v in enumerate(vectors) if v is not None and len(v) == size]
    if at:
        blob = b"".join([v for v in vectors if v is not None and len(v) == size])
        _scaled_into(out, at, np.frombuffer(blob, dtype=np.float32).reshape(len(at), dims))


def _scaled_into(out: Matrix, at: list[int], page: F32) -> None:
    """``out[at[k]] = page[k] / ||page[k]||`` for the rows long enough to scale. Each
    norm is the row's own dot product as ``v.dot(v)`` computes it: a batch of 1 x d by
    d x 1 products, which ``matmul`` hands to the same BLAS dot one by one (tested bit
    for bit); 20x faster than a call per row. A float16 ``out`` takes each float32
    quotient rounded once."""
    n = np.sqrt(np.matmul(page[:, None, :], page[:, :, None]).reshape(-1))
    keep = n.astype(np.float64) > 1e-12  # the scalar test, on the float64 of the norm
    if len(at) == out.shape[0] and bool(keep.all()):
        np.divide(page, n[:, None], out=out)
    else:
        out[np.asarray(at, dtype=np.int64)[keep]] = page[keep] / n[keep, None]


def unit(vector: Any, dims: int) -> F32:
    out = np.zeros(dims, dtype=np.float32)
    if vector is not None:
        v = np.asarray(vector, dtype=np.float32).reshape(-1)
        if v.shape[0] == dims:
            n = float(np.linalg.norm(v))
            if n > 1e-12:
                out[:] = v / n
    return out
