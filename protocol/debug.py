"""Diagnostics, served only when the daemon runs with debug methods enabled."""

from __future__ import annotations

from protocol.base import MethodSchema, Params, WireStruct


class SleepParams(Params):
    seconds: float = 0.0


class SleepResult(WireStruct):
    slept: float


METHODS: dict[str, MethodSchema] = {
    "debug.sleep": MethodSchema(
        SleepParams, SleepResult, "Sleep without blocking (tests drain and timeouts); debug only"
    ),
}
