"""The streamable HTTP session table, bounded.

Every ``initialize`` opens a session, and the SDK keeps it until the client deletes it or
it has been idle for 30 minutes; a client that never says goodbye (a script, a host that
restarts its connection) grows the server for as long as it runs (3,000 ``initialize``
calls: 96 to 212 MB of RSS, kept). Here a session idle for ``mcp.http_session_idle_s``
(300 s) is closed, and past ``mcp.http_max_sessions`` (32) the least recently used session
with no request in flight is closed to admit the new one. A session with a request in
flight (an open event stream included) is never closed for another; when every session is
busy, a new one is refused with 503, as the SDK does at its cap.

A closed session's id answers 404, after which a client starts a new session (the MCP
specification requires it to). This subclasses the SDK's manager: the session table and its
admission are not public, so the hooks used here (``_admit_session``,
``_handle_stateful_request``, ``_discard_session``, ``_server_instances``) are tied to
``mcp`` 2.x (pinned below 3) and exercised by tests/mcp_face/test_http_sessions.py.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import structlog
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

log = structlog.get_logger("libravdb.mcp")


class BoundedSessionManager(StreamableHTTPSessionManager):
    def __init__(
        self,
        app: Server[Any],
        *,
        security: TransportSecuritySettings,
        max_sessions: int,
        idle_timeout_s: float,
    ) -> None:
        super().__init__(
            app,
            security_settings=security,
            session_idle_timeout=idle_timeout_s,
            max_sessions=max_sessions,
        )
        self.limit = max_sessions
        # Session id -> requests in flight, least recently used first.
        self._use: OrderedDict[str, int] = OrderedDict()
        self._evicted: set[str] = set()

    @property
    def sessions(self) -> int:
        """Sessions held now."""
        return len(self._server_instances)

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        header = MCP_SESSION_ID_HEADER.encode("ascii")
        sid = next((v.decode("latin-1") for k, v in scope["headers"] if k == header), None)
        if sid is None or sid not in self._use:
            await super()._handle_stateful_request(scope, receive, send)
            return
        self._use[sid] += 1
        self._use.move_to_end(sid)
        try:
            await super()._handle_stateful_request(scope, receive, send)
        finally:
            if sid in self._use:
                self._use[sid] -= 1

    def _admit_session(
        self, requestor: AuthorizationContext | None
    ) -> StreamableHTTPServerTransport | None:
        if self.sessions >= self.limit:
            self._evict_one()
        transport = super()._admit_session(requestor)
        if transport is None:
            log.warning("mcp_http_session_refused", sessions=self.sessions, reason="all busy")
            return None
        assert transport.mcp_session_id is not None
        self._use[transport.mcp_session_id] = 0
        log.debug("mcp_http_session_opened", sessions=self.sessions)
        return transport

    def _evict_one(self) -> None:
        """Close the least recently used session that has no request in flight."""
        for sid, in_flight in self._use.items():
            transport = self._server_instances.get(sid)
            # No idle scope yet: the session is still being opened by its first request.
            if in_flight or transport is None or transport.idle_scope is None:
                continue
            # Forgotten now, so the new session fits and the old id answers 404 at once;
            # cancelling its idle scope ends its server task the way an idle timeout does,
            # and that task discards (terminates) it.
            del self._server_instances[sid]
            self._session_owners.pop(sid, None)
            del self._use[sid]
            self._evicted.add(sid)
            transport.idle_scope.cancel()
            log.info("mcp_http_session_closed", reason="evicted", sessions=self.sessions)
            return

    async def _discard_session(
        self, session_id: str, transport: StreamableHTTPServerTransport
    ) -> None:
        held = session_id in self._server_instances
        await super()._discard_session(session_id, transport)
        self._use.pop(session_id, None)
        if session_id in self._evicted:
            self._evicted.discard(session_id)  # logged when it was evicted
        elif held:
            idle = transport.idle_scope is not None and transport.idle_scope.cancelled_caught
            reason = "idle" if idle else "closed"
            log.debug("mcp_http_session_closed", reason=reason, sessions=self.sessions)
