"""Dream questions: :func:`is_dream_query` is true only when the query asks *about
dreams* ("what did I dream about", "tell me about my dreams", "did I have a nightmare",
"my dream last night", "dream journal/diary"); a passing mention ("my dream job", "a
dream come true", "I'd never dream of it", "Dream Theater") is not enough. Dream entries
are recalled only for such questions."""

from __future__ import annotations

import re

_DREAM_RE = re.compile(
    r"\b(?:"
    r"(?:what|which|any|tell\s+me|remember|recall|describe|about|recurring|strange|weird"
    r"|bad|vivid|last|my|your|the|a)\b[^.?!]{0,40}\b(?:dream(?:s|t|ed|ing)?|nightmares?)"
    r"\b(?!\s+(?:job|car|house|home|team|vacation|trip|destination|wedding|school|come\s+true"
    r"|girl|boy|man|woman|life))"
    r"|dream\s+(?:journal|diary|log|entries|entry)"
    r"|(?:did|do|have)\s+(?:i|you|we)\s+(?:ever\s+)?(?:dream|dreamt|dreamed)\s+(?:about|of|that)"
    r"|(?:i|you|we)\s+(?:dreamt|dreamed|had\s+a\s+(?:dream|nightmare))"
    r"|(?:did|do|have|had)\s+(?:i|you|we)\s+(?:ever\s+)?(?:have|had|get|got)\s+"
    r"(?:a\s+|any\s+|bad\s+|strange\s+)*(?:dream|nightmare)s?"
    r")",
    re.I,
)
_DREAM_NOT = re.compile(
    r"\b(?:dream\s+(?:job|car|house|home|team|vacation|trip|destination|wedding|school)"
    r"|dream\s+come\s+true|(?:wouldn't|would\s+not|never)\s+dream\s+of|dream\s+theater"
    r"|american\s+dream|pipe\s+dream|dream\s+big|living\s+the\s+dream|in\s+your\s+dreams"
    r"|beyond\s+my\s+wildest\s+dreams|dream\s+on|nightmare\s+(?:of|to)\s+\w+"
    r"|(?:is|was|be|been|being)\s+(?:a|an)\s+(?:\w+\s+)?nightmare"
    # aspirations, not sleep: "my dream is to ...", "a dream to become", "dreams and goals"
    r"|dreams?\s+(?:is|was|would\s+be|has\s+been|had\s+been)\s+to"
    r"|(?:a|my|her|his|their|your|our)\s+dream\s+to"
    r"|dreams?\s+and\s+(?:goals?|ambitions?|aspirations?|plans?|hopes?)"
    r"|(?:goals?|ambitions?|aspirations?|plans?|hopes?)\s+and\s+dreams?"
    # "dream" used as an adjective before a noun ("dream salary", "a dream meeting"); the
    # words that follow the sleep sense ("dream about", "dream I had", "dream last night",
    # "dream journal") are kept
    r"|dream\s+(?!(?:about|of|that|i|you|we|he|she|they|it|last|from|in|on|where|when|was"
    r"|were|is|are|had|has|have|again|tonight|yesterday|journal|diary|log|entries|entry"
    r"|and|or|but|so|then|which|who|you've|i've|i'd)\b)[a-z]+"
    r")\b",
    re.I,
)
_DREAM_WORD = re.compile(r"\b(?:dream(?:s|t|ed|ing)?|nightmares?)\b", re.I)


def is_dream_query(query: str) -> bool:
    """True when ``query`` asks about dreams, not when it merely uses the word."""
    if not _DREAM_WORD.search(query):
        return False
    cleaned = _DREAM_NOT.sub(" ", query)
    if not _DREAM_WORD.search(cleaned):
        return False
    return _DREAM_RE.search(cleaned) is not None
