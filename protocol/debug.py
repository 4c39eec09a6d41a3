"""Diagnostics, served only when the daemon runs with debug methods enabled."""

from __future__ import annotations

from typing import Annotated

import msgspec

from protocol.base import MethodSchema, Params, WireStruct

MAX_DENSE_K = 1000


class SleepParams(Params):
    seconds: float = 0.0


class SleepResult(WireStruct):
    slept: float


class DenseTopParams(Params):
    collection: Annotated[str, msgspec.Meta(min_length=1)]
    query: str
    k: Annotated[int, msgspec.Meta(ge=1, le=MAX_DENSE_K)] = 10


class DenseTopResult(WireStruct):
    ids: list[str]
    mode: str  # exact | graph | store: how the view ranked
    graph_state: str  # none | building | ready | skipped | failed | closed
    graph_rows: int  # rows the in-process graph's build has inserted
    rows: int  # records the view holds


METHODS: dict[str, MethodSchema] = {
    "debug.sleep": MethodSchema(
        SleepParams, SleepResult, "Sleep without blocking (tests drain and timeouts); debug only"
    ),
    "debug.denseTop": MethodSchema(
        DenseTopParams,
        DenseTopResult,
        "One collection's dense top k as assemble ranks it (recall checks); debug only",
    ),
}
