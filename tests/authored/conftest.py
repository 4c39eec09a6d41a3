"""In-process dispatcher fixture (JSON in, JSON out) with a deterministic hash embedder.

Every test here runs on both store backends (``store_target``, tests/conftest.py):
``make_rpc`` and ``start_daemon`` open the current one."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.api import build_registry
from sidecar.app import App
from sidecar.config import load_settings
from sidecar.server.dispatch import Dispatcher
from sidecar.services import install_memory
from sidecar.store.service import StoreService
from tests.support import StoreTarget, current_store, hashed_bag_of_words

DIMS = 16
Call = Callable[..., Awaitable[Any]]


class EmbedSpy:
    def __init__(self) -> None:
        self.calls: list[int] = []
        self.fail = False

    async def __call__(self, texts: Sequence[str], kind: str) -> np.ndarray[Any, Any]:
        if self.fail:
            from sidecar.engines import EngineError

            raise EngineError("embedder exploded")
        self.calls.append(len(texts))
        return hashed_bag_of_words(texts, DIMS)


class Rpc:
    def __init__(self, app: App, embed: EmbedSpy) -> None:
        self.app = app
        self.embed = embed
        self.dispatcher = Dispatcher(app, build_registry())
        self._ids = iter(range(1, 10**9))

    async def __call__(self, method: str, params: Any = None, *, error: bool = False) -> Any:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None:
            msg["params"] = params

        async def send(_line: bytes) -> None:
            return None

        raw = await self.dispatcher.handle_frame(json.dumps(msg).encode(), 1, send)
        assert raw is not None
        reply = json.loads(raw)
        if error:
            assert "error" in reply, reply
            return reply["error"]
        assert "error" not in reply, reply
        return reply["result"]

    async def listing(self, collection: str) -> list[dict[str, Any]]:
        res = await self("list_collection", {"collection": collection})
        return list(res["results"])


async def make_rpc(tmp_path: Path, **flags: Any) -> tuple[Rpc, App]:
    store = current_store().flags(tmp_path / "data")
    settings = load_settings(flags={"data_dir": str(tmp_path / "data"), **store, **flags}, env={})
    app = App(settings)
    spy = EmbedSpy()
    store_svc = StoreService(settings, embed=spy, embed_dims=DIMS, fingerprint="hash-embed")
    app.provide(StoreService, store_svc)
    install_memory(app, store_svc)
    await app.start()
    return Rpc(app, spy), app


@pytest.fixture(autouse=True)
def _both_backends(store_target: StoreTarget) -> StoreTarget:
    return store_target


@pytest.fixture
async def rpc(tmp_path: Path) -> AsyncIterator[Rpc]:
    r, app = await make_rpc(tmp_path)
    try:
        yield r
    finally:
        await app.close()
