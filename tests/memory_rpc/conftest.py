"""In-process daemon for the memory RPC tests: the real dispatcher, store and memory
service, with a deterministic hash embedder (shared words => similar vectors).

Every test here runs on both store backends (``store_target``, tests/conftest.py):
``make_harness`` and ``start_daemon`` open the current one."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.api import build_registry
from sidecar.app import App
from sidecar.config import load_settings
from sidecar.memory.service import MemoryService
from sidecar.server.dispatch import Dispatcher
from sidecar.services import install_memory
from sidecar.store.service import StoreService
from tests.support import StoreTarget, current_store, hash_embedder

DIMS = 32
Call = Callable[..., Awaitable[Any]]


hash_embed = hash_embedder(DIMS)


@dataclass
class Harness:
    app: App
    call: Call
    memory: MemoryService


class EmbedCounter:
    """hash_embed that records the size of every call."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    async def __call__(self, texts: Sequence[str], kind: str) -> np.ndarray[Any, Any]:
        self.calls.append(len(texts))
        return await hash_embed(texts, kind)


async def make_harness(
    tmp_path: Path,
    *,
    embed: Callable[[Sequence[str], str], Awaitable[np.ndarray[Any, Any]]] = hash_embed,
    **flags: Any,
) -> tuple[Harness, Callable[[], Any]]:
    store = current_store().flags(tmp_path / "data")
    settings = load_settings(flags={"data_dir": str(tmp_path / "data"), **store, **flags}, env={})
    app = App(settings)
    store_svc = StoreService(settings, embed=embed, embed_dims=DIMS, fingerprint="hash")
    app.provide(StoreService, store_svc)
    install_memory(app, store_svc)
    memory = app.service(MemoryService)
    await app.start()
    dispatcher = Dispatcher(app, build_registry())
    counter = iter(range(1, 10**9))

    async def send(_line: bytes) -> None:
        return None

    async def call(method: str, params: Any = None, *, error: bool = False) -> Any:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": next(counter), "method": method}
        if params is not None:
            msg["params"] = params
        raw = await dispatcher.handle_frame(json.dumps(msg).encode(), 1, send)
        assert raw is not None
        reply = json.loads(raw)
        if error:
            assert "error" in reply, reply
            return reply["error"]
        assert "error" not in reply, reply
        return reply["result"]

    return Harness(app, call, memory), app.close


@pytest.fixture(autouse=True)
def _both_backends(store_target: StoreTarget) -> StoreTarget:
    return store_target


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    h, close = await make_harness(tmp_path)
    try:
        yield h
    finally:
        await close()


@pytest.fixture
async def rpc(harness: Harness) -> Call:
    return harness.call
