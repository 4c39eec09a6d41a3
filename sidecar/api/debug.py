"""debug.*: diagnostics that exist only when `server.debug_methods` is on."""

from __future__ import annotations

import asyncio

from protocol.codes import ErrorCode
from protocol.debug import DenseTopParams, DenseTopResult, SleepParams, SleepResult
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.wire import copy_fields
from sidecar.assembly.service import Retrieval
from sidecar.errors import InvalidParams, RpcError

MAX_SLEEP_S = 60.0


def require_debug(ctx: CallContext) -> None:
    if not ctx.app.settings.server.debug_methods:
        raise RpcError(f"unknown method: {ctx.method}", code=ErrorCode.METHOD_NOT_FOUND)


methods = MethodTable()


@methods.method("debug.sleep")
async def sleep(ctx: CallContext, params: SleepParams) -> SleepResult:
    require_debug(ctx)
    if not 0 <= params.seconds <= MAX_SLEEP_S:
        raise InvalidParams(f"seconds must be between 0 and {MAX_SLEEP_S}")
    await asyncio.sleep(params.seconds)
    return SleepResult(slept=params.seconds)


@methods.method("debug.denseTop")
async def dense_top(ctx: CallContext, params: DenseTopParams) -> DenseTopResult:
    require_debug(ctx)
    probe = await ctx.app.service(Retrieval).dense_probe(params.collection, params.query, params.k)
    return copy_fields(probe, DenseTopResult)


register = methods.register
