"""The memory budget of the retrieval caches (``cache.max_bytes``) and their figures.

:class:`~sidecar.assembly.service.Retrieval` keeps one view per collection
(:class:`~sidecar.assembly.cache.CollectionView`). After each sync the views' estimated
sizes (:func:`view_bytes`) are added up; while the total is over the budget the least
recently used views, other than those the current request reads, are dropped (a dropped
view is read from the store again when a request needs it). A request's own views are
never dropped, so one namespace larger than the budget still answers (the others make
room for it). ``0`` disables the budget (only the 512-collection bound applies).

:class:`CacheFigures` is what ``status`` shows under ``cache``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Container
from dataclasses import dataclass

from sidecar.assembly.cache import CollectionView

#: Estimated bytes of a built candidate kept by a view (the ``Candidate``, its decoded
#: metadata dict and the tuples it holds), measured with tracemalloc on ``make
#: bench-scale``'s generated memories, 20,000 candidates of each 100k view: 2.0 KB for a
#: history record (13 metadata keys), 2.2 KB for a durable memory (25 keys).
CANDIDATE_BYTES = 2_200
#: Built candidates a view keeps between requests; past it they are dropped after a sync
#: and built again on use (a request reads a few hundred rows of a large view). A
#: candidate costs 4-8 us to build on first use; at 20,000 the 50k-memory `make bench`
#: store dropped and rebuilt them every few dozen requests (assemble / embed 2.6x -> 3.1x);
#: at 60,000 (at most ~130 MB a view, counted in the cache budget) a namespace of that
#: size builds each row once.
MADE_MAX = 60_000
#: Default budget: room for one namespace of about 100k memories (its raw history and
#: durable views) beside a few small ones, on a laptop.
DEFAULT_MAX_BYTES = 1 << 30


def view_bytes(view: CollectionView) -> int:
    """An estimate of what ``view`` holds in memory (arrays exactly, the rows' strings by
    their length, built candidates by :data:`CANDIDATE_BYTES`); O(1)."""
    n = len(view.rows)
    mat = view.matrix
    dims = 0 if mat is None else int(mat.shape[1])
    # the rows, float32 or float16 (the spare capacity is never touched)
    vectors = 0 if mat is None else n * dims * mat.itemsize
    shadow = n * (dims + 8) if view.scan_shadow else 0  # the int8 copy, scale and offset
    made = view.made * CANDIDATE_BYTES
    return vectors + shadow + view.bm25.nbytes + view.rows.nbytes + made


@dataclass
class CacheFigures:
    """Counters of the view cache since start (``status.cache``)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    bytes: int = 0  # the views' estimated size after the last sync
    views: int = 0  # collections held
    hits: int = 0  # a view found loaded (unchanged, or brought up to date incrementally)
    loads: int = 0  # a collection read in full (first use, after an eviction, a removal)
    load_ms: float = 0.0  # the time those reads took, in total
    evictions: int = 0  # views dropped to stay within the budget


def evict(
    views: OrderedDict[str, CollectionView],
    keep: Container[str],
    figures: CacheFigures,
    max_views: int,
) -> list[str]:
    """Drop the least recently used ``views`` (first in order) while there are more than
    ``max_views`` or their estimated size is over ``figures.max_bytes``, never one of
    ``keep``; closes them, updates ``figures`` and returns the names dropped. Runs between
    requests (after a sync), so it also drops the built candidates of views that keep
    more than :data:`MADE_MAX` (:meth:`CollectionView.trim`)."""
    for v in views.values():
        v.trim(MADE_MAX)
    sizes = {name: view_bytes(v) for name, v in views.items()}
    total = sum(sizes.values())
    dropped: list[str] = []
    for name in list(views):  # least recently used first
        if len(views) <= max_views and not 0 < figures.max_bytes < total:
            break
        if name in keep:
            continue
        views.pop(name).close()
        total -= sizes[name]
        dropped.append(name)
    figures.evictions += len(dropped)
    figures.bytes, figures.views = total, len(views)
    return dropped
