"""Conventions shared by every wire Struct."""

from __future__ import annotations

import msgspec


class WireStruct(msgspec.Struct, rename="camel", forbid_unknown_fields=False):
    """Base for params and results: camelCase on the wire, extra keys ignored.

    Results carry every field (the reference clients read fields without defaults); a
    field that may be absent on the wire is typed ``T | UnsetType`` with ``UNSET``.

    Unknown fields are ignored rather than rejected so that newer clients keep working
    against older daemons (and the reference plugin's extra fields are harmless).
    """


class MethodSchema(msgspec.Struct, frozen=True):
    """One RPC method: its params and result types and a one-line description.

    Each protocol module exposes ``METHODS: dict[str, MethodSchema]``; the catalog
    gathers them for dispatch, clients and the JSON Schema export.
    """

    params: type | None
    result: type
    summary: str
    notification_ok: bool = False
