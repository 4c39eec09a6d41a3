"""Summarizer facade: seq2seq when available, extractive otherwise, never failing for model reasons.

``method``:

* ``"auto"`` (default): seq2seq if a seq2seq model is configured, else extractive;
* ``"seq2seq"``: seq2seq; if it is not configured, extractive with ``fallback_reason``;
* ``"extractive"``: extractive.

Any seq2seq load or run failure (missing/corrupt assets, runtime error, empty output) falls back
to the extractive summarizer and is reported as ``method="extractive"`` with
``fallback_reason``. Cancellation is not a failure: it raises :class:`CancelledError`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from . import extractive
from .embedder import Embedder
from .errors import CancelledError, EngineError, InvalidInputError
from .seq2seq import Seq2SeqOutput, Seq2SeqSummarizer

Method = Literal["auto", "seq2seq", "extractive"]
METHODS: tuple[str, ...] = ("auto", "seq2seq", "extractive")
MAX_NEW_TOKENS_CAP = 512


@dataclass(frozen=True)
class SummaryResult:
    summary: str
    method: str  # "seq2seq" | "extractive"
    confidence: float
    tokens: int
    source_indices: list[int]  # indices of the input texts the summary draws on
    fallback_reason: str | None = None
    truncated: bool = False  # seq2seq: the oldest turns were dropped to fit the context
    model: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "method": self.method,
            "confidence": self.confidence,
            "tokens": self.tokens,
            "sourceIndices": self.source_indices,
            "fallbackReason": self.fallback_reason,
            "truncated": self.truncated,
            "model": self.model,
        }


class Summarizer:
    def __init__(
        self,
        embedder: Embedder | None,
        seq2seq: Seq2SeqSummarizer | None,
        *,
        seq2seq_unavailable: str = "",
        max_new_tokens: int = 64,
        density: float = extractive.DEFAULT_DENSITY,
        lambda_: float = extractive.DEFAULT_LAMBDA,
    ) -> None:
        self.embedder = embedder
        self.seq2seq = seq2seq
        self.seq2seq_unavailable = seq2seq_unavailable or (
            "" if seq2seq else "no seq2seq summarizer configured"
        )
        self.max_new_tokens = max(1, int(max_new_tokens))
        self.density = extractive.normalize_density(density)
        self.lambda_ = lambda_
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="summarizer"
        )
        self._active: set[threading.Event] = set()

    # -- helpers ---------------------------------------------------------------------------------
    def _check(self, texts: Sequence[str], method: str, max_tokens: int | None) -> None:
        if method not in METHODS:
            raise InvalidInputError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        if isinstance(texts, str):
            raise InvalidInputError("texts must be a list of strings, not a single string")
        if max_tokens is not None and max_tokens <= 0:
            raise InvalidInputError(f"maxTokens must be positive, got {max_tokens}")

    def _wants_seq2seq(self, method: str) -> bool:
        return method in ("auto", "seq2seq") and self.seq2seq is not None

    def _unavailable_reason(self, method: str) -> str | None:
        if method == "seq2seq" and self.seq2seq is None:
            return f"seq2seq summarizer unavailable: {self.seq2seq_unavailable}"
        return None

    def _from_seq2seq(self, out: Seq2SeqOutput, texts: Sequence[str]) -> SummaryResult:
        nonempty = [i for i, t in enumerate(texts) if isinstance(t, str) and t.strip()]
        used = nonempty[-out.turns_used :] if out.turns_used else []
        assert self.seq2seq is not None
        return SummaryResult(
            summary=out.text,
            method="seq2seq",
            confidence=out.confidence,
            tokens=out.tokens,
            source_indices=used,
            truncated=out.truncated,
            model=self.seq2seq.spec.family,
        )

    def _from_extractive(
        self, out: extractive.ExtractiveOutput, reason: str | None
    ) -> SummaryResult:
        reasons = [r for r in (reason, out.fallback_reason) if r]
        return SummaryResult(
            summary=out.text,
            method="extractive",
            confidence=out.confidence,
            tokens=out.tokens,
            source_indices=out.indices,
            fallback_reason="; ".join(reasons) if reasons else None,
            model=self.embedder.family if self.embedder else "lexical",
        )

    def _new_tokens(self, max_tokens: int | None) -> int:
        return min(MAX_NEW_TOKENS_CAP, max_tokens or self.max_new_tokens)

    # -- sync ------------------------------------------------------------------------------------
    def summarize_sync(
        self,
        texts: Sequence[str],
        *,
        max_tokens: int | None = None,
        method: Method | str = "auto",
        density: float | None = None,
        cancel: threading.Event | None = None,
    ) -> SummaryResult:
        """Blocking; call from a worker thread."""
        self._check(texts, method, max_tokens)
        extractive.prepare_turns(texts)  # input errors surface before any model work
        reason = self._unavailable_reason(method)
        if self._wants_seq2seq(method):
            assert self.seq2seq is not None
            try:
                out = self.seq2seq.summarize(
                    texts, max_new_tokens=self._new_tokens(max_tokens), cancel=cancel
                )
                return self._from_seq2seq(out, texts)
            except CancelledError:
                raise
            except EngineError as exc:
                reason = f"seq2seq failed: {exc}"
        if cancel is not None and cancel.is_set():
            raise CancelledError("summarization cancelled")
        ext = extractive.summarize_sync(
            texts,
            self.embedder,
            density=self.density if density is None else density,
            lambda_=self.lambda_,
            max_tokens=max_tokens,
        )
        return self._from_extractive(ext, reason)

    # -- async -----------------------------------------------------------------------------------
    async def summarize(
        self,
        texts: Sequence[str],
        *,
        max_tokens: int | None = None,
        method: Method | str = "auto",
        density: float | None = None,
        cancel: threading.Event | None = None,
    ) -> SummaryResult:
        """Summarize from the event loop. Cancelling the awaiting task stops the decoder."""
        self._check(texts, method, max_tokens)
        keep, turns = extractive.prepare_turns(texts)
        reason = self._unavailable_reason(method)
        token = cancel or threading.Event()
        if self._wants_seq2seq(method):
            seq = self.seq2seq
            assert seq is not None
            loop = asyncio.get_running_loop()
            fut = loop.run_in_executor(
                self._executor,
                lambda: seq.summarize(
                    texts, max_new_tokens=self._new_tokens(max_tokens), cancel=token
                ),
            )
            self._active.add(token)
            try:
                out = await fut
                return self._from_seq2seq(out, texts)
            except asyncio.CancelledError:
                token.set()
                raise
            except CancelledError:
                raise
            except EngineError as exc:
                reason = f"seq2seq failed: {exc}"
            finally:
                self._active.discard(token)
        if token.is_set():
            raise CancelledError("summarization cancelled")
        vectors: Any
        lexical_reason = ""
        if self.embedder is None:
            lexical_reason = "no embedder available; used lexical similarity"
            vectors = extractive.lexical_vectors(turns)
        else:
            try:
                vectors = (await self.embedder.embed(turns, "document")).vectors
            except EngineError as exc:
                lexical_reason = f"embedder failed ({exc}); used lexical similarity"
                vectors = extractive.lexical_vectors(turns)
        ext = extractive.assemble(
            keep,
            turns,
            vectors,
            density=self.density if density is None else density,
            lambda_=self.lambda_,
            max_tokens=max_tokens,
            fallback_reason=lexical_reason,
        )
        return self._from_extractive(ext, reason)

    # -- status ----------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        seq: dict[str, Any]
        if self.seq2seq is None:
            seq = {"state": "disabled", "reason": self.seq2seq_unavailable}
        else:
            seq = self.seq2seq.status()
        return {
            "defaultMethod": "seq2seq" if self.seq2seq is not None else "extractive",
            "seq2seq": seq,
            "extractive": {
                "state": "ready",
                "density": self.density,
                "lambda": self.lambda_,
                "embedder": self.embedder.profile if self.embedder else "lexical",
            },
        }

    def close(self) -> None:
        for token in list(self._active):
            token.set()
        self._executor.shutdown(wait=True, cancel_futures=True)
        if self.seq2seq is not None:
            self.seq2seq.slot.close()
