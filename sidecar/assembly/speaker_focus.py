"""Queries that name a speaker: part of the name's direction is taken out of the query
vector before the dense search.

A transcript turn starts with its speaker's label (``"Caroline: ..."``), so every turn of
that speaker shares the label's direction in embedding space. A question that names the
speaker ("What did Caroline research?") carries the same direction, which lifts all of
the speaker's turns alike, whatever they are about, and crowds the dense top-k with them.
Removing ``weight`` times the query's component along the label's embedding
(``q - w * (q . e) e``, then unit length) leaves the topic to decide; who said it is
still credited by the ranking's speaker term (``scoring``, sigma) and by BM25, which
see the name in the text.

On the LoCoMo dev split (in-process, the daemon's assembly configuration) a weight of
0.5 gave 0.889 evidence recall against 0.872 without, multi-hop 0.697 against 0.637;
every weight from 0.25 to 0.75, with or without the colon in the label, was between
0.883 and 0.889, and leave-one-conversation-out over those ten settings gave 0.880
(docs/memory.md). Only the pool's ranking with the changed vector (the pool gathered
with the original one) gave 0.879: most of the gain is what enters the pool.

How much a name dominates a vector depends on the model, so the weight is part of the
embedding profile (``EmbeddingProfile.speaker_label_weight``, read by
``sidecar.services.daemon_assembly``): all-mpnet-base-v2 sets 0, because 0.5 lowered its
LoCoMo figure (0.877 to 0.870 through the daemon).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import numpy as np
import numpy.typing as npt

from sidecar.assembly.candidates import named_speakers

F32 = npt.NDArray[np.float32]

#: Speakers considered per query: the most frequent of the namespace (a transcript has
#: a few; a store whose texts start "Note: ..." should not make every query scan them).
MAX_SPEAKERS = 64


def speaker_label(name: str) -> str:
    """The text embedded for a speaker: the transcript prefix (``"Caroline:"``)."""
    return f"{name}:"


def named_in(query: str, speakers: Callable[[int], Sequence[str]], weight: float) -> list[str]:
    """The speakers ``query`` names among the :data:`MAX_SPEAKERS` most frequent that
    ``speakers(limit)`` lists; none, and nothing listed, when the focus is off."""
    return named_speakers(query, speakers(MAX_SPEAKERS)) if weight > 0.0 else []


def without_labels(qvec: F32, labels: Sequence[F32], weight: float) -> F32:
    """``qvec`` with ``weight`` of its component along each unit label vector removed
    (one after the other), at unit length; ``qvec`` itself when nothing changes or the
    result would vanish."""
    if weight <= 0.0 or not labels:
        return qvec
    q = qvec.astype(np.float64)
    for e in labels:
        e64 = e.astype(np.float64)
        n = float(np.linalg.norm(e64))
        if n <= 1e-12:
            continue
        e64 /= n
        q = q - weight * float(q @ e64) * e64
    norm = float(np.linalg.norm(q))
    if norm <= 1e-6:
        return qvec
    out: F32 = (q / norm).astype(np.float32)
    return out


class LabelVectors:
    """Embeddings of speaker labels, each computed once (the daemon's embedder does
    not change while it runs) and kept for at most ``limit`` names."""

    def __init__(self, embed: Callable[[list[str]], Awaitable[F32]], limit: int = 1024) -> None:
        self._embed = embed
        self._limit = limit
        self._vecs: dict[str, F32] = {}

    async def get(self, names: Sequence[str]) -> list[F32]:
        missing = [n for n in dict.fromkeys(names) if n not in self._vecs]
        if missing:
            vecs = await self._embed([speaker_label(n) for n in missing])
            if len(self._vecs) + len(missing) > self._limit:
                self._vecs.clear()
            for n, v in zip(missing, vecs, strict=True):
                self._vecs[n] = np.asarray(v, dtype=np.float32)
        return [self._vecs[n] for n in names]

    async def focus(self, qvec: F32 | None, names: Sequence[str], weight: float) -> F32 | None:
        """The query vector with ``weight`` of each named speaker's label taken out."""
        if qvec is None or not names or weight <= 0.0:
            return qvec
        return without_labels(qvec, await self.get(names), weight)
