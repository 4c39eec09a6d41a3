"""Exact top-k cosine over a large row matrix, with an int8 prefilter.

Why: ``assemble`` scores every record of the namespace's raw history against the query.
At 52k x 384 the float32 product reads 80 MB per call: memory bandwidth bounds it at
~4.5 ms on the benchmark machine, and it evicts the embedder's weights from the last-level
cache, which slows the next query embedding too. An int8 copy of the rows is a quarter of
that, and onnxruntime's integer matrix-vector kernel (MLAS, already a dependency through
the embedder) scores it in 0.5-1 ms on two threads.

The int8 scores are only used to decide which rows to score exactly; the result is the
float32 top k, not an approximation of it. With ``x_i`` a unit row, ``x^_i = s_i * x8_i``
its per-row scaled int8 copy, ``q`` the unit query and ``q^ = s_q * q8`` its int8 copy::

    |q . x_i - q^ . x^_i| <= |q . (x_i - x^_i)| + |(q - q^) . x^_i|
                          <= ||x_i - x^_i|| + ||q - q^|| * ||x^_i||  =: bound

(Cauchy-Schwarz, ``||q|| = 1``), taken with the largest row error and row norm in the set.
At least ``k`` rows score ``>= a_k`` (the k-th largest approximate score), so the true
k-th score is ``>= a_k - bound``; a row whose approximate score is below ``a_k - 2*bound``
cannot reach it. Every other row is re-scored in float32 (a few hundred rows here), and
those exact scores are ranked. :data:`SLACK` absorbs float32 rounding in both products.

:class:`Int8Rows` is the int8 shadow of a float32 row matrix, kept in step row by row by
its owner (``sidecar.assembly.service._Coll``); :class:`Scan` is one query's view of a
matrix (exact scores when the matrix is small or has no shadow).
"""

from __future__ import annotations

import os
import threading

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
import structlog
from onnx import TensorProto, helper

log = structlog.get_logger(__name__)

F32 = npt.NDArray[np.float32]
I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]

#: Matrices with fewer rows are scored exactly in float32 (the product is cheap there and
#: the shadow would only cost memory).
MIN_ROWS = 8192
#: Threads of the kernel. The scan runs after the query embedding, when the embedder's
#: core is idle again, and it is bound by memory bandwidth that one core does not use
#: up: two threads cut it from 1.2 to 0.5-0.9 ms at 52k x 384 (docs/memory.md).
KERNEL_THREADS = min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
#: Absolute allowance for float32 rounding in the approximate and the exact product.
SLACK = 1e-4

# ---------------------------------------------------------------- the integer kernel
#
# The kernel is one ONNX ``MatMulInteger`` node: Y[1, N] = A[1, D] (uint8) x B[D, N]
# (int8), int32 accumulation. A has no zero-point input: the query goes in as ``q8 + 128``
# and ``128 * sum_j x8_ij`` is subtracted afterwards, which keeps onnxruntime on its fast
# zero-point-free path (1.3 ms vs 3.5 ms at 52k x 384).


def kernel_model() -> bytes:
    """The serialized ONNX model of the integer kernel (opset 13, IR version 8)."""
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["A", "B"], ["Y"])],
        "int8scan",
        [
            helper.make_tensor_value_info("A", TensorProto.UINT8, [1, "D"]),
            helper.make_tensor_value_info("B", TensorProto.INT8, ["D", "N"]),
        ],
        [helper.make_tensor_value_info("Y", TensorProto.INT32, None)],
    )
    model = helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 13)])
    data: bytes = model.SerializeToString()
    return data


_session: ort.InferenceSession | None = None
_session_failed = False
_session_lock = threading.Lock()


def _kernel() -> ort.InferenceSession | None:
    """The shared kernel session (created on first use; None if onnxruntime refuses it,
    in which case every scan is exact in float32)."""
    global _session, _session_failed
    if _session is not None or _session_failed:
        return _session
    with _session_lock:
        if _session is None and not _session_failed:
            so = ort.SessionOptions()
            so.intra_op_num_threads = KERNEL_THREADS
            so.inter_op_num_threads = 1
            # no busy-waiting pool threads after a scan (they would take a core from the
            # ranking that follows it)
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
            so.log_severity_level = 3
            try:
                _session = ort.InferenceSession(
                    kernel_model(), so, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:  # pragma: no cover - depends on the onnxruntime build
                _session_failed = True
                log.warning("int8scan.kernel_unavailable", error=str(exc))
    return _session


# ------------------------------------------------------------------------ the shadow


class Int8Rows:
    """Per-row scaled int8 copy of a float32 matrix of unit rows (zero rows allowed).

    Stored transposed (``D x rows``, C-contiguous) because that is the layout the kernel
    reads fastest, in two blocks: ``main``, exactly as wide as the rows it holds, and
    ``tail``, where appended rows go (its capacity doubles; unused columns are zero).
    The kernel's cost follows the columns it is given, so a spare capacity in one block
    would be scanned on every query (52k rows with a quarter spare: 1.75 ms instead of
    1.2); the tail's spare columns stay few, and the tail is merged into ``main`` once it
    holds a quarter as many rows. ``err_max``/``norm_max`` only grow between
    :meth:`assign` calls (a replaced row may have had the largest error): the bound stays
    valid, at worst a little loose.
    """

    TAIL_MIN = 1024  # first capacity of the tail block

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self.n = 0
        self.main: npt.NDArray[np.int8] = np.zeros((dims, 0), dtype=np.int8)
        self.tail: npt.NDArray[np.int8] = np.zeros((dims, 0), dtype=np.int8)
        self.scale = np.zeros(0, dtype=np.float32)  # s_i
        self.offset = np.zeros(0, dtype=np.float32)  # s_i * 128 * sum_j x8_ij
        self.err_max = 0.0
        self.norm_max = 0.0

    def columns(self) -> npt.NDArray[np.int8]:
        """The ``D x n`` int8 rows as one array (a copy; for checks)."""
        return np.concatenate([self.main, self.tail[:, : self.n - self.main.shape[1]]], axis=1)

    def assign(self, mat: F32) -> None:
        """Rebuild from the rows of ``mat``."""
        n = int(mat.shape[0])
        self.main = np.zeros((self.dims, n), dtype=np.int8)
        self.tail = np.zeros((self.dims, 0), dtype=np.int8)
        self.scale = np.zeros(n, dtype=np.float32)
        self.offset = np.zeros(n, dtype=np.float32)
        self.err_max = self.norm_max = 0.0
        self.n = n
        for lo in range(0, n, 8192):  # bounded temporaries
            self.set_rows(lo, mat[lo : lo + 8192])

    def set_rows(self, start: int, rows: F32) -> None:
        """Quantize ``rows`` into positions ``start, start + 1, ...``: existing rows are
        rewritten, the rest appended (``start <= n``)."""
        m = int(rows.shape[0])
        if m == 0:
            return
        if start > self.n:
            raise ValueError(f"rows must be contiguous: start {start} > n {self.n}")
        rows = np.asarray(rows, dtype=np.float32).reshape(m, self.dims)
        amax = np.abs(rows).max(axis=1)
        scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
        q = np.clip(np.rint(rows / scale[:, None]), -127, 127).astype(np.int8)
        approx = q.astype(np.float32) * scale[:, None]
        self.err_max = max(self.err_max, float(np.linalg.norm(rows - approx, axis=1).max()))
        self.norm_max = max(self.norm_max, float(np.linalg.norm(approx, axis=1).max()))
        end = start + m
        if end > self.n:
            self._make_room(end)
        w = self.main.shape[1]
        if start < w:
            cut = min(end, w)
            self.main[:, start:cut] = q[: cut - start].T
        if end > w:
            lo = max(start, w)
            self.tail[:, lo - w : end - w] = q[lo - start :].T
        self.scale[start:end] = scale
        self.offset[start:end] = scale * 128.0 * q.sum(axis=1, dtype=np.int64).astype(np.float32)
        self.n = max(self.n, end)
        if self.n - w > w // 4:
            self._merge()

    def _make_room(self, rows: int) -> None:
        w = self.main.shape[1]
        need = rows - w
        if need > self.tail.shape[1]:
            cap = max(self.TAIL_MIN, 2 * need)
            tail = np.zeros((self.dims, cap), dtype=np.int8)
            tail[:, : self.n - w] = self.tail[:, : self.n - w]
            self.tail = tail
        if rows > self.scale.size:
            extra = max(rows, 2 * self.scale.size) - self.scale.size
            self.scale = np.concatenate([self.scale, np.zeros(extra, np.float32)])
            self.offset = np.concatenate([self.offset, np.zeros(extra, np.float32)])

    def _merge(self) -> None:
        self.main = np.ascontiguousarray(self.columns())
        self.tail = np.zeros((self.dims, 0), dtype=np.int8)

    def approx(self, q: F32) -> tuple[F32, float] | None:
        """``(scores / s_q, bound / s_q)`` for the unit query ``q``: approximate cosines
        of the first :attr:`n` rows and the bound on their error, both in units of the
        query's scale (comparisons only need them consistent). None when the kernel is
        unavailable."""
        kernel = _kernel()
        if kernel is None or self.n == 0:
            return None
        amax = float(np.abs(q).max())
        if amax <= 0:
            return None
        sq = amax / 127.0
        q8 = np.clip(np.rint(q / sq), -127, 127)
        q_err = float(np.linalg.norm(q - q8 * sq))
        a = (q8 + 128).astype(np.uint8).reshape(1, self.dims)
        n, w = self.n, self.main.shape[1]
        scores = np.empty(n, dtype=np.float32)
        try:
            if w:
                scores[:w] = kernel.run(None, {"A": a, "B": self.main})[0][0]
            if n > w:
                scores[w:] = kernel.run(None, {"A": a, "B": self.tail})[0][0, : n - w]
        except Exception as exc:  # the exact float32 product still answers
            log.warning("int8scan.kernel_failed", error=str(exc), rows=self.n)
            return None
        scores *= self.scale[:n]
        scores -= self.offset[:n]
        bound = self.err_max + q_err * self.norm_max
        return scores, (bound + SLACK) / sq


# ------------------------------------------------------------------------ one query


class Scan:
    """One query against one matrix: exact top-k over all rows or a subset of them."""

    def __init__(self, mat: F32, q: F32, shadow: Int8Rows | None) -> None:
        self.mat = mat
        self.q = q
        self.exact: F32 | None = None
        self.approx: F32 | None = None
        self.bound = 0.0
        got = shadow.approx(q) if shadow is not None and shadow.n == len(mat) else None
        if got is None:
            self.exact = mat @ q
        else:
            self.approx, self.bound = got

    def __len__(self) -> int:
        return int(self.mat.shape[0])

    def sims(self, rows: I64) -> F32:
        """Exact cosines of ``rows``."""
        if self.exact is not None:
            return self.exact[rows]
        out: F32 = self.mat[rows] @ self.q
        return out

    def top(self, k: int, subset: I64 | None = None) -> tuple[I64, F32]:
        """``(positions, cosines)`` of the exact top ``k``, best first (ties: lower
        position first). Positions index ``subset`` when given, else the rows."""
        n = len(self) if subset is None else int(subset.size)
        if k <= 0 or n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if self.exact is not None:
            scores = self.exact if subset is None else self.exact[subset]
            pos = np.arange(n) if k >= n else np.argpartition(scores, n - k)[n - k :]
            sims = scores[pos]
        else:
            assert self.approx is not None
            a = self.approx if subset is None else self.approx[subset]
            pos = np.arange(n) if k >= n else _within(a, k, 2.0 * self.bound)
            sims = self.sims(pos if subset is None else subset[pos])
        order = np.lexsort((pos, -sims))[:k]
        return pos[order].astype(np.int64, copy=False), sims[order]


def _within(a: F32, k: int, margin: float) -> I64:
    """Positions whose score is at least the k-th largest minus ``margin`` (``k < len(a)``).

    The k-th largest is found on a short list: the k-th largest of every ``step``-th
    score is a lower bound of it (a subset's k-th largest never exceeds the set's), so
    the scores at or above that bound contain the true k-th, and selecting among them
    avoids a partition of all the scores (0.3 ms at 52k)."""
    n = a.size
    step = n // (8 * k) if n >= 16 * k else 1
    if step >= 4:
        floor = np.partition(a[::step], -k)[-k]
        head = np.flatnonzero(a >= floor)
        vals = a[head]
        kth = np.partition(vals, vals.size - k)[vals.size - k]
        out: I64 = head[vals >= kth - margin]
        return out
    kth = np.partition(a, n - k)[n - k]
    return np.flatnonzero(a >= kth - margin)
