"""What a handler sees: the application and the call it is serving."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protocol.jsonrpc import RequestId

if TYPE_CHECKING:
    from sidecar.app import App

ProgressSink = Callable[[int, int | None, str | None], Awaitable[None]]


async def _no_progress(done: int, total: int | None, message: str | None) -> None:
    return None


@dataclass
class CallContext:
    app: App
    method: str
    request_id: RequestId
    connection_id: int
    # Sends a `$/progress` notification to the caller's connection (no-op for notifications).
    progress: ProgressSink = field(default=_no_progress)
    # Every method the daemon serves (``initialize`` lists them).
    method_names: tuple[str, ...] = ()
