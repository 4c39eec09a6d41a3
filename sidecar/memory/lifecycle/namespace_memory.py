"""``NamespaceMemory``: a namespace's memory as its owner sees it, one method a verb.

``memory.get``, ``memory.list``, ``memory.update``, ``memory.stats``, ``sessions.list`` and
``forget`` each take the request's :class:`~sidecar.memory.service.Address` and resolve the
namespace through :class:`~sidecar.memory.service.MemoryService` first (a session of
another namespace: -32012), so a handler only decodes and shapes. The work itself stays
in the modules of this package (``listing``, ``update``, ``stats``, ``session_index``,
``forget``, ``forget_items``).

A ``forget`` by query needs the retrieval layer above this one: the wiring hands in the
:class:`ForgetQueries` that turn a query into the records that clearly match it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sidecar.memory.core import layout as C
from sidecar.memory.core.errors import MemoryInputError, MemoryNotFound
from sidecar.memory.lifecycle import stats
from sidecar.memory.lifecycle.forget import ForgetOutcome, forget_namespace
from sidecar.memory.lifecycle.forget_items import (
    ItemsOutcome,
    RecordRef,
    forget_items,
    readable_by,
)
from sidecar.memory.lifecycle.listing import ListPage, ListQuery, list_memory
from sidecar.memory.lifecycle.session_index import SessionsPage, list_sessions
from sidecar.memory.lifecycle.timeline import Bucket
from sidecar.memory.lifecycle.update import UpdateOutcome, update_fact
from sidecar.memory.service import Address, MemoryService
from sidecar.store.types import Record


class ForgetQueries(Protocol):
    """How a ``forget`` query becomes records (``sidecar.assembly.forget_query``)."""

    async def matches(self, namespace: str, query: str) -> list[RecordRef]:
        """The namespace's records that clearly match ``query``."""
        ...

    def too_many(self, query: str, found: int, limit: int) -> Exception:
        """The refusal when more memories clearly match than ``limit``."""
        ...


@dataclass(frozen=True, slots=True)
class ForgetSelection:
    """What a ``forget`` of single things names: message ids, records, and a query whose
    clear matches are forgotten too (all of them, or none past ``limit``)."""

    message_ids: Sequence[str] = ()
    records: Sequence[RecordRef] = ()
    query: str | None = None
    limit: int = 1
    dry_run: bool = False


def _reader(who: Address) -> Address:
    """memory.* name their session with the spaces a host may leave around it."""
    sid = who.session_id.strip() if who.session_id else ""
    return Address(who.namespace, who.user_id, sid)


class NamespaceMemory:
    """The service behind ``memory.*``, ``sessions.list`` and ``forget`` (module doc)."""

    def __init__(self, memory: MemoryService, queries: ForgetQueries) -> None:
        self.memory = memory
        self.queries = queries

    async def get(self, who: Address, collection: str, record_id: str) -> Record:
        """One record of a collection a search in the request's namespace reads; not found
        alike for "not yours" and "absent", so existence is not revealed."""
        ns = await self.memory.namespace_of(_reader(who))
        store = self.memory.store
        allowed = await readable_by(store, ns, collection)
        record = await store.get(collection, record_id) if allowed else None
        if record is None:
            raise MemoryNotFound(f"no record {record_id!r} in {collection!r} for this namespace")
        return record

    async def listing(self, who: Address, query: Callable[[str], ListQuery]) -> ListPage:
        """One page of the namespace's records; ``query`` builds the page's query once the
        namespace is known."""
        ns = await self.memory.namespace_of(_reader(who))
        return await list_memory(self.memory.store, query(ns))

    async def update(
        self, who: Address, collection: str, record_id: str, text: str
    ) -> UpdateOutcome:
        """Correct a durable fact of the namespace (``update`` module doc)."""
        ns = await self.memory.namespace_of(_reader(who))
        return await update_fact(self.memory, ns, collection, record_id, text)

    async def stats(self, who: Address, bucket: Bucket) -> stats.MemoryStats:
        """Counts of the namespace named, or of every namespace when none is."""
        named = self.memory.named_namespace(who)
        if named is not None:
            C.user(named)  # refuses a name no collection could have, like every memory.* call
        return await stats.memory_stats(
            self.memory.store, None if named is None else [named], bucket=bucket
        )

    async def sessions(
        self, who: Address, *, limit: int, cursor: str | None, since: int | None
    ) -> tuple[str, SessionsPage]:
        """The namespace (which the request must name) and one page of its sessions."""
        ns = self.memory.required_namespace(who)
        page = await list_sessions(self.memory.store, ns, limit=limit, cursor=cursor, since=since)
        return ns, page

    async def forget_all(
        self, who: Address, *, include_sessions: bool, dry_run: bool
    ) -> ForgetOutcome:
        """Forget the whole namespace the request names (``forget`` module doc)."""
        ns = self.memory.required_namespace(who)
        out = await forget_namespace(
            self.memory, ns, include_sessions=include_sessions, dry_run=dry_run
        )
        await self.memory.store.scrub_after_forget()
        return out

    async def forget(self, who: Address, chosen: ForgetSelection) -> ItemsOutcome:
        """Forget chosen turns and records of the namespace, and a query's clear matches
        (``forget_items`` module doc)."""
        ns = self.memory.required_namespace(who)
        records = list(chosen.records)
        if chosen.query is not None:
            records += await self._query_records(ns, chosen.query, chosen.limit)
        out = await forget_items(
            self.memory,
            ns,
            message_ids=chosen.message_ids,
            records=records,
            dry_run=chosen.dry_run,
        )
        await self.memory.store.scrub_after_forget()
        return out

    async def _query_records(self, ns: str, query: str, limit: int) -> list[RecordRef]:
        """The records that clearly match ``query``: all of them, or a refusal when more
        than ``limit`` do, counted as forget counts them (a turn's copies: history,
        durable, guidance, being one memory)."""
        if not query.strip():
            raise MemoryInputError("query must not be blank")
        matched = await self.queries.matches(ns, query)
        found = await forget_items(self.memory, ns, records=matched, dry_run=True)
        if len(found.items) > limit:
            raise self.queries.too_many(query, len(found.items), limit)
        return matched
