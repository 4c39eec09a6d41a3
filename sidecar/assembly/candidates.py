"""Retrieval candidates: one stored record (or host message) as the ranking sees it, its
scope parameters, and the features computed once per candidate and kept with it (the
daemon reuses its candidates across calls)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from sidecar.memory.core.layout import SUPERSEDED_BY
from sidecar.memory.core.tokens import estimate_tokens

F32 = npt.NDArray[np.float32]

# ------------------------------------------------------------------------------ scopes


@dataclass(frozen=True, slots=True)
class ScopeParams:
    """Scope weight ``S`` and per-second recency decay ``lambda``."""

    weight: float
    decay_per_s: float


SCOPES: Mapping[str, ScopeParams] = {
    "session": ScopeParams(1.0, 1e-4),  # the active session (outside the tail)
    "history": ScopeParams(0.6, 1e-5),  # the namespace's raw turns of earlier sessions
    "durable": ScopeParams(0.6, 1e-5),  # admitted durable user memory
    "summary": ScopeParams(0.8, 1e-5),  # summaries of compacted history
    "elevated": ScopeParams(1.0, 1e-5),  # guidance shards
    "authored": ScopeParams(0.6, 0.0),  # authored variant nodes do not age
    "dream": ScopeParams(0.6, 1e-5),
    "global": ScopeParams(0.3, 2e-6),
}
DEFAULT_SCOPE = ScopeParams(0.6, 1e-5)


# --------------------------------------------------------------------------- candidate


@dataclass(frozen=True, slots=True)
class Candidate:
    """A record the assembler may inject (see the module doc).

    ``kind``: ``turn`` | ``summary`` | ``memory`` | ``authored`` | ``guidance`` |
    ``dream`` (free-form; ``turn`` and ``summary`` have meaning here). ``turn_ids``: the
    client message ids covered (a raw turn: its own id when empty). ``tokens``: its cost
    (default :func:`estimate_tokens` of ``text``).
    """

    kind: str
    collection: str
    id: str
    text: str
    scope: str = "history"
    turn_ids: tuple[str, ...] = ()
    session_id: str = ""
    role: str = ""
    ts: int | None = None
    seq: int | None = None
    speaker: str = ""
    vector: F32 | None = field(default=None, compare=False, repr=False)
    dense: float | None = None
    lexical: float | None = None
    tokens: int | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # query-independent derived values, computed on first use (see features())
    _features: Features | None = field(
        default=None, init=False, compare=False, repr=False, hash=False
    )

    @property
    def key(self) -> tuple[str, str]:
        return (self.collection, self.id)

    @property
    def cost(self) -> int:
        return self.tokens if self.tokens is not None else estimate_tokens(self.text)

    @property
    def covered(self) -> tuple[str, ...]:
        """Client turn ids this record stands for (a raw turn: its own id)."""
        if self.turn_ids:
            return self.turn_ids
        return (self.id,) if self.kind == "turn" else ()

    @property
    def sources(self) -> frozenset[tuple[str, str]]:
        """``(session_id, turn_id)`` pairs: the same source turn in two scopes has the
        same pair, whatever the record ids."""
        return features(self).sources

    @property
    def is_summary(self) -> bool:
        return self.kind == "summary" or self.metadata.get("type") == "summary"


_SPEAKER_PREFIX = re.compile(r"^\s*([A-Z][\w.'\-]*(?:\s[A-Z][\w.'\-]*){0,2}):\s")


def speaker_of(c: Candidate) -> str:
    """The speaker's name: the field, ``metadata.speaker``/``metadata.name``, else a
    transcript prefix ``"Name: "`` at the start of the text; "" if none."""
    if c.speaker:
        return c.speaker
    if c.metadata:
        for key in ("speaker", "name"):
            v = c.metadata.get(key)
            if isinstance(v, str) and v.strip():
                return v.strip()
    return text_label(c.text)


def text_label(text: str) -> str:
    """The speaker of a transcript line ``"Name: ..."`` (the name its text starts with);
    "" if it has no such prefix."""
    if text.find(":", 0, 48) < 0:  # no prefix: no slice made
        return ""
    m = _SPEAKER_PREFIX.match(text[:48])
    return m.group(1) if m else ""


_CAP_WORD = re.compile(r"\b[A-Z][\w'\-]{2,}")


def named_speakers(query: str, speakers: Iterable[str]) -> list[str]:
    """Speakers the query names: a speaker's full name or first name as a whole word
    (case-insensitive), or a capitalised query word of 3+ letters that starts the
    speaker's first name ("Mel" → "Melanie")."""
    q = query.casefold()
    caps = {w.casefold().removesuffix("'s") for w in _CAP_WORD.findall(query)}
    out: list[str] = []
    for name in dict.fromkeys(s for s in speakers if s):
        full = name.casefold()
        first = full.split()[0]
        if first[:3] not in q:  # each test below needs it: most speakers stop here
            continue
        if (
            re.search(rf"\b{re.escape(full)}\b", q)
            or (len(first) >= 3 and re.search(rf"\b{re.escape(first)}\b", q))
            or any(len(w) >= 3 and first.startswith(w) for w in caps)
        ):
            out.append(name)
    return out


# --------------------------------------------------------------------------- features


class Features:
    """What a candidate brings to every ranking whatever the query, computed once per
    candidate (:func:`features`).

    The daemon reuses the :class:`Candidate` objects of its cached collections across
    calls, so the per-candidate Python work of a ranking (covered source turns, speaker,
    summary decay, authority, the vector as a float32 row) is done once per record
    instead of once per call. A candidate is immutable and its ``metadata`` is treated as
    read-only, except ``access_count``, which the daemon bumps in place and which is
    therefore never cached. :func:`dataclasses.replace` makes a new candidate, with its
    own features.

    ``vector``: the candidate's vector when it already is a 1-D float32 ndarray (the same
    array, never a copy, so a row rewritten in place is seen), else None (converted per
    call). Set by their users on first use: ``terms`` (``set(analyze(text))``, keyword
    coverage without ``terms_of``), ``turn`` (the candidate as a continuity ``Turn``),
    ``session_copy`` (the candidate with scope ``session``) and ``covers`` (a summary's
    sources among the last session turns it was checked against, with those turns).
    """

    __slots__ = (
        "authority",
        "covered",
        "covers",
        "decay",
        "dup_key",
        "is_summary",
        "key",
        "session_copy",
        "sources",
        "speaker",
        "superseded",
        "terms",
        "turn",
        "vector",
    )

    def __init__(  # noqa: PLR0913 - every cached part, set once per candidate
        self,
        key: tuple[str, str],
        covered: tuple[str, ...],
        sources: frozenset[tuple[str, str]],
        is_summary: bool,
        speaker: str,
        decay: float,
        authority: float,
        vector: F32 | None,
        superseded: object = None,
    ) -> None:
        self.key = key
        self.covered = covered
        self.sources = sources
        self.is_summary = is_summary
        self.speaker = speaker
        self.decay = decay  # a summary's decay rate in [0, 1] (summary_quality); 0 otherwise
        self.authority = authority
        self.vector = vector
        # replaced by a correction (memory.update): ranks far below the current fact
        self.superseded = bool(superseded)
        self.terms: frozenset[str] | None = None
        self.dup_key: str | None = None  # duplicates.duplicate_key
        self.turn: Any = None
        self.session_copy: Candidate | None = None
        self.covers: tuple[tuple[Candidate, ...], frozenset[tuple[str, str]]] | None = None


_F32_DTYPE = np.dtype(np.float32)


def features(c: Candidate) -> Features:
    """The cached :class:`Features` of ``c`` (computed on first use)."""
    f = c._features
    if f is None:
        covered = c.covered
        is_summary = c.is_summary
        decay = 0.0
        if is_summary:
            raw = c.metadata.get("decay_rate")
            if not isinstance(raw, int | float):
                conf = c.metadata.get("confidence")
                raw = 1.0 - float(conf) if isinstance(conf, int | float) else 0.5
            decay = clamp01(float(raw))
        sid = c.session_id
        v = c.vector
        f = Features(
            (c.collection, c.id),
            covered,
            frozenset([(sid, covered[0])] if len(covered) == 1 else [(sid, t) for t in covered]),
            is_summary,
            speaker_of(c),
            decay,
            authority(c),
            v if type(v) is np.ndarray and v.ndim == 1 and v.dtype is _F32_DTYPE else None,
            c.metadata.get(SUPERSEDED_BY),
        )
        object.__setattr__(c, "_features", f)
    return f


def with_scope(c: Candidate, scope: str) -> Candidate:
    """``dataclasses.replace(c, scope=scope)``, sharing the features that do not depend on
    the scope when ``c``'s are known."""
    if type(c) is not Candidate:
        return replace(c, scope=scope)
    new = Candidate(
        kind=c.kind,
        collection=c.collection,
        id=c.id,
        text=c.text,
        scope=scope,
        turn_ids=c.turn_ids,
        session_id=c.session_id,
        role=c.role,
        ts=c.ts,
        seq=c.seq,
        speaker=c.speaker,
        vector=c.vector,
        dense=c.dense,
        lexical=c.lexical,
        tokens=c.tokens,
        metadata=c.metadata,
    )
    f = c._features
    if f is not None:
        g = Features(
            f.key,
            f.covered,
            f.sources,
            f.is_summary,
            f.speaker,
            f.decay,
            authority(new),
            f.vector,
            f.superseded,
        )
        g.terms, g.turn, g.dup_key = f.terms, f.turn, f.dup_key
        object.__setattr__(new, "_features", g)
    return new


def row_vector(c: Candidate) -> F32:
    """``c.vector`` as a 1-D float32 array (``c.vector`` must be set)."""
    v = (c._features or features(c)).vector
    return v if v is not None else np.asarray(c.vector, dtype=np.float32).ravel()


def stack_rows(rows: Sequence[F32]) -> F32:
    """``np.stack(rows)`` for 1-D rows, the same array, with a fast path for rows of one
    length (one concatenation instead of a stack of per-row views)."""
    if rows and len(set(map(len, rows))) == 1:
        return np.concatenate(rows).reshape(len(rows), len(rows[0]))
    return np.stack(rows)


def clamp01(x: float) -> float:
    return 0.0 if not x > 0.0 else 1.0 if x > 1.0 else x


def authority(c: Candidate) -> float:
    v = c.metadata.get("authority")
    if isinstance(v, int | float) and not isinstance(v, bool):
        return clamp01(float(v))
    return 1.0 if c.metadata.get("authored") is True or c.scope == "authored" else 0.0
