"""Client behaviour the daemon cannot provoke yet, against a scripted peer on a Unix socket.

Everything else is tested against the real daemon. Here a few lines of socket code stand
in for it because no daemon method emits ``$/progress`` yet, and the daemon never sends
a malformed frame: progress routing, server notifications and ProtocolError handling.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from libravdb_client import (
    AsyncClient,
    Client,
    ConnectionClosed,
    ProgressParams,
    ProtocolError,
)


def frame(obj: Any) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def script(request: dict[str, Any]) -> bytes:
    """The peer's answer to one request: progress, a notification, then the reply."""
    rid = request["id"]
    if request["method"] == "work":
        out = b"".join(
            frame(
                {
                    "jsonrpc": "2.0",
                    "method": "$/progress",
                    "params": {"token": rid, "done": i, "total": 3},
                }
            )
            for i in range(1, 4)
        )
        out += frame(
            {"jsonrpc": "2.0", "method": "$/progress", "params": {"token": 999, "done": 1}}
        )
        out += frame({"jsonrpc": "2.0", "method": "$/log", "params": {"line": "hi"}})
        return out + frame({"jsonrpc": "2.0", "id": rid, "result": {"done": True}})
    return b"this is not json\n"


@pytest.fixture
def sync_peer(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "peer.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen()

    def serve() -> None:
        conn, _ = server.accept()
        with conn, conn.makefile("rb") as lines:
            for line in lines:
                conn.sendall(script(json.loads(line)))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"unix:{path}"
    server.close()
    thread.join(5)


def test_sync_progress_notifications_and_protocol_errors(sync_peer: str) -> None:
    progress: list[ProgressParams] = []
    notes: list[tuple[str, Any]] = []
    with Client(sync_peer, on_notification=lambda m, p: notes.append((m, p))) as client:
        assert client.call("work", on_progress=progress.append) == {"done": True}
        assert [(p.done, p.total) for p in progress] == [(1, 3), (2, 3), (3, 3)]
        assert notes == [("$/log", {"line": "hi"})]
        with pytest.raises(ProtocolError, match="invalid frame"):
            client.call("other")
        with pytest.raises(ConnectionClosed, match="invalid frame"):
            client.call("work")


async def test_async_progress_notifications_and_protocol_errors(tmp_path: Path) -> None:
    finished = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                request = json.loads(line)
                if request["method"] == "slow":
                    continue  # never answered: fails when the connection breaks
                writer.write(script(request))
                await writer.drain()
        finally:
            writer.close()
            finished.set()

    path = str(tmp_path / "peer.sock")
    server = await asyncio.start_unix_server(serve, path)
    progress: list[ProgressParams] = []
    notes: list[tuple[str, Any]] = []
    try:
        async with AsyncClient(
            f"unix:{path}", on_notification=lambda m, p: notes.append((m, p))
        ) as client:
            assert await client.call("work", on_progress=progress.append) == {"done": True}
            assert [p.done for p in progress] == [1, 2, 3]
            assert notes == [("$/log", {"line": "hi"})]
            slow = asyncio.create_task(client.call("slow"))
            await asyncio.sleep(0.05)
            with pytest.raises(ProtocolError):
                await client.call("other")
            with pytest.raises(ProtocolError):  # waiting calls fail with the same cause
                await slow
            with pytest.raises(ConnectionClosed):
                await client.call("work")
        await asyncio.wait_for(finished.wait(), 5)
    finally:
        server.close()
        await server.wait_closed()
