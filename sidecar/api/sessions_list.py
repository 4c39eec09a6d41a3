"""v2 ``sessions.list``: which sessions a namespace has, most recently active first.

The logic lives in ``sidecar.memory.lifecycle.session_index``, behind
:class:`NamespaceMemory` (which requires the namespace named by ``namespace`` or
``userId``: a session id alone would name only itself); this handler shapes the result.
"""

from __future__ import annotations

from protocol.sessions_list import SessionInfo, SessionsListParams, SessionsListResult
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.wire import copy_fields
from sidecar.memory.lifecycle.namespace_memory import NamespaceMemory
from sidecar.memory.service import Address

methods = MethodTable()


@methods.method("sessions.list")
async def sessions_list(ctx: CallContext, params: SessionsListParams) -> SessionsListResult:
    ns, page = await ctx.app.service(NamespaceMemory).sessions(
        Address(params.namespace, params.user_id),
        limit=params.limit,
        cursor=params.cursor or None,
        since=params.since,
    )
    return SessionsListResult(
        namespace=ns,
        sessions=[copy_fields(s, SessionInfo) for s in page.items],
        total=page.total,
        next_cursor=page.next_cursor,
    )


register = methods.register
