"""v1 memory methods of the reference daemon, wire-exact.

``insert_session_turn``, ``gating_scalar``, ``compact_session``, ``expand_summary``,
``query_raw_session``. Absent or ``null`` params take their zero value, as in the reference.
"""

from __future__ import annotations

from typing import Any

import msgspec

from protocol.base import MethodSchema, WireStruct
from protocol.v1_store import OkResult, ResultsResult


class InsertSessionTurnParams(WireStruct):
    session_id: str = ""
    id: str = ""
    text: str = ""
    metadata: dict[str, Any] | None = None


class GatingScalarParams(WireStruct):
    user_id: str = ""
    text: str = ""


class GatingSignalsResult(WireStruct):
    g: float
    t: float
    h: float
    r: float
    d: float
    input_freq: float
    mem_saturation: float
    p: float
    a: float
    dtech: float
    gconv: float
    gtech: float


class CompactSessionParams(WireStruct):
    session_id: str = ""
    force: bool = False
    target_size: int = 0
    continuity_min_turns: int | None = None
    continuity_tail_budget_tokens: int = 0
    continuity_prior_context_tokens: int = 0


class CompactSessionResult(WireStruct):
    did_compact: bool
    clusters_formed: int
    clusters_declined: int
    turns_removed: int
    mean_confidence: float
    summary_method: str | msgspec.UnsetType = msgspec.UNSET


class ExpandSummaryParams(WireStruct):
    session_id: str = ""
    summary_id: str = ""
    max_depth: int | None = None


class QueryRawSessionParams(WireStruct):
    session_id: str = ""
    text: str = ""
    k: int = 0
    exclude_ids: list[str] | None = None


METHODS: dict[str, MethodSchema] = {
    "insert_session_turn": MethodSchema(
        InsertSessionTurnParams,
        OkResult,
        "v1: store a session turn in session:<sid> and session_raw:<sid> (one transaction)",
    ),
    "gating_scalar": MethodSchema(
        GatingScalarParams,
        GatingSignalsResult,
        "v1: gating signals of a text against turns:<userId> and user:<userId> (read-only)",
    ),
    "compact_session": MethodSchema(
        CompactSessionParams,
        CompactSessionResult,
        "v1: summarize the session's older turns (incremental; nothing is deleted)",
    ),
    "expand_summary": MethodSchema(
        ExpandSummaryParams,
        ResultsResult,
        "v1: records a summary covers (depth-limited, chronological)",
    ),
    "query_raw_session": MethodSchema(
        QueryRawSessionParams, ResultsResult, "v1: top-k search of session_raw:<sid>"
    ),
}
