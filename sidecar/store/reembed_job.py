"""Re-embedding, the part both backends share (``libravdb reembed``; the design is in
``sidecar.store.reembed``'s docstring): start or resume a stage for the new model, stage
every vector record's new vector one batch a transaction, then swap them in at once.

:class:`ReembedJob` does that once for both backends; each supplies its primitives
(``reembed.py`` on a SQLite connection, ``pg/reembed.py`` on a PostgreSQL one): a
transaction, the meta rows, whether a stage exists, creating and discarding it, the vector
collections, a batch of records not staged yet, inserting staged vectors, the progress of
a stage and the final swap.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from sidecar.store import names as N
from sidecar.store.errors import InvalidInput
from sidecar.store.reembed_stage import TARGET_DIMS_KEY, TARGET_KEY, TARGET_MODEL_KEY

EmbedFn = Callable[[list[str]], Any]
Progress = Callable[[int, int | None], None]
F32s = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class ReembedStats:
    records: int
    collections: int
    old_fingerprint: str
    new_fingerprint: str
    embed_dims: int
    resumed: bool
    seconds: float
    blank: int = 0  # records without text: zero vector, nothing embedded


def embed_rows(embed: EmbedFn, texts: list[str], dims: int | None) -> F32s:
    """``embed(texts)`` checked: one row of ``dims`` (any, when None) per text."""
    vecs = np.asarray(embed(texts), dtype=np.float32)
    want = (len(texts), dims if dims is not None else (vecs.shape[1] if vecs.ndim == 2 else -1))
    if vecs.ndim != 2 or vecs.shape != want:
        raise InvalidInput(f"the embedder returned shape {vecs.shape}, expected {want}")
    return vecs


def new_vectors(embed: EmbedFn, texts: list[str], dims: int, new_dims: int) -> tuple[F32s, int]:
    """New vectors for ``texts`` (embedded, cut to the tier, zero where there is no text)
    and how many texts were blank."""
    out = np.zeros((len(texts), dims), dtype=np.float32)
    rows = [i for i, t in enumerate(texts) if t.strip()]
    if rows:
        out[rows] = embed_rows(embed, [texts[i] for i in rows], dims)
    if new_dims < dims:
        return N.normalize_rows(np.ascontiguousarray(out[:, :new_dims])), len(texts) - len(rows)
    return out, len(texts) - len(rows)


@dataclass(frozen=True, slots=True)
class ReembedArgs:
    """``libravdb reembed``'s arguments (see :func:`sidecar.store.backend.reembed`)."""

    embed: EmbedFn
    fingerprint: str
    progress: Progress | None
    embed_dims: int | None
    batch: int
    model: str

    def checked_dims(self) -> int:
        """The new model's dimension (``embed_dims``, or probed with one call), once the
        options are checked."""
        if not self.fingerprint:
            raise InvalidInput("reembed needs the current model's fingerprint")
        if self.batch < 1:
            raise InvalidInput("batch must be >= 1")
        if self.embed_dims is not None:
            return self.embed_dims
        return int(embed_rows(self.embed, ["dimension probe"], None).shape[1])


class _Rows(Protocol):
    def fetchall(self) -> list[Any]: ...


class SqlConn(Protocol):
    """What the shared steps ask of a connection (a sqlite3 or a psycopg one): a query
    without parameters, whose SQL both dialects read alike."""

    def execute(self, sql: str, /) -> _Rows: ...


@dataclass(slots=True)
class ReembedJob(abc.ABC):
    """One re-embed of a store; :meth:`run` does it (see the module docstring)."""

    args: ReembedArgs
    dims: int  # the new model's
    conn: SqlConn
    blank: int = 0

    def run(self, started: float) -> ReembedStats:
        meta = self.meta()
        resumed = self._begin(meta)
        colls = self.vector_collections()
        for _cid, name in colls:
            if N.dims_for_collection(name, self.dims) > self.dims:
                raise InvalidInput(
                    f"collection {name} needs {N.dims_for_collection(name, self.dims)} dims; "
                    f"the model has {self.dims}"
                )
        done, total = self.staged_progress()
        for cid, name in colls:
            done = self._stage(cid, N.dims_for_collection(name, self.dims), done, total)
        self.swap(colls)
        return ReembedStats(
            records=done,
            collections=len(colls),
            old_fingerprint=meta.get("fingerprint", ""),
            new_fingerprint=self.args.fingerprint,
            embed_dims=self.dims,
            resumed=resumed,
            seconds=round(time.monotonic() - started, 3),
            blank=self.blank,
        )

    def _begin(self, meta: dict[str, str]) -> bool:
        """Start a stage for this model, or resume this model's; True when resuming."""
        same = meta.get(TARGET_KEY) == self.args.fingerprint and meta.get(TARGET_DIMS_KEY) == str(
            self.dims
        )
        with self.transaction():
            resumed = same and self.stage_exists()
            if not resumed:  # another model's stage (or none): start afresh
                self.discard_stage()
            self.create_stage()
            self.set_meta(TARGET_KEY, self.args.fingerprint)
            self.set_meta(TARGET_DIMS_KEY, str(self.dims))
            self.set_meta(TARGET_MODEL_KEY, self.args.model)
        return resumed

    def _stage(self, cid: int, new_dims: int, done: int, total: int) -> int:
        """Stage the new vectors of collection ``cid``'s records not staged yet."""
        after = 0
        while rows := self.unstaged(cid, after, self.args.batch):
            vecs, blank = new_vectors(self.args.embed, [t for _rid, t in rows], self.dims, new_dims)
            self.blank += blank
            with self.transaction():
                self.insert_staged([(rid, v) for (rid, _t), v in zip(rows, vecs, strict=True)])
            after = rows[-1][0]
            done += len(rows)
            if self.args.progress is not None:
                self.args.progress(done, total)
        return done

    def switch_model(self) -> None:
        """The end of :meth:`swap`, in its transaction: the new model into meta, the stage
        dropped."""
        self.set_meta("fingerprint", self.args.fingerprint)
        self.set_meta("embed_dims", str(self.dims))
        if self.args.model:
            self.set_meta("model", self.args.model)
        self.discard_stage()

    def meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM meta").fetchall())

    def vector_collections(self) -> list[tuple[int, str]]:
        """(cid, name) of every vector collection, by cid."""
        return self.conn.execute(
            "SELECT cid, name FROM collections WHERE kind = 'vector' ORDER BY cid"
        ).fetchall()

    # ---- the backend's primitives --------------------------------------------------------

    @abc.abstractmethod
    def transaction(self) -> AbstractContextManager[Any]: ...

    @abc.abstractmethod
    def set_meta(self, key: str, value: str) -> None: ...

    @abc.abstractmethod
    def stage_exists(self) -> bool: ...

    @abc.abstractmethod
    def create_stage(self) -> None: ...

    @abc.abstractmethod
    def discard_stage(self) -> None: ...

    @abc.abstractmethod
    def staged_progress(self) -> tuple[int, int]:
        """(records staged, records to re-embed)."""

    @abc.abstractmethod
    def unstaged(self, cid: int, after: int, limit: int) -> list[tuple[int, str]]:
        """(rid, text) of at most ``limit`` records of ``cid`` after rid ``after`` that
        are not staged yet, by rid."""

    @abc.abstractmethod
    def insert_staged(self, rows: Sequence[tuple[int, F32s]]) -> None:
        """Stage (rid, new vector) rows (inside :meth:`transaction`)."""

    @abc.abstractmethod
    def swap(self, colls: list[tuple[int, str]]) -> None:
        """One transaction: the staged vectors into the records, then
        :meth:`switch_model`."""
