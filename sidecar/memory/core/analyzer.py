"""The analyzer of the lexical channel, the same for documents and queries: case folding,
apostrophes, tokens of Unicode letters and digits, English stop words and a light stemmer
(the module doc of ``lexical`` gives the steps and what each is worth)."""

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


#: Stems of the words seen so far: a conversation's vocabulary is small and Zipfian, so
#: a lookup replaces most of the suffix tests (a BM25 add of the scale benchmark's memories:
#: 36 us against 56 us a document, interleaved in one run). Cleared when full, so it stays
#: bounded.
_STEMS: dict[str, str] = {}
_STEMS_MAX = 1 << 18


def _stem(word: str) -> str:
    got = _STEMS.get(word)
    if got is None:
        got = light_stem(word)
        if len(_STEMS) >= _STEMS_MAX:
            _STEMS.clear()
        _STEMS[word] = got
    return got


def analyze(
    text: str,
    *,
    stem: StemMode = "light",
    stopwords: frozenset[str] = STOPWORDS,
) -> list[str]:
    """The terms of ``text`` in order (see the module doc)."""
    if not text:
        return []
    folded = _POSSESSIVE_RE.sub("", text.casefold().translate(_APOSTROPHES)).replace("'", "")
    out: list[str] = []
    for tok in _TOKEN_RE.findall(folded):
        if tok in stopwords or (len(tok) == 1 and not tok.isdigit()):
            continue
        out.append(_stem(tok) if stem == "light" else tok)
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
