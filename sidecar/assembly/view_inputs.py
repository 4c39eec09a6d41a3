"""Planner input read from the cached views: the durable->history twin map
(:class:`Twins`) and the durable memories' dense top through it (:func:`durable_top`),
authored rules in authored order (:func:`authored_nodes`) and the
host's messages as session turns (:func:`message_turns`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from sidecar.assembly.cache import CollectionView
from sidecar.assembly.candidates import Candidate
from sidecar.assembly.scoring import F32
from sidecar.assembly.selection import AuthoredNode
from sidecar.assembly.view_matrix import full, positive_rows
from sidecar.assembly.view_rows import as_int as _int
from sidecar.assembly.view_rows import as_str as _str
from sidecar.engines import int8scan
from sidecar.engines.int8scan import Scan
from sidecar.memory.core import layout as C
from sidecar.memory.core.tokens import message_text
from sidecar.store.types import Record


class Twins:
    """Durable memory row -> the row of its copy in the namespace's raw history with the
    same vector, or -1 (kept in step incrementally; rebuilt after a full reload)."""

    def __init__(self, turns: str) -> None:
        self.turns = turns
        self.rows = np.zeros(0, dtype=np.int64)
        self.stamps = (-1, -1)
        self.seen = (0, 0)  # how much of user.touched / turns.touched is accounted for
        # derived from rows: durable rows with a twin, their history rows, the others
        self.have = np.zeros(0, dtype=np.int64)
        self.src = np.zeros(0, dtype=np.int64)
        self.rest = np.zeros(0, dtype=np.int64)

    def update(self, user: CollectionView, turns: CollectionView) -> npt.NDArray[np.int64]:
        n = len(user.rows)
        if self.stamps != (user.stamp, turns.stamp):
            self.rows = np.full(n, -1, dtype=np.int64)
            redo: Iterable[int] = range(n)
        else:
            old = self.rows.shape[0]
            if n > old:
                self.rows = np.concatenate([self.rows, np.full(n - old, -1, dtype=np.int64)])
            ids = [*user.touched[self.seen[0] :], *turns.touched[self.seen[1] :]]
            redo = sorted({i for i in (user.by_id.get(x) for x in ids) if i is not None})
        self.stamps = (user.stamp, turns.stamp)
        self.seen = (len(user.touched), len(turns.touched))
        redo = np.asarray(list(redo), dtype=np.int64)
        if redo.size:
            umat, tmat = user.matrix, turns.matrix
            assert umat is not None and tmat is not None
            by_id = turns.by_id
            cand = np.fromiter(
                (by_id.get(user.ids[i], -1) for i in redo.tolist()),
                dtype=np.int64,
                count=redo.size,
            )
            self.rows[redo] = -1
            for lo in range(0, redo.size, 4096):  # bounded temporaries
                r, c = redo[lo : lo + 4096], cand[lo : lo + 4096]
                ok = c >= 0
                r, c = r[ok], c[ok]
                u, t = umat[r], tmat[c]
                if u.dtype != t.dtype:  # one view float16 (view_rows.Matrix): compare rounded
                    half = np.float16
                    u, t = u.astype(half, copy=False), t.astype(half, copy=False)
                same = np.all(u == t, axis=1)
                self.rows[r[same]] = c[same]
        if redo.size or self.have.size + self.rest.size != n:
            mask = self.rows >= 0
            self.have = np.flatnonzero(mask)
            self.src = self.rows[self.have]
            self.rest = np.flatnonzero(~mask)
        return self.rows


def durable_top(
    twins: dict[str, Twins],
    user: CollectionView,
    turns: CollectionView,
    qvec: F32,
    tscan: Scan,
    k: int,
) -> list[int]:
    """Rows of the durable memories' exact dense top ``k``. A durable record whose
    history copy has the same vector (ingest writes both with one embedding) is scored
    through the history's scan, restricted to those copies; the others are scored on
    their own. ``twins``: the twin maps by durable collection (kept between calls)."""
    tw = twins.get(user.name)
    if tw is None or tw.turns != turns.name:
        tw = Twins(turns.name)
        twins[user.name] = tw
    tw.update(user, turns)
    rows: list[npt.NDArray[np.int64]] = []
    sims: list[F32] = []
    if tw.have.size:
        pos, s = tscan.top(k, tw.src)
        rows.append(tw.have[pos])
        sims.append(s)
    if tw.rest.size:
        mat = user.matrix
        assert mat is not None
        if tw.rest.size < int8scan.MIN_ROWS:  # a few rows: a product over them alone
            pos, s = Scan(full(mat[tw.rest]), qvec, None).top(k)
        else:  # many: the collection's own (prefiltered) scan
            own = user.scan(qvec)
            assert own is not None
            pos, s = own.top(k, tw.rest)
        rows.append(tw.rest[pos])
        sims.append(s)
    if not rows:
        return []
    r, v = np.concatenate(rows), np.concatenate(sims)
    order = np.lexsort((r, -v))[:k]
    return positive_rows(r[order], v[order], k >= len(user.records))


def authored_nodes(coll: CollectionView, tier: int) -> list[AuthoredNode]:
    """Authored rules in authored order: by source document, then node ordinal."""

    def order(r: Record) -> tuple[str, int, str]:
        ordinal = _int(r.metadata.get("ordinal"))
        doc = _str(r.metadata.get("source_doc")) or r.id.rsplit("#", 1)[0]
        return (doc, ordinal if ordinal is not None else 0, r.id)

    out: list[AuthoredNode] = []
    for r in sorted(coll.records, key=order):
        text = r.text or _str(r.metadata.get("text"))
        if text.strip():
            out.append(AuthoredNode(r.id, text, tier, coll.name, metadata=r.metadata))
    return out


def message_turns(
    messages: Sequence[Mapping[str, Any]],
    session_id: str,
    now: int,
    stored: Sequence[Candidate] = (),
) -> list[Candidate]:
    """The host's current messages as session turns (the tail is taken from them).

    A message without an id takes the id ingest gave the same turn: the k-th message with
    a given role and text takes the k-th stored turn with them. Otherwise the tail and the
    stored copies of the same turn would look like two turns and both be injected."""
    ids_of: dict[tuple[str, str], list[str]] = {}
    for c in stored:
        ids_of.setdefault((c.role.strip().lower(), c.text.strip()), []).append(c.covered[0])
    out: list[Candidate] = []
    n = len(messages)
    for i, m in enumerate(messages):
        try:
            text = message_text(m.get("content"))
        except TypeError:
            text = ""
        mid = m.get("id")
        if isinstance(mid, str) and mid.strip():
            tid = mid
        else:
            same = ids_of.get((_str(m.get("role")).strip().lower(), text.strip()))
            tid = same.pop(0) if same else f"msg:{i}"
        ts = _int(m.get("ts"))
        out.append(
            Candidate(
                kind="turn",
                collection=C.SESSION_PREFIX + session_id,
                id=tid,
                text=text,
                scope="session",
                turn_ids=(tid,),
                session_id=session_id,
                role=_str(m.get("role")),
                ts=ts if ts is not None else now - (n - i),
                seq=i,
            )
        )
    return out
