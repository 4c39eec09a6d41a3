"""Which namespace a request works in: the one place every verb resolves it.

A request names a namespace (``namespace``, else ``userId``), a session (``sessionId``),
both or neither. A session belongs to the namespace that created it
(:func:`sidecar.memory.core.scope.session_owner`): a request naming none works in it, a
request naming another is refused with :class:`SessionNamespaceError` (-32012), so a
session's tail and summaries are never read, extended or forgotten under a namespace
that did not write them.

Every entry point goes through here, behind the services and never from a handler:
v2 ``ingest`` (under the session's ingest lock, in ``sidecar.memory.ingest.sessions``);
``assemble``, ``search``, ``memory.*``, ``sessions.list``, ``forget`` and its items,
``compact`` and v1 ``insert_session_turn`` through ``MemoryService`` (``namespace_of``,
``session_namespace``, ``required_namespace``, ``v1_turn``, ``compact_known``), which
the retrieval service and ``NamespaceMemory`` call; the MCP server and the UI reach them
over the protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sidecar.memory.core import layout as C
from sidecar.memory.core.errors import MemoryInputError, SessionNamespaceError
from sidecar.memory.core.scope import session_owner
from sidecar.store.names import validate_name_part

if TYPE_CHECKING:
    from sidecar.store.aio import AsyncStore

NAMED_OR_SESSION = "namespace, userId or sessionId is required"


def named_namespace(namespace: str | None, user_id: str | None) -> str | None:
    """The namespace a request names: ``namespace``, else ``userId``, else none."""
    if namespace is not None and namespace.strip():
        return namespace
    if user_id is not None and user_id.strip():
        return user_id
    return None


def required_namespace(namespace: str | None, user_id: str | None, missing: str) -> str:
    """The namespace a request must name (``forget``, ``sessions.list``), validated as a
    name part; ``missing`` is the refusal when it names none."""
    named = named_namespace(namespace, user_id)
    if named is None:
        raise MemoryInputError(missing)
    return validate_name_part(named, "namespace")


def require_addressed(namespace: str | None, user_id: str | None, session_id: str | None) -> None:
    """Refuse a read that names neither a namespace nor a session."""
    if named_namespace(namespace, user_id) is None and not (session_id and session_id.strip()):
        raise MemoryInputError(NAMED_OR_SESSION)


async def stored_owner(store: AsyncStore, session_id: str) -> str | None:
    """The session's owner as stored (:func:`sidecar.memory.core.scope.session_owner`:
    its first v2 ingest's namespace, else its v1 writer's ``userId``, else its default
    namespace when v1 stored it without a user; None for a new session)."""
    return await store.call(session_owner, store.store, session_id)


def namespace_of_session(
    session_id: str, owner: str | None, namespace: str | None, user_id: str | None
) -> str:
    """The session's namespace for a request naming ``namespace``/``user_id``: the owner's
    (a new session's: the named one, else ``session:<sid>``); another name is refused."""
    named = named_namespace(namespace, user_id)
    if owner is None:
        return named or C.default_namespace(session_id)
    if named is None or named == owner:
        return owner
    raise SessionNamespaceError(
        f"session {session_id[:200]!r} belongs to another namespace than {named[:200]!r}: "
        "name the namespace it was created with (or none), or use a new session id"
    )


async def session_namespace(
    store: AsyncStore, session_id: str, namespace: str | None, user_id: str | None
) -> str:
    """:func:`namespace_of_session` with the owner read from the store."""
    owner = await stored_owner(store, session_id)
    return namespace_of_session(session_id, owner, namespace, user_id)


async def request_namespace(
    store: AsyncStore, session_id: str | None, namespace: str | None, user_id: str | None
) -> str:
    """The namespace a read request works in: the session's (:func:`session_namespace`)
    when it names a session, else the one it names (validated as a name part)."""
    if session_id and session_id.strip():
        return await session_namespace(store, session_id, namespace, user_id)
    return validate_name_part(named_namespace(namespace, user_id), "namespace")


async def reader_namespace(
    store: AsyncStore, session_id: str | None, namespace: str | None, user_id: str | None
) -> str:
    """:func:`request_namespace` for a read that must name a namespace or a session."""
    require_addressed(namespace, user_id, session_id)
    return await request_namespace(store, session_id, namespace, user_id)


async def refuse_another_owner(store: AsyncStore, session_id: str, user: object) -> None:
    """A v1 turn that names a user (the metadata's ``userId``, as the published plugin
    sends its namespace) goes only into a new session or one that user owns: -32012
    otherwise, as v2 ``ingest`` answers, so a v1 write never enters or claims another
    namespace's session. A turn naming nobody is the owner's, as a v2 request naming no
    namespace is."""
    if isinstance(user, str) and user.strip():
        await session_namespace(store, session_id, user, None)


def session_exists(store: AsyncStore, session_id: str) -> bool:
    """Whether anything was ever stored for the session (turns or state, v1 or v2)."""
    return bool(
        store.count(C.session_raw(session_id))
        or store.count(C.session(session_id))
        or store.count(C.session_state(session_id))
    )
