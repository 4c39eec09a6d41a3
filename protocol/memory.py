"""v2 memory inspection and correction: ``memory.list`` and ``memory.update``
(``memory.get`` is with ``search`` in ``protocol.assemble``)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from protocol.assemble import MemoryRecord
from protocol.base import MethodSchema, Params, WireStruct

MAX_LIST_LIMIT = 500
ListScope = Literal["durable", "history", "summary", "elevated", "dream"]


class MemoryListParams(Params):
    """One page of a namespace's records of one ``scope``, newest first (by ``ts``).

    ``sessionId`` keeps only that session's records (it must belong to the namespace;
    alone it names the namespace too). ``since``/``until`` bound ``ts`` (epoch ms,
    inclusive). ``cursor`` is the ``nextCursor`` of the previous page.
    ``includeSuperseded`` also lists durable facts replaced by ``memory.update``."""

    namespace: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    scope: ListScope = "durable"
    since: int | None = None
    until: int | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_LIST_LIMIT)] = 50
    cursor: str | None = None
    include_superseded: bool = False


class MemoryListResult(WireStruct):
    """``total`` counts every record that matches (all pages); ``nextCursor`` is "" on
    the last page."""

    records: list[MemoryRecord]
    total: int
    next_cursor: str


class MemoryUpdateParams(Params):
    """Replace the text of a durable fact (``user:<ns>``), or correct a raw turn of the
    namespace (``turns:<ns>``: its durable copy gets the new text). The old text is kept
    as a superseded version; a superseded fact ranks far below the current one."""

    collection: str
    id: str
    text: str
    namespace: str | None = None
    user_id: str | None = None


class MemoryUpdateResult(WireStruct):
    """``record`` is the durable fact now; ``previous`` the version kept as history
    (``superseded_by`` in its metadata names ``record``)."""

    record: MemoryRecord
    previous: MemoryRecord | None


METHODS: dict[str, MethodSchema] = {
    "memory.list": MethodSchema(
        MemoryListParams,
        MemoryListResult,
        "list a namespace's durable facts, history, summaries, guidance or dream entries, "
        "newest first, a page at a time",
    ),
    "memory.update": MethodSchema(
        MemoryUpdateParams,
        MemoryUpdateResult,
        "replace a durable fact's text; the old version is kept as superseded history",
    ),
}
