"""The rows of a view whose candidates pass ``search``'s filters, from its arrays."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sidecar.assembly.view_rows import KINDS, NONE, ViewRows

if TYPE_CHECKING:
    from sidecar.assembly.selection import HitFilter


def rows_where(rows: ViewRows, filters: HitFilter) -> list[int]:
    """The rows whose candidates pass ``search``'s filters (:meth:`HitFilter.passes`:
    role and kind equal, time within ``since..until``, inclusive; a candidate without
    a time fails a time filter), read from the arrays without building candidates."""
    role, kind, since, until = filters.role, filters.kind, filters.since, filters.until
    keep = np.ones(len(rows), dtype=bool)
    if role is not None:
        code = rows.roles.code.get(role)
        if code is None:
            return []
        keep &= np.frombuffer(rows.role, dtype=np.uint32) == code
    if kind is not None:
        if kind not in KINDS:
            return []
        keep &= np.frombuffer(bytes(rows.kind), dtype=np.uint8) == KINDS.index(kind)
    if since is not None or until is not None:
        ts = np.frombuffer(rows.ts, dtype=np.int64)
        keep &= ts != NONE
        if since is not None:
            keep &= ts >= since
        if until is not None:
            keep &= ts <= until
    return [int(i) for i in np.flatnonzero(keep).tolist()]
