"""Identical memories injected once: the newest, with how many times it was said.

A history repeats itself: on a store of 440 messages, "Where do I live?" recalled "What
about the weather tomorrow?" sixteen times (each copy is as relevant as the others, and
the fill's redundancy penalty only lowers a copy's score, it does not remove it). Entries
whose texts are the same once case, punctuation and spacing are set aside form one group;
the fill injects one of them, the newest (the latest time it was said), at the place of
the group's best, and the entry says how many times (``repeats``,
:func:`sidecar.assembly.render.repeats_note`).

Only equal texts are grouped: two statements that differ in a word ("my flight is at 9"
and "... at 10") can be a cosine of 0.97 apart and are different facts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from sidecar.assembly.candidates import Candidate, features

_NOT_WORD = re.compile(r"[\W_]+")


def duplicate_key(c: Candidate) -> str:
    """``c``'s text without case, punctuation and spacing (cached on the candidate); its
    speaker (role, or the transcript label the text starts with) stays part of it."""
    f = features(c)
    key: str | None = f.dup_key
    if key is None:
        key = text_key(c.role, c.text)
        f.dup_key = key
    return key


def text_key(role: str, text: str) -> str:
    """:func:`duplicate_key` of a turn said by ``role``."""
    if text.isascii():
        # the same key without the regex, 8x faster: the densities' first build keys
        # every row of the history (1.2 s of a first assemble at 100k turns); for ASCII,
        # ``\w`` is ``isalnum`` or ``_`` and casefold is lower (tested against the regex)
        body = b" ".join(text.encode().translate(_ASCII_WORD).lower().split()).decode()
    else:
        body = _NOT_WORD.sub(" ", text.casefold()).strip()
    return f"{role}\x1f{body}"


#: ASCII letters and digits kept, every other byte a space.
_ASCII_WORD = bytes(c if chr(c).isalnum() and c < 128 else 32 for c in range(256))


def collapse(
    cands: Sequence[Candidate], alive: npt.NDArray[np.bool_], scores: npt.NDArray[np.float64]
) -> dict[int, int]:
    """Group the ``alive`` candidates with equal :func:`duplicate_key`; in place, every
    group keeps only its newest member alive, with the group's best score. Returns
    ``{kept position: group size}`` for the groups of two or more."""
    groups: dict[str, list[int]] = {}
    for i in np.flatnonzero(alive).tolist():
        groups.setdefault(duplicate_key(cands[i]), []).append(i)
    out: dict[int, int] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        newest = max(members, key=lambda i: (cands[i].ts or 0, -i))
        best = float(max(scores[i] for i in members))
        alive[members] = False
        alive[newest] = True
        scores[newest] = best
        out[newest] = len(members)
    return out
