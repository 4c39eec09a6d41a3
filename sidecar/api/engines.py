"""embed and summarize: the model engines over the wire."""

from __future__ import annotations

from protocol.engines import (
    MAX_EMBED_TEXTS,
    MAX_SUMMARIZE_TEXTS,
    EmbedParams,
    EmbedResult,
    SummarizeParams,
    SummarizeResult,
)
from sidecar.api.context import CallContext
from sidecar.api.registry import Registry
from sidecar.engines import (
    CancelledError,
    EngineError,
    EngineHub,
    InvalidInputError,
)
from sidecar.errors import Cancelled, InvalidInput, ModelUnavailable, RpcError


def _rpc_error(exc: EngineError) -> RpcError:
    if isinstance(exc, InvalidInputError):
        return InvalidInput(str(exc))
    if isinstance(exc, CancelledError):
        return Cancelled(str(exc))
    return ModelUnavailable(str(exc))


def register(registry: Registry) -> None:
    @registry.method("embed")
    async def embed(ctx: CallContext, params: EmbedParams) -> EmbedResult:
        if len(params.texts) > MAX_EMBED_TEXTS:
            raise InvalidInput(
                f"embed takes at most {MAX_EMBED_TEXTS} texts per call, got {len(params.texts)}"
            )
        hub = ctx.app.service(EngineHub)
        try:
            embedder = hub.require_embedder()
            res = await embedder.embed(params.texts, params.kind)
        except EngineError as exc:
            raise _rpc_error(exc) from exc
        return EmbedResult(
            vectors=res.vectors.tolist(),
            dims=res.dims,
            model=res.model,
            truncated=res.truncated,
            fingerprint=embedder.fingerprint,
        )

    @registry.method("summarize")
    async def summarize(ctx: CallContext, params: SummarizeParams) -> SummarizeResult:
        if len(params.texts) > MAX_SUMMARIZE_TEXTS:
            raise InvalidInput(
                f"summarize takes at most {MAX_SUMMARIZE_TEXTS} texts, got {len(params.texts)}"
            )
        if params.density is not None and not 0 < params.density <= 1:
            raise InvalidInput(
                f"density is the fraction of turns kept and must be in (0, 1], got {params.density}"
            )
        hub = ctx.app.service(EngineHub)
        try:
            res = await hub.summarizer.summarize(
                params.texts,
                max_tokens=params.max_tokens,
                method=params.method,
                density=params.density,
            )
        except EngineError as exc:
            raise _rpc_error(exc) from exc
        return SummarizeResult(
            summary=res.summary,
            method=res.method,
            confidence=res.confidence,
            tokens=res.tokens,
            fallback_reason=res.fallback_reason,
            source_indices=res.source_indices,
            truncated=res.truncated,
            model=res.model,
        )
