"""Implicit recall's inputs from the retrieval caches (:mod:`sidecar.assembly.implicit`):
whether a query names a speaker, the labels to take out of the turn vectors, and the
candidates over a raw history view, with one :class:`~sidecar.assembly.density.Density`
kept per view."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sidecar.assembly.cache import CollectionView
from sidecar.assembly.candidates import Candidate, named_speakers
from sidecar.assembly.density import Density
from sidecar.assembly.implicit import ImplicitConfig, ImplicitPool, top_rows
from sidecar.assembly.scoring import F32
from sidecar.assembly.selection import AssemblyConfig
from sidecar.assembly.speaker_focus import MAX_SPEAKERS
from sidecar.engines.int8scan import Scan


def implicit_inputs(config: AssemblyConfig, query: str, turns: CollectionView) -> dict[str, Any]:
    """Whether the query names a speaker of the history (``names_speaker``), and the
    speakers whose labels implicit recall needs (``labels``; none when it is off, or when
    the query names one and the hybrid ranking then takes the whole budget)."""
    if not config.implicit.enabled or not query.strip():
        return {}
    speakers = turns.speakers(MAX_SPEAKERS)
    names = bool(named_speakers(query, speakers))
    if names and config.implicit.strong_share <= 0 and not config.explain:
        return {"names_speaker": True}
    return {"names_speaker": names, "labels": tuple(speakers)}


class Densities:
    """One :class:`Density` per raw history view, kept in step with it."""

    def __init__(self) -> None:
        self._by_view: dict[str, Density] = {}

    def drop(self, name: str) -> None:
        self._by_view.pop(name, None)

    def pool(  # noqa: PLR0913 - one query against one view
        self,
        icfg: ImplicitConfig,
        view: CollectionView,
        names_speaker: bool,
        has_labels: bool,
        raw: F32 | None,
        labels: Mapping[str, F32],
        tscan: Scan | None,
        same_vector: bool,
        pool: Sequence[Candidate],
    ) -> ImplicitPool | None:
        """Implicit recall's candidates over ``view`` for the query vector ``raw``: every
        row through the view's scan (``tscan``, the one the dense top-k took, reused when
        it scanned the same vector), or the dense ``pool``'s rows for a view ranked by the
        store's index (no scan)."""
        if not icfg.enabled or raw is None:
            return None
        if names_speaker and not has_labels:  # the hybrid ranking takes the budget
            return ImplicitPool(names_speaker=True)
        mat = view.matrix
        if mat is None or not len(view.records):
            return None
        dens = self._by_view.get(view.name)
        if dens is None:
            dens = self._by_view[view.name] = Density()
        dens.sync(view, labels)
        if not dens.trusted:  # a small history: the hybrid ranking answers alone
            return None
        if tscan is not None and not same_vector:
            tscan = view.scan(raw)
        if tscan is not None:
            rows, scores, standout = top_rows(dens, raw, icfg.candidates, scan=tscan)
        else:
            mine = np.asarray(
                [i for c in pool if (i := view.by_id.get(c.id)) is not None and view.built(i) is c],
                dtype=np.int64,
            )
            rows, scores, standout = top_rows(dens, raw, icfg.candidates, rows=mine, matrix=mat)
        return ImplicitPool(
            tuple(view.candidates(rows.tolist())),
            tuple(scores.tolist()),
            standout,
            names_speaker,
        )
