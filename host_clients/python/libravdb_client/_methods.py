"""Every typed RPC method, written once for ``Client`` and ``AsyncClient``.

Each method builds a :class:`~libravdb_client._rpc.Call` (wire method, params, result
type); :class:`~libravdb_client._rpc.rpc` makes it a blocking method of ``Client`` and a
coroutine of ``AsyncClient``. A new RPC is one method here (and a row in the README).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from libravdb_client._core import (
    CLIENT_NAME,
    CLIENT_VERSION,
    USE_CLIENT_DEFAULT,
    ProgressCallback,
    Timeout,
    ingest_messages,
    initialize_params,
)
from libravdb_client._rpc import Call, rpc
from protocol.assemble import (
    AssembleParams,
    AssembleResult,
    MemoryGetParams,
    MemoryGetResult,
    SearchFilters,
    SearchParams,
    SearchResult,
)
from protocol.authored import (
    AuthoredDeleteParams,
    AuthoredDeleteResult,
    AuthoredIngestParams,
    AuthoredIngestResult,
    AuthoredListParams,
    AuthoredListResult,
    DreamPromoteParams,
    DreamPromoteResult,
    LifecycleHintParams,
    LifecycleHintResult,
    LifecycleJournalParams,
    LifecycleJournalResult,
    SourceInfo,
)
from protocol.core import HealthResult, InitializeResult, ShutdownResult, StatusResult
from protocol.engines import EmbedParams, EmbedResult, SummarizeParams, SummarizeResult
from protocol.memory import (
    ListScope,
    MemoryListParams,
    MemoryListResult,
    MemoryUpdateParams,
    MemoryUpdateResult,
)
from protocol.memory_stats import MemoryStatsParams, MemoryStatsResult, StatsBucket
from protocol.sessions import (
    CompactParams,
    CompactResult,
    ExpandParams,
    ExpandResult,
    ForgetParams,
    ForgetResult,
    IngestMessage,
    IngestResult,
    RecordRef,
)
from protocol.sessions_list import SessionsListParams, SessionsListResult


class RpcMethods:
    """The typed methods of both clients (params as keywords, results as protocol Structs)."""

    # a daemon with server.auth_token_file wants initialize{authToken} first
    auth_token: str | None

    # -- the handshake and the daemon ------------------------------------------------
    @rpc
    def initialize(
        self,
        *,
        client_name: str = CLIENT_NAME,
        client_version: str = CLIENT_VERSION,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> Call[InitializeResult]:
        params = initialize_params(client_name, client_version, self.auth_token)
        return Call("initialize", params, InitializeResult, timeout)

    @rpc
    def health(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> Call[HealthResult]:
        return Call("health", None, HealthResult, timeout)

    @rpc
    def status(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> Call[StatusResult]:
        return Call("status", None, StatusResult, timeout)

    @rpc
    def shutdown(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> Call[ShutdownResult]:
        """Ask the daemon to drain and exit (every client of a socket daemon loses it)."""
        return Call("shutdown", None, ShutdownResult, timeout)

    # -- v2 methods, typed (params as keywords, results as protocol Structs) ----------
    @rpc
    def ingest(
        self,
        session_id: str,
        messages: Sequence[IngestMessage | Mapping[str, Any]],
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        advancement_key: str | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        on_progress: ProgressCallback | None = None,
    ) -> Call[IngestResult]:
        """Store a batch of messages of one session (``{role, content, id?, ts?}``).

        With ``advancement_key`` the batch is an accepted-turn commit: written once, and
        a retry with the same key answers ``duplicate=True`` without writing."""
        params: dict[str, Any] = {"sessionId": session_id, "messages": ingest_messages(messages)}
        if namespace is not None:
            params["namespace"] = namespace
        if user_id is not None:
            params["userId"] = user_id
        if advancement_key is not None:
            params["advancementKey"] = advancement_key
        return Call("ingest", params, IngestResult, timeout, on_progress)

    @rpc
    def assemble(  # noqa: PLR0913 - keyword-only, one per wire field
        self,
        session_id: str,
        *,
        prompt: str | None = None,
        token_budget: float,
        messages: Sequence[Mapping[str, Any]] | None = None,
        namespace: str | None = None,
        user_id: str | None = None,
        memory_budget_fraction: float = 0.25,
        tail_placement: Literal["messages", "addition"] | None = None,
        window_messages: bool = False,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> Call[AssembleResult]:
        """The memory for one model call under ``token_budget`` (docs/protocol.md)."""
        params = AssembleParams(
            session_id=session_id,
            token_budget=token_budget,
            namespace=namespace,
            user_id=user_id,
            messages=None if messages is None else [dict(m) for m in messages],
            prompt=prompt,
            memory_budget_fraction=memory_budget_fraction,
            tail_placement=tail_placement,
            window_messages=window_messages,
        )
        return Call("assemble", params, AssembleResult, timeout)

    @rpc
    def search(
        self,
        query: str,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        scopes: Sequence[str] | None = None,
        k: int = 8,
        filters: SearchFilters | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> Call[SearchResult]:
        params = SearchParams(
            query=query,
            namespace=namespace,
            user_id=user_id,
            session_id=session_id,
            scopes=None if scopes is None else list(scopes),
            k=k,
            filters=filters,
        )
        return Call("search", params, SearchResult, timeout)

    @rpc
    def memory_get(
        self,
        collection: str,
        id: str,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> Call[MemoryGetResult]:
        """One record by the ``collection`` and ``id`` of a search hit, within the namespace
        (``NotFound`` for a record of another namespace, as for a missing one)."""
        params = MemoryGetParams(
            collection=collection,
            id=id,
            namespace=namespace,
            user_id=user_id,
            session_id=session_id,
        )
        return Call("memory.get", params, MemoryGetResult, timeout)

    @rpc
    def memory_list(  # noqa: PLR0913 - keyword-only options of one RPC
        self,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        scope: ListScope = "durable",
        since: int | None = None,
        until: int | None = None,
        limit: int = 50,
        cursor: str | None = None,
        include_superseded: bool = False,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> Call[MemoryListResult]:
        """One page of the namespace's records of ``scope``, newest first; pass the
        result's ``next_cursor`` as ``cursor`` for the next page ("" = the last)."""
        params = MemoryListParams(
            namespace=namespace,
            user_id=user_id,
            session_id=session_id,
            scope=scope,
            since=since,
            until=until,
            limit=limit,
            cursor=cursor,
            include_superseded=include_superseded,
        )
        return Call("memory.list", params, MemoryListResult, timeout)

    @rpc
    def memory_update(
        self,
        collection: str,
        id: str,
        text: str,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> Call[MemoryUpdateResult]:
        """Replace a durable fact's text (or correct a turn of ``turns:<ns>``); the old
        text is kept as a superseded version (``previous``)."""
        params = MemoryUpdateParams(
            collection=collection, id=id, text=text, namespace=namespace, user_id=user_id
        )
        return Call("memory.update", params, MemoryUpdateResult, timeout)

    @rpc
    def sessions_list(
        self,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
        since: int | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> Call[SessionsListResult]:
        """One page of the namespace's sessions, most recently active first; pass the
        result's ``next_cursor`` as ``cursor`` for the next page ("" = the last)."""
        params = SessionsListParams(
            namespace=namespace, user_id=user_id, limit=limit, cursor=cursor, since=since
        )
        return Call("sessions.list", params, SessionsListResult, timeout)

    @rpc
    def memory_stats(
        self,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        bucket: StatsBucket = "month",
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> Call[MemoryStatsResult]:
        """What the memory holds per namespace (every namespace without one), the
        authored rules by tier and the store's size on disk."""
        params = MemoryStatsParams(namespace=namespace, user_id=user_id, bucket=bucket)
        return Call("memory.stats", params, MemoryStatsResult, timeout)

    @rpc
    def compact(
        self,
        session_id: str,
        *,
        force: bool = False,
        target_size: int | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        on_progress: ProgressCallback | None = None,
    ) -> Call[CompactResult]:
        params = CompactParams(session_id=session_id, force=force, target_size=target_size)
        return Call("compact", params, CompactResult, timeout, on_progress)

    @rpc
    def expand(
        self,
        session_id: str,
        summary_id: str,
        *,
        max_depth: int | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> Call[ExpandResult]:
        params = ExpandParams(session_id=session_id, summary_id=summary_id, max_depth=max_depth)
        return Call("expand", params, ExpandResult, timeout)

    @rpc
    def forget(  # noqa: PLR0913 - keyword-only options of one RPC
        self,
        *,
        namespace: str | None = None,
        user_id: str | None = None,
        include_sessions: bool = False,
        message_ids: Sequence[str] | None = None,
        records: Sequence[tuple[str, str]] | None = None,
        query: str | None = None,
        limit: int = 1,
        dry_run: bool = False,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> Call[ForgetResult]:
        """The whole namespace, or just ``message_ids``, ``records`` ((collection, id)
        pairs) or the memories that clearly match ``query`` (none when nothing does,
        and none, refused, when more than ``limit`` do); ``dry_run`` lists what would go
        and changes nothing."""
        params = ForgetParams(
            namespace=namespace,
            user_id=user_id,
            include_sessions=include_sessions,
            message_ids=list(message_ids) if message_ids is not None else None,
            records=[RecordRef(collection=c, id=i) for c, i in records]
            if records is not None
            else None,
            query=query,
            limit=limit,
            dry_run=dry_run,
        )
        return Call("forget", params, ForgetResult, timeout)

    @rpc
    def embed(
        self,
        texts: Sequence[str],
        *,
        kind: Literal["query", "document"] = "document",
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> Call[EmbedResult]:
        params = EmbedParams(texts=list(texts), kind=kind)
        return Call("embed", params, EmbedResult, timeout)

    @rpc
    def summarize(
        self,
        texts: Sequence[str],
        *,
        max_tokens: int | None = None,
        method: Literal["auto", "seq2seq", "extractive"] = "auto",
        density: float | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> Call[SummarizeResult]:
        params = SummarizeParams(
            texts=list(texts), max_tokens=max_tokens, method=method, density=density
        )
        return Call("summarize", params, SummarizeResult, timeout)

    @rpc
    def authored_ingest(
        self,
        source_doc: str,
        text: str,
        *,
        core: bool | None = None,
        source: SourceInfo | None = None,
        dry_run: bool = False,
        timeout: Timeout = USE_CLIENT_DEFAULT,
        on_progress: ProgressCallback | None = None,
    ) -> Call[AuthoredIngestResult]:
        params = AuthoredIngestParams(
            source_doc=source_doc, text=text, core=core, source=source, dry_run=dry_run
        )
        return Call("authored.ingest", params, AuthoredIngestResult, timeout, on_progress)

    @rpc
    def authored_delete(
        self, source_doc: str, *, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> Call[AuthoredDeleteResult]:
        params = AuthoredDeleteParams(source_doc=source_doc)
        return Call("authored.delete", params, AuthoredDeleteResult, timeout)

    @rpc
    def authored_list(
        self, *, source_doc: str = "", timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> Call[AuthoredListResult]:
        params = AuthoredListParams(source_doc=source_doc)
        return Call("authored.list", params, AuthoredListResult, timeout)

    @rpc
    def dream_promote(
        self, params: DreamPromoteParams, *, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> Call[DreamPromoteResult]:
        """``dream.promote``; its many optional fields are set on the params Struct."""
        return Call("dream.promote", params, DreamPromoteResult, timeout)

    @rpc
    def lifecycle_hint(
        self, params: LifecycleHintParams, *, timeout: Timeout = USE_CLIENT_DEFAULT
    ) -> Call[LifecycleHintResult]:
        """``lifecycle.hint``; its many optional fields are set on the params Struct."""
        return Call("lifecycle.hint", params, LifecycleHintResult, timeout)

    @rpc
    def lifecycle_journal(
        self,
        *,
        session_id: str = "",
        hook: str = "",
        limit: int = 50,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> Call[LifecycleJournalResult]:
        params = LifecycleJournalParams(session_id=session_id, hook=hook, limit=limit)
        return Call("lifecycle.journal", params, LifecycleJournalResult, timeout)
