"""v2 ``forget``: a whole namespace, or chosen messages, records or query matches.

The logic lives in ``sidecar.memory.lifecycle`` (``forget`` for a namespace,
``forget_items`` for single things); a query is turned into the records that clearly match
it here (``sidecar.assembly.forget_query``: the host's ``search`` proposes, a strict bar
decides, and more clear matches than ``limit`` forget nothing).
"""

from __future__ import annotations

from protocol.sessions import ForgetParams, ForgetResult, ForgottenItem, MissingItem
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.sessions import memory_service
from sidecar.assembly.forget_query import clear_matches, too_many
from sidecar.assembly.service import Retrieval
from sidecar.errors import InvalidInput
from sidecar.memory.core.ownership import required_namespace
from sidecar.memory.lifecycle.forget import forget_namespace
from sidecar.memory.lifecycle.forget_items import RecordRef, forget_items

methods = MethodTable()


def _selects_items(params: ForgetParams) -> bool:
    return bool(params.message_ids or params.records or params.query is not None)


async def _query_records(ctx: CallContext, ns: str, query: str) -> list[RecordRef]:
    """The records that clearly match ``query`` (forget_query module doc)."""
    if not query.strip():
        raise InvalidInput("query must not be blank")
    matches = await clear_matches(ctx.app.service(Retrieval), ns, query)
    return [RecordRef(m.collection, m.id) for m in matches]


@methods.method("forget")
async def forget(ctx: CallContext, params: ForgetParams) -> ForgetResult:
    svc = memory_service(ctx)
    ns = required_namespace(params.namespace, params.user_id, "namespace or userId is required")
    if not _selects_items(params):
        whole = await forget_namespace(
            svc, ns, include_sessions=params.include_sessions, dry_run=params.dry_run
        )
        await svc.store.scrub_after_forget()
        return ForgetResult(deleted=whole.deleted, dry_run=params.dry_run)
    if params.include_sessions:
        raise InvalidInput("includeSessions applies only to forgetting a whole namespace")
    records = [RecordRef(r.collection, r.id) for r in params.records or []]
    message_ids = params.message_ids or []
    if params.query is not None:
        matched = await _query_records(ctx, ns, params.query)
        # All the clear matches or none (forget_query module doc): counted as forget
        # counts them, a turn's copies (history, durable, guidance) being one memory.
        found = await forget_items(svc, ns, records=matched, dry_run=True)
        if len(found.items) > params.limit:
            raise too_many(params.query, len(found.items), params.limit)
        records += matched
    out = await forget_items(
        svc, ns, message_ids=message_ids, records=records, dry_run=params.dry_run
    )
    await svc.store.scrub_after_forget()
    return ForgetResult(
        deleted=out.deleted if not params.dry_run else sum(i.copies for i in out.items),
        items=[
            ForgottenItem(
                collection=i.collection,
                id=i.id,
                text=i.text,
                session_id=i.session_id,
                copies=i.copies,
            )
            for i in out.items
        ],
        missing=[MissingItem(collection=m.collection, id=m.id) for m in out.missing],
        summaries_rebuilt=out.summaries_rebuilt,
        summaries_removed=out.summaries_removed,
        dry_run=params.dry_run,
    )


register = methods.register
