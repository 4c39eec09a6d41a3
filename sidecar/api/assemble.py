"""v2 methods ``assemble`` and ``search``.

The handlers check what the types cannot say and delegate to
:class:`sidecar.assembly.service.Retrieval`, which resolves the namespace the request
works in (a session of another namespace: -32012) as every verb's service does.
"""

from __future__ import annotations

import math

from protocol.assemble import (
    AssembleParams,
    AssembleResult,
    SearchParams,
    SearchResult,
)
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.wire import assemble_result, search_hit_out
from sidecar.assembly.search import SEARCH_SCOPES, SearchRequest
from sidecar.assembly.service import Retrieval
from sidecar.assembly.window import window_start
from sidecar.errors import InvalidInput
from sidecar.memory.core.tokens import message_text
from sidecar.memory.service import Address


def _query_of(params: AssembleParams) -> str:
    if params.prompt is not None and params.prompt.strip():
        return params.prompt
    if params.messages:
        try:
            return message_text(params.messages[-1].get("content"))
        except TypeError:
            return ""
    return ""


methods = MethodTable()


@methods.method("assemble")
async def assemble(ctx: CallContext, params: AssembleParams) -> AssembleResult:
    if not params.session_id.strip():
        raise InvalidInput("sessionId is required")
    if not math.isfinite(params.token_budget):  # the schema bounds it below only
        raise InvalidInput("tokenBudget must be a finite number")
    frac = params.memory_budget_fraction
    messages = params.messages
    for i, m in enumerate(messages or ()):
        if not isinstance(m.get("role"), str):
            raise InvalidInput(f"messages[{i}].role must be a string")
        try:
            message_text(m.get("content"))
        except TypeError as exc:
            raise InvalidInput(f"messages[{i}].content: {exc}") from None
        ts = m.get("ts")
        if ts is not None and (isinstance(ts, bool) or not isinstance(ts, int)):
            raise InvalidInput(f"messages[{i}].ts must be epoch milliseconds")
    if params.tail_placement == "messages" and messages is None:
        raise InvalidInput('tailPlacement "messages" needs the host\'s messages')
    start = 0
    if params.window_messages:
        if messages is None:
            raise InvalidInput("windowMessages needs the host's messages")
        if params.tail_placement == "addition":
            raise InvalidInput(
                'windowMessages keeps the tail in the messages: drop tailPlacement "addition"'
            )
        start = window_start(messages, params.token_budget, frac)
        messages = messages[start:]
    plan, timings = await ctx.app.service(Retrieval).assemble(
        who=Address(params.namespace, params.user_id, params.session_id),
        query=_query_of(params),
        token_budget=params.token_budget,
        memory_fraction=frac,
        messages=messages,
        tail_in_messages=None
        if params.tail_placement is None
        else params.tail_placement == "messages",
        render=params.render,
        explain=params.explain,
    )
    return assemble_result(plan, timings, start, explain=params.explain, item_text=params.item_text)


@methods.method("search")
async def search(ctx: CallContext, params: SearchParams) -> SearchResult:
    if not params.query.strip():
        raise InvalidInput("query is required")
    scopes = params.scopes
    if scopes is not None:
        bad = [s for s in scopes if s not in (*SEARCH_SCOPES, "session")]
        if bad:
            raise InvalidInput(
                f"unknown scope(s) {bad}; known: {', '.join((*SEARCH_SCOPES, 'session'))}"
            )
    f = params.filters
    if f is not None and f.since is not None and f.until is not None and f.since > f.until:
        raise InvalidInput("filters.since must be <= filters.until")
    hits = await ctx.app.service(Retrieval).search_as(
        Address(params.namespace, params.user_id, params.session_id),
        lambda ns: SearchRequest(
            query=params.query,
            namespace=ns,
            session_id=params.session_id,
            scopes=scopes,
            k=params.k,
            role=f.role if f else None,
            since=f.since if f else None,
            until=f.until if f else None,
            kind=f.kind if f else None,
        ),
    )
    return SearchResult(hits=[search_hit_out(h) for h in hits])


register = methods.register
