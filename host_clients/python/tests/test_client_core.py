"""The shared protocol model (framing, ids, decoding, error mapping) without any I/O."""

from __future__ import annotations

import json
import pickle

import libravdb_client
import msgspec
import pytest
from libravdb_client import (
    ERROR_CLASSES,
    Endpoint,
    InvalidParams,
    LibravdbError,
    MethodNotFound,
    ProtocolError,
    RpcError,
    RpcTimeout,
    default_endpoint,
    error_class,
    parse_endpoint,
)
from libravdb_client._core import (
    LineBuffer,
    Progress,
    Reply,
    ServerNotification,
    Session,
    result_any,
    result_as,
)

from protocol.codes import ErrorCode
from protocol.core import HealthResult


def line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


# -- framing ------------------------------------------------------------------------------


def test_lines_split_across_chunks_and_blank_lines_skipped() -> None:
    buf = LineBuffer(max_line=100)
    assert buf.feed(b'{"a":') == []
    assert buf.feed(b"1}\n\n  \r\n{") == [bytearray(b'{"a":1}')]
    assert buf.pending == 1
    assert buf.feed(b"}\n") == [bytearray(b"{}")]
    assert buf.pending == 0


def test_line_over_the_cap_is_a_protocol_error() -> None:
    buf = LineBuffer(max_line=10)
    assert buf.feed(b"x" * 10) == []
    with pytest.raises(ProtocolError, match="exceeds 10"):
        buf.feed(b"y")
    with pytest.raises(ProtocolError):
        LineBuffer(max_line=10).feed(b"z" * 11 + b"\n")


def test_a_64_mib_line_is_read() -> None:
    buf = LineBuffer()  # the default cap is 64 MiB
    chunk = b"x" * (1 << 20)
    for _ in range(64):
        assert buf.feed(chunk) == []
    (big,) = buf.feed(b"\n")
    assert len(big) == 64 << 20


# -- the session --------------------------------------------------------------------------


def test_requests_are_json_rpc_with_increasing_ids() -> None:
    session = Session()
    first, data1 = session.request("health")
    second, data2 = session.request("status", {"a": [1, 2]})
    assert (first, second) == (1, 2)
    assert json.loads(data1) == {"jsonrpc": "2.0", "id": 1, "method": "health"}
    assert json.loads(data2) == {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "status",
        "params": {"a": [1, 2]},
    }
    assert data1.endswith(b"\n") and data1.count(b"\n") == 1
    assert json.loads(session.notification("x", [1])) == {
        "jsonrpc": "2.0",
        "method": "x",
        "params": [1],
    }


def test_structs_are_encoded_camel_case() -> None:
    from protocol.core import ClientInfo, InitializeParams

    _, data = Session().request("initialize", InitializeParams(client_info=ClientInfo(name="t")))
    assert json.loads(data)["params"]["clientInfo"] == {"name": "t", "version": ""}


def test_reply_routing_and_late_replies_dropped() -> None:
    session = Session()
    a, _ = session.request("status")
    b, _ = session.request("health")
    session.abandon(a)  # timed out
    events = session.feed(
        line({"jsonrpc": "2.0", "id": a, "result": {"late": True}})
        + line({"jsonrpc": "2.0", "id": b, "result": {"ok": True, "message": "ok"}})
        + line({"jsonrpc": "2.0", "id": 99, "result": 1})  # unknown id: dropped
    )
    assert len(events) == 1 and isinstance(events[0], Reply) and events[0].id == b
    assert result_as(events[0], HealthResult, "health") == HealthResult(ok=True, message="ok")
    assert session.waiting == 0


def test_null_result_is_a_result() -> None:
    session = Session()
    rid, _ = session.request("x")
    (reply,) = session.feed(line({"jsonrpc": "2.0", "id": rid, "result": None}))
    assert isinstance(reply, Reply) and result_any(reply) is None


def test_error_with_null_id_goes_to_the_oldest_unanswered_request() -> None:
    session = Session()
    a, _ = session.request("big")
    b, _ = session.request("health")
    error = {"code": -32001, "message": "too large"}
    (reply,) = session.feed(line({"jsonrpc": "2.0", "id": None, "error": error}))
    assert isinstance(reply, Reply) and reply.id == a
    with pytest.raises(libravdb_client.FrameTooLarge):
        result_any(reply)
    # If the oldest was abandoned, its error is dropped rather than given to another call.
    session.abandon(b)
    assert session.feed(line({"jsonrpc": "2.0", "id": None, "error": error})) == []
    assert session.feed(line({"jsonrpc": "2.0", "id": None, "error": error})) == []


def test_progress_and_other_notifications() -> None:
    session = Session()
    rid, _ = session.request("ingest")
    events = session.feed(
        line(
            {
                "jsonrpc": "2.0",
                "method": "$/progress",
                "params": {"token": rid, "done": 2, "total": 5},
            }
        )
        + line({"jsonrpc": "2.0", "method": "$/log", "params": {"x": 1}})
        + line({"jsonrpc": "2.0", "method": "$/progress", "params": {"bad": 1}})
    )
    assert isinstance(events[0], Progress)
    assert (events[0].params.token, events[0].params.done, events[0].params.total) == (rid, 2, 5)
    assert events[1] == ServerNotification("$/log", {"x": 1})
    assert isinstance(events[2], ServerNotification)  # malformed progress: passed on as is


@pytest.mark.parametrize(
    "frame",
    [
        b"not json\n",
        b"[1, 2]\n",
        b'{"jsonrpc": "2.0", "id": 1}\n',
        b'{"result": 1}\n',
        b'{"id": 1, "error": {"message": "no code"}}\n',
    ],
)
def test_malformed_frames_are_protocol_errors(frame: bytes) -> None:
    session = Session()
    session.request("x")
    with pytest.raises(ProtocolError):
        session.feed(frame)


def test_result_of_the_wrong_shape_is_a_protocol_error() -> None:
    session = Session()
    rid, _ = session.request("health")
    (reply,) = session.feed(line({"jsonrpc": "2.0", "id": rid, "result": {"ok": "yes"}}))
    assert isinstance(reply, Reply)
    with pytest.raises(ProtocolError, match="HealthResult"):
        result_as(reply, HealthResult, "health")


# -- errors -------------------------------------------------------------------------------


def test_every_error_code_has_its_class() -> None:
    for code in ErrorCode:
        if code is ErrorCode.SERVER_ERROR:
            assert error_class(code) is RpcError
            continue
        cls = ERROR_CLASSES[code]
        assert code == cls.CODE and issubclass(cls, RpcError)
        assert cls.__name__ in libravdb_client.__all__
    assert error_class(-31999) is RpcError


def test_the_package_exports_every_public_name_of_errors_once() -> None:
    from libravdb_client import errors

    exported = libravdb_client.__all__
    assert len(exported) == len(set(exported))
    for name in errors.__all__:
        assert name in exported
        assert getattr(libravdb_client, name) is getattr(errors, name)
    for name in exported:
        assert hasattr(libravdb_client, name), name


def test_error_objects_and_hierarchy() -> None:
    session = Session()
    rid, _ = session.request("x")
    error = {"code": -32602, "message": "bad", "data": {"path": "$.k"}}
    (reply,) = session.feed(line({"jsonrpc": "2.0", "id": rid, "error": error}))
    assert isinstance(reply, Reply)
    with pytest.raises(InvalidParams) as info:
        result_any(reply)
    exc = info.value
    assert (exc.code, exc.message, exc.data) == (-32602, "bad", {"path": "$.k"})
    assert isinstance(exc, LibravdbError) and str(exc) == "bad (code -32602)"
    copy = pickle.loads(pickle.dumps(exc))
    assert type(copy) is InvalidParams and copy.data == exc.data
    assert isinstance(RpcTimeout("m", 1.0), TimeoutError)
    assert pickle.loads(pickle.dumps(RpcTimeout("m", 1.0))).method == "m"
    assert MethodNotFound(-32601, "x").code == -32601


# -- endpoints ----------------------------------------------------------------------------


def test_parse_endpoint() -> None:
    assert parse_endpoint("unix:/tmp/x.sock") == Endpoint("unix", path="/tmp/x.sock")
    assert parse_endpoint(" tcp:127.0.0.1:5000 ") == Endpoint("tcp", host="127.0.0.1", port=5000)
    assert parse_endpoint("tcp:[::1]:5000") == Endpoint("tcp", host="::1", port=5000)
    assert str(parse_endpoint("tcp:[::1]:5000")) == "tcp:[::1]:5000"
    for bad in ("unix:", "tcp:5000", "tcp:host:port", "tcp:h:0", "http://x", "stdio"):
        with pytest.raises(ValueError):
            parse_endpoint(bad)


def test_default_endpoint() -> None:
    assert default_endpoint({"LIBRAVDB_RPC_ENDPOINT": " tcp:127.0.0.1:9 "}) == "tcp:127.0.0.1:9"
    assert default_endpoint({"HOME": "/h"}) == "unix:/h/.clawdb/run/libravdb.sock"


def test_timeouts_are_validated() -> None:
    with pytest.raises(ValueError):
        libravdb_client.Client("unix:/nowhere", timeout=-1)


def test_msgspec_raw_results_survive_buffer_reuse() -> None:
    session = Session()
    rid, _ = session.request("x")
    (reply,) = session.feed(line({"jsonrpc": "2.0", "id": rid, "result": {"k": [1, 2]}}) + b'{"id"')
    session.feed(b': 5, "result": 0}\n')
    assert isinstance(reply, Reply) and isinstance(reply.result, msgspec.Raw)
    assert result_any(reply) == {"k": [1, 2]}
