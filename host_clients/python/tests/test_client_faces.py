"""``Client`` and ``AsyncClient`` stay two faces of one client (no daemon needed).

The typed methods are written once (``libravdb_client._methods``); these tests fail when
a method is added to one client only, when a typed method is written again by hand in
one of them, or when the two faces' signatures drift apart.
"""

from __future__ import annotations

import inspect
import re

import pytest
from libravdb_client import AsyncClient, Client
from libravdb_client._methods import RpcMethods
from libravdb_client._rpc import rpc

from protocol.catalog import all_methods
from protocol.core import InitializeResult

ENDPOINT = "unix:/nonexistent/libravdb.sock"  # never connected: nothing is called
ASYNC_ONLY = {"in_flight"}  # calls in flight exist only where calls run concurrently


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def _typed_methods() -> list[str]:
    return [name for name, value in vars(RpcMethods).items() if isinstance(value, rpc)]


def test_both_clients_have_the_same_public_names() -> None:
    assert _public(Client) - _public(AsyncClient) == set()
    assert _public(AsyncClient) - _public(Client) == ASYNC_ONLY


def test_typed_methods_are_written_once() -> None:
    typed = _typed_methods()
    assert len(typed) >= 20
    for name in typed:
        assert name not in vars(Client) and name not in vars(AsyncClient), name


def test_every_typed_method_calls_a_declared_rpc() -> None:
    source = inspect.getsource(RpcMethods)
    called = re.findall(r'Call\(\s*"([^"]+)"', source)
    assert len(called) == len(_typed_methods())
    assert set(called) <= set(all_methods())


@pytest.mark.parametrize("name", sorted(_public(Client)))
def test_signatures_match(name: str) -> None:
    sync_attr = inspect.getattr_static(Client, name)
    if isinstance(sync_attr, property):
        assert isinstance(inspect.getattr_static(AsyncClient, name), property)
        return
    sync_client, async_client = Client(ENDPOINT), AsyncClient(ENDPOINT)
    sync_method, async_method = getattr(sync_client, name), getattr(async_client, name)
    if not callable(sync_method):
        return
    sync_sig, async_sig = inspect.signature(sync_method), inspect.signature(async_method)
    assert list(sync_sig.parameters.values()) == list(async_sig.parameters.values()), name
    if isinstance(inspect.getattr_static(RpcMethods, name, None), rpc):
        assert not inspect.iscoroutinefunction(sync_method)
        assert inspect.iscoroutinefunction(async_method)
        assert sync_method.__doc__ == async_method.__doc__


def test_a_typed_method_builds_its_call_on_either_face() -> None:
    sync_client = Client(ENDPOINT, auth_token="t0ken")
    sent: list[tuple[str, object, type, object]] = []

    def call_typed(method: str, params: object, result_type: type, **kw: object) -> str:
        sent.append((method, params, result_type, kw["timeout"]))
        return "result"

    sync_client.call_typed = call_typed  # type: ignore[method-assign]
    assert sync_client.initialize(timeout=3) == "result"  # type: ignore[comparison-overlap]
    method, params, result_type, timeout = sent[0]
    assert (method, result_type, timeout) == ("initialize", InitializeResult, 3)
    assert getattr(params, "auth_token", None) == "t0ken"
