"""One real daemon (the default config: the real embedding model) for every MCP test, and
helpers that start ``libravdb mcp`` as a child process and drive it with the MCP SDK's own
client over stdio."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from libravdb_client.testing import DaemonProcess
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "mcp-test"

McpClient = Callable[..., AbstractAsyncContextManager[Client]]


@pytest.fixture(scope="session")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-home")


@pytest.fixture(scope="session")
def env(home: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LIBRAVDB_")}
    return {**clean, "HOME": str(home), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory, home: Path) -> Iterator[DaemonProcess]:
    base = tmp_path_factory.mktemp("mcp-daemon")
    with DaemonProcess.start("tcp", data_dir=base / "data", home=home) as running:
        yield running


def mcp_argv(*args: str) -> list[str]:
    return ["-m", "sidecar", "mcp", *args]


@pytest.fixture
def mcp_client(daemon: DaemonProcess, env: dict[str, str], tmp_path: Path) -> McpClient:
    """``async with mcp_client(*extra_args) as client``: a fresh ``libravdb mcp`` child
    connected to the shared daemon; its stderr is kept in ``tmp_path/mcp-stderr.log``."""

    @asynccontextmanager
    async def start(*extra: str) -> AsyncIterator[Client]:
        params = StdioServerParameters(
            command=sys.executable,
            args=mcp_argv("--endpoint", daemon.endpoint, "--namespace", NAMESPACE, *extra),
            env=env,
            cwd=str(REPO),
        )
        with (tmp_path / "mcp-stderr.log").open("a") as errlog:
            # cache=None: every list and read must reach the server (the test changes what
            # they return between calls)
            transport = stdio_client(params, errlog=errlog)
            async with Client(transport, read_timeout_seconds=120, cache=None) as client:
                yield client

    return start


def text_of(result: CallToolResult) -> str:
    parts = [c.text for c in result.content if isinstance(c, TextContent)]
    return "\n".join(parts)


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return dict(result.structured_content)
