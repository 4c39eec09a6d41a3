"""Lifecycle methods: initialize, health, status, shutdown."""

from __future__ import annotations

from typing import Any

import msgspec

from protocol.base import MethodSchema, Params, WireStruct

PROTOCOL_VERSION = "2.0"


class ClientInfo(Params):
    name: str = ""
    version: str = ""


class InitializeParams(Params):
    """``authToken``: the daemon's shared secret, required as the first request of every
    socket connection when the daemon is configured with ``server.auth_token_file``."""

    client_info: ClientInfo | None = None
    protocol_version: str | None = None
    auth_token: str | None = None


class ServerInfo(WireStruct):
    name: str
    version: str


class Capabilities(WireStruct):
    transports: list[str]
    max_frame_bytes: int
    progress: bool = True
    v1_compatible: bool = True


class InitializeResult(WireStruct):
    protocol_version: str
    server_info: ServerInfo
    capabilities: Capabilities
    methods: list[str]


class Seq2SeqState(WireStruct):
    """The summarizer's seq2seq model: ``disabled`` (no assets: the extractive summarizer
    serves), ``unloaded``, ``loading``, ``ready`` or ``failed``."""

    state: str
    reason: str = ""
    profile: str = ""


class ComponentState(WireStruct):
    """Readiness of one model or service: unloaded, loading, ready, failed or disabled;
    the store ``unavailable`` while its PostgreSQL server does not answer.

    ``compute`` (the embedder): how its products run, ``{matmul: "int8", matmuls,
    blockSize, probeCosine}`` or ``{matmul: "float32", reason}`` (docs/engines.md).
    ``seq2seq`` (the summarizer): its abstractive model's own state.
    ``pageCheck`` (the SQLite store): its database's page check at open, ``{state:
    running|ok|failed|cancelled, mode: sync|background, seconds}`` (docs/store.md,
    "Durability promise").
    """

    state: str
    reason: str = ""
    profile: str = ""
    fingerprint: str = ""
    dims: int = 0
    compute: dict[str, Any] | None = None
    seq2seq: Seq2SeqState | None = None
    page_check: dict[str, Any] | None = None


class HealthResult(WireStruct):
    # `ok` and `message` are the reference daemon's shape; `models` is ours.
    ok: bool
    message: str
    models: dict[str, ComponentState] = msgspec.field(default_factory=dict)


class MethodStats(WireStruct):
    calls: int
    errors: int
    p50_ms: float
    p95_ms: float


class AutoCompactionActivity(WireStruct):
    running: int  # background compactions under way now
    runs: int  # finished since start
    failures: int
    last_run_at: int | None = None  # epoch ms of the last finished run
    last_session: str = ""


class WatcherActivity(WireStruct):
    roots: list[str]
    scanning: bool  # a poll is under way now
    scans: int
    ingested: int
    deleted: int
    retired: int  # documents of roots no longer configured, deleted at start
    errors: int
    last_scan_at: int | None = None  # epoch ms
    last_scan_ms: float = 0.0
    error: str = ""


class BackgroundActivity(WireStruct):
    """What the daemon does on its own, beside the requests it serves."""

    auto_compaction: AutoCompactionActivity | None = None
    watcher: WatcherActivity | None = None  # present when a markdown watcher runs


class CacheActivity(WireStruct):
    """The retrieval caches: the per-collection views ``assemble`` and ``search`` read
    (docs/store.md, "Views"), within ``cache.max_bytes``."""

    bytes: int  # the views' estimated size
    max_bytes: int  # the budget (0: unbounded)
    views: int  # collections held
    hits: int  # a view found loaded (unchanged or brought up to date incrementally)
    loads: int  # collections read in full (first use, after an eviction or a removal)
    load_ms: float  # the time those reads took, in total
    evictions: int  # views dropped to stay within the budget


class StatusResult(WireStruct):
    # Reference fields.
    ok: bool
    message: str
    turn_count: int = 0
    memory_count: int = 0
    lifecycle_hint_count: int = 0
    gating_threshold: float = 0.0
    abstractive_ready: bool = False
    embedding_profile: str = "unknown"
    # Ours.
    version: str = ""
    pid: int = 0
    uptime_s: float = 0.0
    data_dir: str = ""
    endpoint: str = ""
    connections: int = 0
    # requests executing now on every connection, this status call not counted
    inflight: int = 0
    records: dict[str, int] = msgspec.field(default_factory=dict)
    models: dict[str, ComponentState] = msgspec.field(default_factory=dict)
    methods: dict[str, MethodStats] = msgspec.field(default_factory=dict)
    background: BackgroundActivity = msgspec.field(default_factory=BackgroundActivity)
    cache: CacheActivity | None = None


class ShutdownResult(WireStruct):
    ok: bool


class Empty(WireStruct):
    """Params of methods that take none (any params sent are ignored)."""


METHODS: dict[str, MethodSchema] = {
    "initialize": MethodSchema(
        InitializeParams, InitializeResult, "Handshake: protocol version, server, methods"
    ),
    "health": MethodSchema(Empty, HealthResult, "Liveness and model readiness"),
    "status": MethodSchema(Empty, StatusResult, "Counts, model states and per-method latency"),
    "shutdown": MethodSchema(Empty, ShutdownResult, "Drain in-flight requests and exit 0"),
}
