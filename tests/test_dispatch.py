"""The dispatch layer alone: a handler that crashes becomes -32603 and nothing else breaks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from sidecar.api.context import CallContext
from sidecar.api.registry import Registry
from sidecar.app import App
from sidecar.config import load_settings
from sidecar.server.dispatch import Dispatcher


async def _send(data: bytes) -> None:
    return None


async def test_a_crashing_handler_is_an_internal_error(tmp_path: Path) -> None:
    app = App(load_settings(env={"LIBRAVDB_DATA_DIR": str(tmp_path / "data")}))
    registry = Registry()
    calls = 0

    @registry.method("health")
    async def health(ctx: CallContext, params: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("boom")
        return {"ok": True, "message": "ok", "models": {}}

    dispatcher = Dispatcher(app, registry)
    frame = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "health"}).encode()
    first = json.loads(await dispatcher.handle_frame(frame, 1, _send) or b"null")
    assert first["id"] == 7
    assert first["error"]["code"] == -32603
    assert first["error"]["message"] == "internal error in health: RuntimeError: boom"
    second = json.loads(await dispatcher.handle_frame(frame, 1, _send) or b"null")
    assert second["result"]["ok"] is True
    calls_made, errors, _p50, _p95 = app.stats.snapshot()["health"]
    assert (calls_made, errors) == (2, 1)


async def test_a_batch_lets_other_connections_run_between_its_entries(tmp_path: Path) -> None:
    """A batch of handlers that never wait used to run start to end on the event loop (a
    250,000-entry batch stalled every other client for 3.5 s)."""
    app = App(load_settings(env={"LIBRAVDB_DATA_DIR": str(tmp_path / "data")}))
    registry = Registry()
    order: list[str] = []

    @registry.method("health")
    async def health(ctx: CallContext, params: Any) -> Any:
        order.append("batch entry")
        return {"ok": True, "message": "ok", "models": {}}

    async def other_connection() -> None:
        order.append("other")

    dispatcher = Dispatcher(app, registry)
    batch = [{"jsonrpc": "2.0", "id": i, "method": "health"} for i in range(5)]
    other = asyncio.get_running_loop().create_task(other_connection())
    reply = json.loads(await dispatcher.handle_frame(json.dumps(batch).encode(), 1, _send) or b"[]")
    await other
    assert len(reply) == 5
    assert order.index("other") < len(order) - 1, order
