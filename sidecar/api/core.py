"""initialize, health, status, shutdown."""

from __future__ import annotations

from protocol.core import (
    PROTOCOL_VERSION,
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
)
from sidecar import SERVER_NAME, __version__
from sidecar.api.context import CallContext
from sidecar.api.registry import Registry
from sidecar.app import App


def health_of(app: App) -> HealthResult:
    """Healthy unless a required component failed. Models still loading are reported, not fatal."""
    states = app.component_states()
    failed = {name: s for name, s in states.items() if s.state == "failed"}
    if app.closing:
        return HealthResult(ok=False, message="shutting down", models=states)
    if failed:
        name, state = next(iter(failed.items()))
        return HealthResult(ok=False, message=f"{name} failed: {state.reason}", models=states)
    return HealthResult(ok=True, message="ok", models=states)


def register(registry: Registry) -> None:
    @registry.method("initialize")
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
                for name in registry.names()
                if app.settings.server.debug_methods or not name.startswith("debug.")
            ],
        )

    @registry.method("health")
    async def health(ctx: CallContext, params: Empty) -> HealthResult:
        return health_of(ctx.app)

    @registry.method("status")
    async def status(ctx: CallContext, params: Empty) -> StatusResult:
        app = ctx.app
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
            records=counts,
            models=states,
            methods={
                name: MethodStats(calls=c, errors=e, p50_ms=p50, p95_ms=p95)
                for name, (c, e, p50, p95) in app.stats.snapshot().items()
            },
        )

    @registry.method("shutdown")
    async def shutdown(ctx: CallContext, params: Empty) -> ShutdownResult:
        # Connections stop reading after their current request; this reply is still written.
        ctx.app.request_shutdown("shutdown request")
        return ShutdownResult(ok=True)
