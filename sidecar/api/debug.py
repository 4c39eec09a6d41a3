"""debug.*: diagnostics that exist only when `server.debug_methods` is on."""

from __future__ import annotations

import asyncio

from protocol.codes import ErrorCode
from protocol.debug import SleepParams, SleepResult
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
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


register = methods.register
