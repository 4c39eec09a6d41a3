"""The one table from exceptions to JSON-RPC errors (sidecar/api/errors.py): the client's
mistakes and the daemon's faults are told apart in one place."""

from __future__ import annotations

import pytest

from protocol.codes import ErrorCode
from sidecar.api.errors import rpc_error_for
from sidecar.engines.errors import (
    CancelledError,
    InvalidInputError,
    ModelLoadError,
    ModelUnavailableError,
)
from sidecar.errors import Busy, RpcError
from sidecar.memory.core.errors import MemoryInputError, MemoryNotFound, SessionNamespaceError
from sidecar.store import errors as se


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (Busy("busy"), ErrorCode.BUSY),
        (SessionNamespaceError("session s belongs to a"), ErrorCode.WRONG_NAMESPACE),
        (MemoryNotFound("no record 'x' in 'user:a'"), ErrorCode.NOT_FOUND),
        (MemoryInputError("sessionId is required"), ErrorCode.INVALID_INPUT),
        (se.InvalidInput("bad name", field="collection"), ErrorCode.INVALID_INPUT),
        (se.NotFound("no such record"), ErrorCode.NOT_FOUND),
        (se.VersionConflict("c", "r", 1, 2), ErrorCode.CONFLICT),
        (se.StoreClosed("closed"), ErrorCode.SHUTTING_DOWN),
        (se.StorageUnavailable("disk full"), ErrorCode.STORAGE_ERROR),
        (se.CorruptStore("/data/store.sqlite3", "bad page"), ErrorCode.STORAGE_ERROR),
        (se.FingerprintMismatch("/data", "a", "b"), ErrorCode.FINGERPRINT_MISMATCH),
        (InvalidInputError("texts[1] is empty"), ErrorCode.INVALID_INPUT),
        (CancelledError("cancelled"), ErrorCode.CANCELLED),
        (ModelUnavailableError("no model"), ErrorCode.MODEL_UNAVAILABLE),
        (ModelLoadError("broken file"), ErrorCode.MODEL_UNAVAILABLE),
    ],
)
def test_domain_errors_carry_their_code(exc: Exception, code: ErrorCode) -> None:
    mapped = rpc_error_for(exc, "some_method")
    assert mapped is not None and mapped.code == code


def test_an_rpc_error_passes_as_it_is() -> None:
    exc = RpcError("x", code=ErrorCode.NOT_FOUND, data={"id": "1"})
    assert rpc_error_for(exc, "m") is exc


def test_store_data_and_engine_method_reach_the_client() -> None:
    store = rpc_error_for(se.InvalidInput("bad name", field="collection"), "m")
    assert store is not None and store.data == {"field": "collection"}
    engine = rpc_error_for(ModelUnavailableError("no model"), "search_text")
    assert engine is not None and engine.message == "search_text: no model"


@pytest.mark.parametrize("exc", [ValueError("bug"), RuntimeError("bug"), KeyError("k")])
def test_anything_else_is_a_daemon_fault(exc: Exception) -> None:
    assert rpc_error_for(exc, "m") is None
