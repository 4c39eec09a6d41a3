"""Text hygiene and a thin wrapper over a ``tokenizers`` tokenizer.json.

The wrapper disables the tokenizer's own padding and truncation: padding is done per batch by the
engine, and truncation is done here so that it can be *reported* (``truncated: true``) instead of
happening silently inside the tokenizer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tokenizers import Encoding, Tokenizer

from .assets import AssetRef
from .errors import AssetError, InvalidInputError

_SURROGATES = re.compile("[\ud800-\udfff]")
_WS = re.compile(r"\s")
# Characters of input kept per token of budget before the cheap pre-cut of very long texts.
CHARS_PER_TOKEN_BOUND = 16
SEQUENTIAL_ENCODE_MAX = 8


def clean_text(text: object, index: int | None = None, *, allow_empty: bool = False) -> str:
    """Validate one input text and replace lone surrogates (invalid UTF-8) with U+FFFD."""
    where = f"texts[{index}]" if index is not None else "text"
    if not isinstance(text, str):
        raise InvalidInputError(f"{where} must be a string, got {type(text).__name__}")
    if _SURROGATES.search(text):
        text = _SURROGATES.sub("\ufffd", text)
    if not allow_empty and not text.strip():
        raise InvalidInputError(f"{where} is empty or whitespace-only; there is nothing to embed")
    return text


@dataclass(frozen=True)
class Pieces:
    """An encoding split into leading specials, content and trailing specials."""

    lead: list[int]
    content: list[int]
    trail: list[int]
    lead_types: list[int]
    content_types: list[int]
    trail_types: list[int]
    cut: bool  # the text was pre-cut before tokenizing


class TextTokenizer:
    def __init__(self, ref: AssetRef, *, add_special_tokens: bool = True, fix: str = "") -> None:
        raw = ref.read_bytes()
        try:
            tok = Tokenizer.from_str(raw.decode("utf-8"))
        except Exception as exc:  # tokenizers raises plain Exception subclasses
            raise AssetError(
                f"tokenizer {ref} is not a valid tokenizer.json ({exc}); {fix or 'replace it'}",
                path=str(ref),
            ) from exc
        trunc = tok.truncation
        self.json_max_length = int(trunc["max_length"]) if trunc else 0
        tok.no_truncation()
        tok.no_padding()
        self._tok = tok
        self.ref = ref
        self.add_special_tokens = add_special_tokens

    @property
    def raw(self) -> Tokenizer:
        return self._tok

    def token_id(self, *candidates: str) -> int | None:
        for cand in candidates:
            tid = self._tok.token_to_id(cand)
            if tid is not None:
                return int(tid)
        return None

    def encode_batch(self, texts: Sequence[str], *, special: bool | None = None) -> list[Encoding]:
        add = self.add_special_tokens if special is None else special
        if len(texts) <= SEQUENTIAL_ENCODE_MAX:
            # Small batches: the tokenizer's thread pool costs more than it saves, and it
            # competes with onnxruntime's threads for the same cores.
            return [self._tok.encode(t, add_special_tokens=add) for t in texts]
        return list(self._tok.encode_batch(list(texts), add_special_tokens=add))

    def encode(self, text: str, *, special: bool | None = None) -> Encoding:
        add = self.add_special_tokens if special is None else special
        return self._tok.encode(text, add_special_tokens=add)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=True))

    def count(self, text: str) -> int:
        """Content tokens of ``text`` (no special tokens)."""
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    # -- splitting and budgets -------------------------------------------------------------------
    @staticmethod
    def split(enc: Encoding, *, cut: bool = False) -> Pieces:
        ids = enc.ids
        types = enc.type_ids
        mask = enc.special_tokens_mask
        n = len(ids)
        a = 0
        while a < n and mask[a]:
            a += 1
        b = n
        while b > a and mask[b - 1]:
            b -= 1
        return Pieces(
            lead=list(ids[:a]),
            content=list(ids[a:b]),
            trail=list(ids[b:]),
            lead_types=list(types[:a]),
            content_types=list(types[a:b]),
            trail_types=list(types[b:]),
            cut=cut,
        )

    def pieces_batch(self, texts: Sequence[str], content_budget: int) -> list[Pieces]:
        """Encode texts; very long texts are pre-cut so that at least ``content_budget`` content
        tokens survive (exactly as if the whole text had been tokenized). Texts where the
        pre-cut cannot be proven exact are re-encoded in full."""
        limit = max(4096, content_budget * CHARS_PER_TOKEN_BOUND)
        prepared: list[str] = []
        cuts: list[bool] = []
        for text in texts:
            if len(text) > limit:
                cut_at = limit
                # Cut at whitespace so that every word before the cut is complete.
                window = text[int(limit * 0.9) : limit]
                ws = [m.start() for m in _WS.finditer(window)]
                if ws:
                    cut_at = int(limit * 0.9) + ws[-1]
                    prepared.append(text[:cut_at])
                    cuts.append(True)
                    continue
            prepared.append(text)
            cuts.append(False)
        encs = self.encode_batch(prepared)
        out: list[Pieces] = []
        for i, enc in enumerate(encs):
            pieces = self.split(enc, cut=cuts[i])
            if cuts[i] and len(pieces.content) <= content_budget:
                # Fewer tokens than the budget in the cut text (huge whitespace runs or giant
                # words): the cut may have dropped tokens that matter, so encode everything.
                pieces = self.split(self.encode(texts[i]), cut=False)
            out.append(pieces)
        return out
