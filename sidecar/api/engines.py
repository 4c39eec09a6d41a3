"""embed and summarize: the model engines over the wire."""

from __future__ import annotations

from protocol.engines import EmbedParams, EmbedResult, SummarizeParams, SummarizeResult
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.wire import copy_fields
from sidecar.engines import EngineHub

methods = MethodTable()


@methods.method("embed")
async def embed(ctx: CallContext, params: EmbedParams) -> EmbedResult:
    hub = ctx.app.service(EngineHub)
    embedder = hub.require_embedder()
    res = await embedder.embed(params.texts, params.kind)
    return EmbedResult(
        vectors=res.vectors.tolist(),
        dims=res.dims,
        model=res.model,
        truncated=res.truncated,
        fingerprint=embedder.fingerprint,
    )


@methods.method("summarize")
async def summarize(ctx: CallContext, params: SummarizeParams) -> SummarizeResult:
    hub = ctx.app.service(EngineHub)
    res = await hub.summarizer.summarize(
        params.texts,
        max_tokens=params.max_tokens,
        method=params.method,
        density=params.density,
    )
    return copy_fields(res, SummarizeResult)


register = methods.register
