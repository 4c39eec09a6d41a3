"""An appendable in-memory matrix of unit vectors for exact (brute-force) cosine search."""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

# (rid, score, id)
Candidate = tuple[int, float, str]


class RWLock:
    """Fair (FIFO) reader-writer lock: many readers or one writer, served in arrival order.

    Consecutive readers share the lock; a writer waits for its turn and for the readers
    ahead of it. FIFO order stops a thread that releases and re-acquires in a loop (the
    indexer) from starving the others (the store writer, searches). Not reentrant.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._next = 0  # next ticket to hand out
        self._serving = 0  # ticket allowed to enter
        self._readers = 0
        self._writer = False
        self._waiting = 0  # threads blocked in wait(): notify only when there are some

    def _wait_for(self, ticket: int, exclusive: bool) -> None:
        """Block (lock held) until ``ticket`` may enter."""
        self._waiting += 1
        try:
            while self._serving != ticket or self._writer or (exclusive and self._readers > 0):
                self._cond.wait()
        finally:
            self._waiting -= 1

    def acquire_read(self) -> None:
        with self._cond:
            ticket = self._next
            self._next += 1
            if self._serving != ticket or self._writer:
                self._wait_for(ticket, False)
            self._readers += 1
            self._serving += 1
            if self._waiting:
                self._cond.notify_all()  # the next ticket (a reader) may enter too

    def release_read(self) -> None:
        with self._cond:
            self._readers -= 1
            if self._readers == 0 and self._waiting:
                self._cond.notify_all()

    def acquire_write(self) -> None:
        with self._cond:
            ticket = self._next
            self._next += 1
            if self._serving != ticket or self._writer or self._readers:
                self._wait_for(ticket, True)
            self._writer = True
            self._serving += 1

    def release_write(self) -> None:
        with self._cond:
            self._writer = False
            if self._waiting:
                self._cond.notify_all()

    @contextmanager
    def read(self) -> Iterator[None]:
        self.acquire_read()
        try:
            yield
        finally:
            self.release_read()

    @contextmanager
    def write(self) -> Iterator[None]:
        self.acquire_write()
        try:
            yield
        finally:
            self.release_write()


def top_candidates(rids: I64, scores: F32, ids: list[str] | None, k: int) -> list[Candidate]:
    """Top ``k`` of (rid, score) by score desc then id asc (all when k <= 0)."""
    n = scores.shape[0]
    if n == 0:
        return []
    if 0 < k < n:
        kth = np.partition(scores, n - k)[n - k]
        sel = np.nonzero(scores >= kth)[0]
    else:
        sel = np.arange(n)
    out = [
        (int(rids[i]), float(scores[i]), ids[i] if ids is not None else "") for i in sel.tolist()
    ]
    out.sort(key=lambda c: (-c[1], c[2]))
    return out[:k] if k > 0 else out


class ExactSet:
    """Unit vectors keyed by record rid, with their ids and vector sequence numbers.

    Slots are appended; removal marks a slot dead; :meth:`compact` reclaims dead slots.
    Not thread-safe: the owner serializes access.
    """

    def __init__(self, dims: int, capacity: int = 64) -> None:
        self.dims = dims
        self._reset(capacity)

    def _reset(self, capacity: int) -> None:
        dims = self.dims
        self._cap = max(8, capacity)
        self._mat: F32 = np.zeros((self._cap, dims), dtype=np.float32)
        self._rids: I64 = np.zeros(self._cap, dtype=np.int64)
        self._vseqs: I64 = np.zeros(self._cap, dtype=np.int64)
        self._valid = np.zeros(self._cap, dtype=bool)
        self._ids: list[str] = []
        self._n = 0
        self._pos: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._pos)

    def __contains__(self, rid: object) -> bool:
        return rid in self._pos

    @property
    def nbytes(self) -> int:
        return int(self._mat.nbytes + self._rids.nbytes + self._vseqs.nbytes + self._valid.nbytes)

    def vseq_of(self, rid: int) -> int | None:
        pos = self._pos.get(rid)
        return None if pos is None else int(self._vseqs[pos])

    def min_vseq(self) -> int | None:
        if not self._pos:
            return None
        return int(self._vseqs[: self._n][self._valid[: self._n]].min())

    def _grow(self, need: int) -> None:
        cap = self._cap
        while cap < need:
            cap *= 2
        if cap == self._cap:
            return
        mat = np.zeros((cap, self.dims), dtype=np.float32)
        mat[: self._n] = self._mat[: self._n]
        rids = np.zeros(cap, dtype=np.int64)
        rids[: self._n] = self._rids[: self._n]
        vseqs = np.zeros(cap, dtype=np.int64)
        vseqs[: self._n] = self._vseqs[: self._n]
        valid = np.zeros(cap, dtype=bool)
        valid[: self._n] = self._valid[: self._n]
        self._mat, self._rids, self._vseqs, self._valid, self._cap = mat, rids, vseqs, valid, cap

    def put(self, rid: int, rec_id: str, unit: F32, vseq: int) -> None:
        pos = self._pos.get(rid)
        if pos is None:
            if self._n == self._cap:
                if len(self._pos) < self._n // 2:
                    self.compact()
                self._grow(self._n + 1)
            pos = self._n
            self._n += 1
            self._pos[rid] = pos
            self._ids.append(rec_id)
            self._rids[pos] = rid
            self._valid[pos] = True
        else:
            self._ids[pos] = rec_id
        self._mat[pos] = unit
        self._vseqs[pos] = vseq

    def put_many(self, rids: I64, rec_ids: list[str], units: F32, vseqs: I64) -> None:
        """Bulk append of rids that are not present yet (used when loading)."""
        m = int(rids.shape[0])
        if m == 0:
            return
        if any(int(r) in self._pos for r in rids.tolist()):
            for i in range(m):
                self.put(int(rids[i]), rec_ids[i], units[i], int(vseqs[i]))
            return
        self._grow(self._n + m)
        lo, hi = self._n, self._n + m
        self._mat[lo:hi] = units
        self._rids[lo:hi] = rids
        self._vseqs[lo:hi] = vseqs
        self._valid[lo:hi] = True
        self._ids.extend(rec_ids)
        for i, rid in enumerate(rids.tolist()):
            self._pos[rid] = lo + i
        self._n = hi

    def remove(self, rid: int) -> bool:
        pos = self._pos.pop(rid, None)
        if pos is None:
            return False
        self._valid[pos] = False
        dead = self._n - len(self._pos)
        if dead > 1024 and dead > self._n // 2:
            self.compact()
        elif not self._pos:
            self.clear()
        return True

    def clear(self) -> None:
        self._reset(64)

    def compact(self) -> None:
        keep = np.nonzero(self._valid[: self._n])[0]
        m = int(keep.shape[0])
        cap = max(64, 1 << max(0, (m * 2 - 1).bit_length()))
        mat = np.zeros((cap, self.dims), dtype=np.float32)
        mat[:m] = self._mat[keep]
        rids = np.zeros(cap, dtype=np.int64)
        rids[:m] = self._rids[keep]
        vseqs = np.zeros(cap, dtype=np.int64)
        vseqs[:m] = self._vseqs[keep]
        valid = np.zeros(cap, dtype=bool)
        valid[:m] = True
        ids = [self._ids[i] for i in keep.tolist()]
        self._mat, self._rids, self._vseqs, self._valid = mat, rids, vseqs, valid
        self._ids, self._n, self._cap = ids, m, cap
        self._pos = {int(r): i for i, r in enumerate(rids[:m].tolist())}

    def snapshot(self, limit: int) -> tuple[I64, F32, I64]:
        """Up to ``limit`` live entries (oldest slots first): rids, unit vectors, vseqs."""
        idx = np.nonzero(self._valid[: self._n])[0][:limit]
        return self._rids[idx].copy(), self._mat[idx].copy(), self._vseqs[idx].copy()

    def rids(self) -> list[int]:
        return list(self._pos)

    def topk(
        self,
        query: F32,
        k: int,
        exclude: Collection[int] = (),
        allowed: Collection[int] | None = None,
    ) -> list[Candidate]:
        """Exact top-k by cosine (unit vectors: dot product), ties by id ascending."""
        if not self._pos:
            return []
        n = self._n
        mask = self._valid[:n].copy()
        rids = self._rids[:n]
        if allowed is not None:
            mask &= np.isin(rids, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
        if exclude:
            mask &= ~np.isin(rids, np.fromiter(exclude, dtype=np.int64, count=len(exclude)))
        sel = np.nonzero(mask)[0]
        if sel.shape[0] == 0:
            return []
        if sel.shape[0] == n:
            scores = self._mat[:n] @ query
            sub_rids = rids
            ids = self._ids
        else:
            scores = self._mat[sel] @ query
            sub_rids = rids[sel]
            ids = [self._ids[i] for i in sel.tolist()]
        return top_candidates(sub_rids, scores.astype(np.float32, copy=False), ids, k)
