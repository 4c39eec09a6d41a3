"""Model engines on the wire: ``embed`` and ``summarize`` (for hosts and for debugging)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from protocol.base import MethodSchema, Params, WireStruct

MAX_EMBED_TEXTS = 1024
MAX_SUMMARIZE_TEXTS = 4096


class EmbedParams(Params, kw_only=True):
    texts: Annotated[list[str], msgspec.Meta(max_length=MAX_EMBED_TEXTS)]
    # "query" applies the profile's query prefix (e.g. Nomic's "search_query: ").
    kind: Literal["query", "document"] = "document"


class EmbedResult(WireStruct, kw_only=True):
    vectors: list[list[float]]
    dims: int
    model: str  # the embedding profile
    truncated: list[bool]  # per text: input beyond the model's token limit was dropped
    fingerprint: str = ""


class SummarizeParams(Params, kw_only=True):
    texts: Annotated[list[str], msgspec.Meta(max_length=MAX_SUMMARIZE_TEXTS)]  # oldest first
    max_tokens: int | None = None  # seq2seq: max new tokens; extractive: word budget
    method: Literal["auto", "seq2seq", "extractive"] = "auto"
    # extractive: fraction of turns kept (default 0.4)
    density: Annotated[float, msgspec.Meta(gt=0, le=1)] | None = None


class SummarizeResult(WireStruct, kw_only=True):
    summary: str
    method: str  # the method that produced the summary: "seq2seq" or "extractive"
    confidence: float
    tokens: int
    fallback_reason: str | None = None  # why seq2seq was not used when it was asked for
    source_indices: list[int] = msgspec.field(default_factory=list)
    truncated: bool = False
    model: str = ""


METHODS: dict[str, MethodSchema] = {
    "embed": MethodSchema(
        EmbedParams, EmbedResult, "Embed texts with the daemon's embedding model"
    ),
    "summarize": MethodSchema(
        SummarizeParams,
        SummarizeResult,
        "Summarize turns (seq2seq, or extractive fallback; never fails for model reasons)",
    ),
}
