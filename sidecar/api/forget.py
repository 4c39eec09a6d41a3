"""v2 ``forget``: a whole namespace, or chosen messages, records or query matches.

The logic lives in ``sidecar.memory.lifecycle`` behind :class:`NamespaceMemory`
(``forget`` for a namespace, ``forget_items`` for single things; a query becomes the
records that clearly match it through ``sidecar.assembly.forget_query``: the host's
``search`` proposes, a strict bar decides, and more clear matches than ``limit`` forget
nothing).
"""

from __future__ import annotations

from protocol.sessions import ForgetParams, ForgetResult, ForgottenItem, MissingItem
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.wire import copy_fields
from sidecar.errors import InvalidInput
from sidecar.memory.lifecycle.forget_items import RecordRef
from sidecar.memory.lifecycle.namespace_memory import ForgetSelection, NamespaceMemory
from sidecar.memory.service import Address

methods = MethodTable()


def _selects_items(params: ForgetParams) -> bool:
    return bool(params.message_ids or params.records or params.query is not None)


@methods.method("forget")
async def forget(ctx: CallContext, params: ForgetParams) -> ForgetResult:
    memory = ctx.app.service(NamespaceMemory)
    who = Address(params.namespace, params.user_id)
    if not _selects_items(params):
        whole = await memory.forget_all(
            who, include_sessions=params.include_sessions, dry_run=params.dry_run
        )
        return ForgetResult(deleted=whole.deleted, dry_run=params.dry_run)
    if params.include_sessions:
        raise InvalidInput("includeSessions applies only to forgetting a whole namespace")
    out = await memory.forget(
        who,
        ForgetSelection(
            message_ids=params.message_ids or [],
            records=[RecordRef(r.collection, r.id) for r in params.records or []],
            query=params.query,
            limit=params.limit,
            dry_run=params.dry_run,
        ),
    )
    return ForgetResult(
        deleted=out.deleted if not params.dry_run else sum(i.copies for i in out.items),
        items=[copy_fields(i, ForgottenItem) for i in out.items],
        missing=[copy_fields(m, MissingItem) for m in out.missing],
        summaries_rebuilt=out.summaries_rebuilt,
        summaries_removed=out.summaries_removed,
        dry_run=params.dry_run,
    )


register = methods.register
