"""initialize, health, status, shutdown."""

from __future__ import annotations

import msgspec

from protocol.core import (
    PROTOCOL_VERSION,
    AutoCompactionActivity,
    BackgroundActivity,
    CacheActivity,
    Capabilities,
    ComponentState,
    Empty,
    HealthResult,
    InitializeParams,
    InitializeResult,
    MethodStats,
    ServerInfo,
    ShutdownResult,
    StatusResult,
    WatcherActivity,
)
from sidecar import SERVER_NAME, __version__
from sidecar.api.context import CallContext
from sidecar.api.registry import MethodTable
from sidecar.api.wire import MS_DIGITS, copy_fields
from sidecar.app import App
from sidecar.assembly.service import Retrieval
from sidecar.memory.authored.watcher import AuthoredWatcher
from sidecar.memory.service import MemoryService


def background_of(app: App) -> BackgroundActivity:
    """Auto-compaction and the markdown watcher: what runs without a request."""
    out = BackgroundActivity()
    memory = app.maybe_service(MemoryService)
    if memory is not None:
        out.auto_compaction = AutoCompactionActivity(
            running=memory.auto_running,
            runs=memory.auto_runs,
            failures=memory.auto_failures,
            last_run_at=memory.auto_last_at,
            last_session=memory.auto_last_session,
        )
    watcher = app.maybe_service(AuthoredWatcher)
    if watcher is not None:
        st = watcher.stats
        out.watcher = WatcherActivity(
            roots=[f"{r.kind}:{r.path}" for r in watcher.roots],
            scanning=watcher.scanning,
            scans=st.scans,
            ingested=st.ingested,
            deleted=st.deleted,
            retired=st.retired,
            errors=st.errors,
            last_scan_at=st.last_scan_at,
            last_scan_ms=round(st.last_scan_ms, 3),
            error=watcher.error,
        )
    return out


def health_of(app: App) -> HealthResult:
    """Healthy unless a required component failed or its server is unavailable (the store's
    PostgreSQL, probed first by the handlers). Models still loading are reported, not
    fatal; a component working in a lesser mode (another embedding profile than configured,
    summaries without the seq2seq model) keeps health ok and the message says so."""
    states = app.component_states()
    failed = {name: s for name, s in states.items() if s.state == "failed"}
    if app.closing:
        return HealthResult(ok=False, message="shutting down", models=states)
    if failed:
        name, state = next(iter(failed.items()))
        return HealthResult(ok=False, message=f"{name} failed: {state.reason}", models=states)
    away = {name: s for name, s in states.items() if s.state == "unavailable"}
    if away:  # a store whose server stopped answering: writes fail with -32005 meanwhile
        name, state = next(iter(away.items()))
        return HealthResult(ok=False, message=f"{name} unavailable: {state.reason}", models=states)
    degraded = [f"{name}: {s.reason}" for name, s in states.items() if s.state == "degraded"]
    if degraded:
        return HealthResult(ok=True, message="degraded: " + "; ".join(degraded), models=states)
    return HealthResult(ok=True, message="ok", models=states)


methods = MethodTable()


@methods.method("initialize")
async def initialize(ctx: CallContext, params: InitializeParams) -> InitializeResult:
    app = ctx.app
    return InitializeResult(
        protocol_version=PROTOCOL_VERSION,
        server_info=ServerInfo(name=SERVER_NAME, version=__version__),
        capabilities=Capabilities(
            transports=app.transports,
            max_frame_bytes=app.settings.server.max_frame_bytes,
        ),
        methods=[
            name
            for name in ctx.method_names
            if app.settings.server.debug_methods or not name.startswith("debug.")
        ],
    )


@methods.method("health")
async def health(ctx: CallContext, params: Empty) -> HealthResult:
    await ctx.app.probe()
    return health_of(ctx.app)


@methods.method("status")
async def status(ctx: CallContext, params: Empty) -> StatusResult:
    app = ctx.app
    await app.probe()
    base = health_of(app)
    counts = await app.record_counts()
    states: dict[str, ComponentState] = base.models
    embedder = states.get("embedder")
    summarizer = states.get("summarizer")
    return StatusResult(
        ok=base.ok,
        message=base.message,
        turn_count=counts.get("turns", 0),
        memory_count=counts.get("memories", 0),
        lifecycle_hint_count=counts.get("lifecycleHints", 0),
        gating_threshold=app.settings.gating.threshold,
        abstractive_ready=bool(
            summarizer and summarizer.state == "ready" and summarizer.profile != "extractive"
        ),
        embedding_profile=(embedder.profile if embedder and embedder.profile else "unknown"),
        version=__version__,
        pid=app.pid,
        uptime_s=round(app.uptime_s(), 3),
        data_dir=str(app.settings.data_path),
        endpoint=app.endpoint,
        connections=app.open_connections,
        inflight=max(0, app.inflight_requests - 1),
        records=counts,
        models=states,
        methods={
            name: MethodStats(calls=c, errors=e, p50_ms=p50, p95_ms=p95)
            for name, (c, e, p50, p95) in app.stats.snapshot().items()
        },
        background=background_of(app),
        cache=cache_of(app),
    )


def cache_of(app: App) -> CacheActivity | None:
    """The retrieval caches' figures (view_budget.py), None without retrieval."""
    retrieval = app.maybe_service(Retrieval)
    if retrieval is None:
        return None
    f = retrieval.figures
    return msgspec.structs.replace(
        copy_fields(f, CacheActivity), load_ms=round(f.load_ms, MS_DIGITS)
    )


@methods.method("shutdown")
async def shutdown(ctx: CallContext, params: Empty) -> ShutdownResult:
    # Connections stop reading after their current request; this reply is still written.
    ctx.app.request_shutdown("shutdown request")
    return ShutdownResult(ok=True)


register = methods.register
