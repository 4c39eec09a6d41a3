"""The analyzer of the lexical channel (``lexical``'s BM25 index and its callers).

Analyzer (:func:`analyze`), the same for documents and queries:

1. Unicode case folding; typographic apostrophes become ``'``; the possessive ``'s`` is
   dropped ("Caroline's" → "caroline") and other apostrophes are removed ("don't" →
   "dont", "I've" → "ive").
2. Tokens are runs of Unicode letters and digits (``[^\\W_]+``), so non-ASCII words and
   CJK runs survive (the reference split on anything outside ``[a-z0-9_]``).
3. English stop words (:data:`STOPWORDS`, including the apostrophe-less contractions)
   and one-character tokens (except digits) are dropped.
4. Stemming (``stem="light"``, the default, :func:`light_stem`): plurals, ``-ing``,
   ``-ed`` (with the doubled consonant undone), then a final silent ``e`` and ``y`` -> ``i``,
   only on ASCII words longer than three letters, so names, numbers and other scripts
   stay intact. ``stem="none"`` keeps surface forms.

Measured on the LoCoMo dev split (BM25 alone, evidence recall at 1,000 tokens): plain
tokens 0.629, + stop words 0.661, + light stemming without stop words 0.673, both 0.701.

A text is analyzed at every load of a view that has no saved terms (a cold namespace:
about 500 texts a view), so :func:`analyze` is kept fast without changing a term: an
ASCII text (nearly all) is lower-cased and split by a byte translation instead of the
Unicode regex (the same tokens: for ASCII, ``[^\\W_]`` is ``[A-Za-z0-9]`` and case folding
is lower-casing; tested against the regex path), and each token's fate (dropped, or its
term) is remembered (:data:`_TERMS`), so a known token costs one dict lookup in C.
"""

from __future__ import annotations

import functools
import re
from typing import Literal

StemMode = Literal["light", "none"]

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})
_POSSESSIVE_RE = re.compile(r"(?<=[^\W_])'s\b")
_TOKEN_RE = re.compile(r"[^\W_]+")

# Function words of English conversation. Contractions appear without their apostrophe
# because the analyzer removes it before matching.
STOPWORDS: frozenset[str] = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "arent",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "cant",
        "cannot",
        "could",
        "couldnt",
        "did",
        "didnt",
        "do",
        "does",
        "doesnt",
        "doing",
        "dont",
        "down",
        "during",
        "each",
        "else",
        "ever",
        "few",
        "for",
        "from",
        "further",
        "get",
        "gets",
        "got",
        "had",
        "hadnt",
        "has",
        "hasnt",
        "have",
        "havent",
        "having",
        "he",
        "hed",
        "hell",
        "hes",
        "her",
        "here",
        "heres",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "hows",
        "i",
        "id",
        "ill",
        "im",
        "ive",
        "if",
        "in",
        "into",
        "is",
        "isnt",
        "it",
        "its",
        "itself",
        "just",
        "lets",
        "like",
        "me",
        "more",
        "most",
        "much",
        "must",
        "mustnt",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "oh",
        "ok",
        "okay",
        "on",
        "once",
        "only",
        "or",
        "other",
        "ought",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "really",
        "same",
        "shant",
        "she",
        "shed",
        "shell",
        "shes",
        "should",
        "shouldnt",
        "so",
        "some",
        "such",
        "than",
        "that",
        "thats",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "theres",
        "these",
        "they",
        "theyd",
        "theyll",
        "theyre",
        "theyve",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "upon",
        "us",
        "very",
        "was",
        "wasnt",
        "we",
        "wed",
        "well",
        "were",
        "weve",
        "werent",
        "what",
        "whats",
        "when",
        "whens",
        "where",
        "wheres",
        "which",
        "while",
        "who",
        "whos",
        "whom",
        "why",
        "whys",
        "will",
        "with",
        "wont",
        "would",
        "wouldnt",
        "yeah",
        "yes",
        "yet",
        "you",
        "youd",
        "youll",
        "youre",
        "youve",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
        "d",
        "ll",
        "m",
        "re",
        "ve",
    ]
)


# --------------------------------------------------------------------------- analyzer

_VOWELS = frozenset("aeiouy")


def _has_vowel(s: str) -> bool:
    return any(c in _VOWELS for c in s)


def _undouble(s: str) -> str:
    # "runn" -> "run", "stopp" -> "stop"; keep "ll", "ss", "zz" ("fall", "miss", "buzz").
    if len(s) >= 3 and s[-1] == s[-2] and s[-1] not in "lsz" and s[-1].isalpha():
        return s[:-1]
    return s


def light_stem(word: str) -> str:
    """A conservative English suffix stripper (plurals, -ing, -ed, final -e and -y).

    Only ASCII-alphabetic words longer than 3 characters are touched, so names, numbers
    and non-English words pass through. Documents and queries go through the same
    function, so it only has to conflate inflections, not produce dictionary forms:
    "movie"/"movies" → "movi", "hope"/"hoping"/"hoped" → "hop", "paintings" → "paint",
    "studies"/"studied"/"study" → "studi", "watches" → "watch", "running" → "run".
    """
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    w = word
    # plurals and third person
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "i"
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
        if w.endswith(("she", "che", "xe", "ze")):
            w = w[:-1]
    # progressive and past
    if w.endswith("ing") and len(w) > 5 and _has_vowel(w[:-3]):
        w = _undouble(w[:-3])
    elif w.endswith("ied") and len(w) > 4:
        w = w[:-3] + "i"
    elif w.endswith("ed") and len(w) > 4 and _has_vowel(w[:-2]):
        w = _undouble(w[:-2])
    # final silent e and y
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    elif len(w) > 2 and w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    return w


#: Per analyzer setting, the term of every token seen so far ("" when the token is dropped:
#: a stop word or a single letter): a conversation's vocabulary is small and Zipfian, so
#: a lookup replaces the tests and the suffix stripping. Cleared when full (bounded).
_TERMS: dict[tuple[str, frozenset[str]], dict[str, str]] = {}
_TERMS_MAX = 1 << 18

# for an ASCII text: letters lower-cased, digits kept, every other byte a space
_ASCII_WORDS = bytes(
    c + 32 if 65 <= c <= 90 else c if 48 <= c <= 57 or 97 <= c <= 122 else 32 for c in range(256)
)


def _term(tok: str, stem: StemMode, stopwords: frozenset[str]) -> str:
    if tok in stopwords or (len(tok) == 1 and not tok.isdigit()):
        return ""
    return light_stem(tok) if stem == "light" else tok


def _tokens(text: str) -> list[str]:
    """The tokens of ``text``, case-folded, apostrophes handled (module doc)."""
    if text.isascii():
        if "'" in text or "`" in text:  # the only ASCII apostrophes
            text = _POSSESSIVE_RE.sub("", text.lower().replace("`", "'")).replace("'", "")
        return text.encode().translate(_ASCII_WORDS).decode().split()
    folded = _POSSESSIVE_RE.sub("", text.casefold().translate(_APOSTROPHES)).replace("'", "")
    return _TOKEN_RE.findall(folded)


def analyze(
    text: str,
    *,
    stem: StemMode = "light",
    stopwords: frozenset[str] = STOPWORDS,
) -> list[str]:
    """The terms of ``text`` in order (see the module doc)."""
    if not text:
        return []
    toks = _tokens(text)
    memo = _TERMS.get((stem, stopwords))
    if memo is None:
        memo = _TERMS[(stem, stopwords)] = {}
    try:
        return list(filter(None, map(memo.__getitem__, toks)))
    except KeyError:
        pass
    out: list[str] = []
    for tok in toks:
        term = memo.get(tok)
        if term is None:
            term = _term(tok, stem, stopwords)
            if len(memo) >= _TERMS_MAX:
                memo.clear()
            memo[tok] = term
        if term:
            out.append(term)
    return out


def query_terms(
    text: str, *, stem: StemMode = "light", stopwords: frozenset[str] = STOPWORDS
) -> list[str]:
    """The distinct terms of ``text``, in first-occurrence order (keyword extraction)."""
    return list(dict.fromkeys(analyze_query(text, stem, stopwords)))


@functools.lru_cache(maxsize=64)
def analyze_query(text: str, stem: StemMode, stopwords: frozenset[str]) -> tuple[str, ...]:
    """:func:`analyze` of a query, remembered for the last queries: one ``assemble``
    analyzes its query for every scope's BM25 search, the keyword set and the pool's
    lexical scores (documents are analyzed with :func:`analyze`)."""
    return tuple(analyze(text, stem=stem, stopwords=stopwords))


# ------------------------------------------------------------------------------ index
