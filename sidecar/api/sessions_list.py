"""v2 ``sessions.list``: which sessions a namespace has, most recently active first.

The logic lives in ``sidecar.memory.lifecycle.session_index``; this handler resolves the
namespace (named by ``namespace`` or ``userId``: a session id alone would name only
itself) and shapes the result.
"""

from __future__ import annotations

from protocol.sessions_list import SessionInfo, SessionsListParams, SessionsListResult
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.sessions import memory_service
from sidecar.errors import InvalidInput
from sidecar.memory.ingest.sessions import named_namespace, request_namespace
from sidecar.memory.lifecycle.session_index import list_sessions

methods = MethodTable()


@methods.method("sessions.list")
async def sessions_list(ctx: CallContext, params: SessionsListParams) -> SessionsListResult:
    if named_namespace(params.namespace, params.user_id) is None:
        raise InvalidInput("namespace or userId is required")
    svc = memory_service(ctx)
    ns = await request_namespace(svc.store, None, params.namespace, params.user_id)
    page = await list_sessions(
        svc.store, ns, limit=params.limit, cursor=params.cursor or None, since=params.since
    )
    return SessionsListResult(
        namespace=ns,
        sessions=[
            SessionInfo(
                session_id=s.session_id,
                turn_count=s.turn_count,
                first_ts=s.first_ts,
                last_ts=s.last_ts,
                summary_count=s.summary_count,
            )
            for s in page.sessions
        ],
        total=page.total,
        next_cursor=page.next_cursor,
    )


register = methods.register
