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


class Params(WireStruct, forbid_unknown_fields=True):
    """Base for v2 params and the objects nested in them: an unknown field is an error.

    A misspelled field (``user_id`` for ``userId``, ``query`` for ``prompt``) would
    otherwise be dropped silently and the call would do something else than asked. The
    daemon answers -32602 naming the field and the closest known name. v1 params keep
    ``WireStruct``'s tolerance: the reference daemon ignored unknown fields and its
    plugin may send some.
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
