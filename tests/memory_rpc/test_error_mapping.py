"""The memory layer's refusals are the client's error (-32009); anything else it raises is
the daemon's fault (-32603, stack trace logged), never passed off as invalid input.

Regression: every ValueError became -32009 "invalid input" and every RuntimeError
"model unavailable", so a programming error reached the client as the client's fault.
A fault cannot be produced on demand by the real code, so one is injected.
"""

from __future__ import annotations

import pytest

from protocol.codes import ErrorCode
from sidecar.memory.core.errors import MemoryInputError
from sidecar.memory.service import MemoryService
from tests.memory_rpc.conftest import Harness


async def _compact_error(harness: Harness) -> dict[str, object]:
    await harness.call(
        "ingest", {"sessionId": "e1", "messages": [{"role": "user", "content": "x"}]}
    )
    err: dict[str, object] = await harness.call("compact", {"sessionId": "e1"}, error=True)
    return err


@pytest.mark.parametrize("fault", [ValueError("bug"), RuntimeError("bug"), KeyError("bug")])
async def test_a_fault_is_an_internal_error(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, fault: Exception
) -> None:
    async def broken(*_args: object, **_kwargs: object) -> None:
        raise fault

    monkeypatch.setattr(MemoryService, "compact", broken)
    err = await _compact_error(harness)
    assert err["code"] == ErrorCode.INTERNAL_ERROR, err
    assert type(fault).__name__ in str(err["message"])


async def test_a_refusal_is_invalid_input(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refuses(*_args: object, **_kwargs: object) -> None:
        raise MemoryInputError("targetSize is too small for this session")

    monkeypatch.setattr(MemoryService, "compact", refuses)
    err = await _compact_error(harness)
    assert err["code"] == ErrorCode.INVALID_INPUT
    assert err["message"] == "targetSize is too small for this session"


async def test_real_refusals_still_name_the_problem(harness: Harness) -> None:
    err = await harness.call(
        "ingest", {"sessionId": "e2", "messages": [{"role": "wizard", "content": "x"}]}, error=True
    )
    assert err["code"] == ErrorCode.INVALID_INPUT and "role" in err["message"]
    err = await harness.call("forget", {"namespace": " "}, error=True)
    assert err["code"] == ErrorCode.INVALID_INPUT
