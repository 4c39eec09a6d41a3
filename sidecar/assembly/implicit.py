"""Implicit recall: what the user said that bears on a message that does not ask for it.

"I'm allergic to shellfish", said weeks ago, changes the right answer to "Plan me a paella
night for Saturday"; the two share no word, and their cosine (0.1-0.3 with
all-MiniLM-L6-v2) is below that of dozens of chat lines. The hybrid ranking
(:mod:`sidecar.assembly.scoring`) is built for questions that name what they ask about:
BM25 finds the names and topics, the context terms follow the conversation around them.
For a request or a statement it fills the budget with whatever shares a word or sits near
every query, and the cue is not among it (docs/memory.md, "Implicit recall").

This module is a second channel beside it, with its own share of the budget:

* **Candidates**: the namespace's user turns (what the user said), scored by their cosine
  with the query *minus their density* with the speaker's label taken out
  (:mod:`sidecar.assembly.density`): a specific statement that stands apart from the
  chatter outranks a generic line that resembles everything.
* **Whether anything stands out**: ``standout`` is the best such score over everything
  the user said. Greetings, chit-chat and unrelated tasks resemble generic lines, which the
  density cancels, so nothing stands out for them; a request that bears on something the
  user said usually finds a turn that does.
* **Which channel gets the budget** (:func:`shares`). A prompt that names a speaker of
  the history, or whose best plain cosine reaches ``strong_cosine``, is asking about
  something the history holds: the hybrid ranking keeps the budget (implicit recall
  takes at most ``strong_share`` of it). Otherwise implicit recall takes up to ``share``
  of the memory budget and the ranking ``main_share``, both scaled by how far ``standout``
  is between ``low`` and ``high`` (all of it). Just below ``low``, down to
  ``trickle_low``, the best statement alone may come back (``trickle_tokens``: on the dev
  split the cue was the best candidate for half the triggers that stood out this little);
  below that the prompt recalls nothing at all. So a greeting gets nothing or a line, and
  a request gets the user's statements nearest to it.

The constants are cosines of the bundled model, chosen on the dev split of the project's
cue set and the LoCoMo dev split (docs/memory.md); an embedding profile without its own
values leaves implicit recall off (``enabled``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sidecar.assembly.candidates import Candidate
from sidecar.assembly.density import Density
from sidecar.assembly.view_rows import Matrix
from sidecar.engines.int8scan import Scan

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class ImplicitConfig:
    enabled: bool = True
    share: float = 0.9  # of the memory budget, at most, when no channel is strong
    low: float = -0.11  # standout below: nothing stands out, nothing is recalled
    high: float = -0.08  # standout from here: the full shares
    strong_cosine: float = 0.55  # a plain cosine this high: the hybrid ranking leads
    strong_share: float = 0.0  # what implicit recall may still take then
    main_share: float = 0.0  # the hybrid ranking's share when implicit recall leads
    depth: float = 0.3  # nothing further than this below the standout is recalled
    candidates: int = 48  # implicit candidates gathered per query
    # Below ``low`` and down to ``trickle_low``, the best statement alone may still be
    # recalled: at most ``trickle_tokens`` of the budget (0: off).
    trickle_low: float = -0.15
    trickle_tokens: int = 45


DEFAULT_IMPLICIT = ImplicitConfig()
OFF = ImplicitConfig(enabled=False)


@dataclass(frozen=True, slots=True)
class ImplicitPool:
    """The implicit channel's candidates for one query, best first, with their scores
    (label-free cosine minus density), the best score over the whole history
    (``standout``) and whether the query names a speaker of the history."""

    candidates: tuple[Candidate, ...] = ()
    scores: tuple[float, ...] = ()
    standout: float = -math.inf
    names_speaker: bool = False


@dataclass(frozen=True, slots=True)
class Shares:
    """Token allowances of one plan: ``implicit`` for implicit recall, ``main`` for the
    hybrid ranking (and recovery; None: whatever is left), and which channel leads."""

    implicit: int
    main: int | None
    mode: str  # "explicit" | "implicit" | "off"


def ramp(standout: float, cfg: ImplicitConfig) -> float:
    """0 below ``low``, 1 from ``high``, linear between."""
    if not math.isfinite(standout) or standout < cfg.low:
        return 0.0
    if cfg.high <= cfg.low or standout >= cfg.high:
        return 1.0
    return (standout - cfg.low) / (cfg.high - cfg.low)


def shares(cfg: ImplicitConfig, pool: ImplicitPool | None, cosmax: float, total: int) -> Shares:
    """The two channels' allowances for a memory budget of ``total`` tokens (module doc);
    ``cosmax``: the best plain cosine of the hybrid ranking's pool."""
    if not cfg.enabled or pool is None:
        return Shares(0, None, "off")
    r = ramp(pool.standout, cfg)
    if pool.names_speaker or cosmax >= cfg.strong_cosine:
        return Shares(int(cfg.strong_share * r * total), None, "explicit")
    if r == 0.0 and cfg.trickle_tokens > 0 and pool.standout >= cfg.trickle_low:
        return Shares(min(cfg.trickle_tokens, total), 0, "implicit")
    return Shares(int(cfg.share * r * total), int(cfg.main_share * r * total), "implicit")


def top_rows(
    density: Density,
    qvec: F32,
    k: int,
    *,
    scan: Scan | None = None,
    rows: I64 | None = None,
    matrix: Matrix | None = None,
) -> tuple[I64, F32, float]:
    """``(rows, scores, standout)``: the ``k`` eligible rows (the user's turns) with the
    best corrected score (label-free cosine minus density), best first, and the best of
    those scores (what stands out). Over every row through ``scan`` (exact, or
    int8-prefiltered: rows whose approximate score could reach the k-th are scored
    exactly), else over ``rows`` of ``matrix`` only (a view ranked by an index: its dense
    pool)."""
    if scan is not None:
        return _from_scan(density, qvec, k, scan)
    if rows is None or matrix is None or not rows.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32), -math.inf
    rows = rows[rows < density.n]
    return _best(rows, density.corrected(matrix[rows] @ qvec, rows, qvec, eligible_only=True), k)


def _from_scan(density: Density, qvec: F32, k: int, scan: Scan) -> tuple[I64, F32, float]:
    n = min(len(scan), density.n)
    if scan.exact is not None:
        best = density.corrected(scan.exact[:n], None, qvec, eligible_only=True)
        return _best(np.arange(n, dtype=np.int64), best, k)
    assert scan.approx is not None
    # The scan's approximate scores are in units of the query's int8 scale. A row's error
    # bound is the scan's times its 1 / norm; the rows that could be among the k best are
    # scored exactly.
    unit = float(np.abs(scan.q).max()) / 127.0
    approx = density.corrected(scan.approx[:n] * np.float32(unit), None, qvec, eligible_only=True)
    err = np.float32(scan.bound * unit) * density.scale(n)
    keep = approx + err >= _kth(approx - err, k) if k < n else np.isfinite(approx)
    cand = np.flatnonzero(keep)
    exact = density.corrected(scan.sims(cand), cand, qvec, eligible_only=True)
    return _best(cand, exact, k)


def _kth(a: F32, k: int) -> float:
    """The ``k``-th largest of ``a`` (``k < len(a)``), found on a short list: the k-th
    largest of every ``step``-th value is a lower bound of it, so only the values at or
    above that bound need a partition (as ``int8scan`` finds its k-th)."""
    n = a.size
    step = n // (8 * k) if n >= 16 * k else 1
    if step >= 4:
        floor = np.partition(a[::step], -k)[-k]
        head = a[a >= floor]
        if head.size >= k:
            return float(np.partition(head, head.size - k)[head.size - k])
    return float(np.partition(a, n - k)[n - k])


def _best(rows: I64, scores: F32, k: int) -> tuple[I64, F32, float]:
    """The ``k`` best finite ``scores`` with their rows, best first (ties: the lower row),
    and the best score (the standout)."""
    pick = np.flatnonzero(np.isfinite(scores))
    if not pick.size:
        return rows[:0], scores[:0], -math.inf
    if pick.size > k:
        pick = pick[np.argpartition(-scores[pick], k - 1)[:k]]
    pick = pick[np.lexsort((rows[pick], -scores[pick]))]
    return rows[pick], scores[pick], float(scores[pick[0]])
