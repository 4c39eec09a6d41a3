"""Which services the daemon runs: the model engines, then the store.

Kept apart from the server so tests and tools can build an App with the same wiring.
Order matters: the store opens with the embedder's dimension and fingerprint, so the
engine hub is provided (and started) first, and closed last.
"""

from __future__ import annotations

from sidecar.app import App, StartupError

__all__ = ["StartupError", "install_services"]


def install_services(app: App) -> None:
    """Register the daemon's services on ``app`` (started later by ``app.start``)."""
    from sidecar.engines import EngineHub
    from sidecar.store.service import StoreService

    settings = app.settings
    # Local asset profiles may live in ~/.clawdb/models/<profile> beside the data directory.
    hub = EngineHub.from_settings(
        settings.embedding,
        settings.summarizer,
        search_roots=[settings.data_path.parent / "models"],
    )
    app.provide(EngineHub, hub)
    app.provide(
        StoreService,
        StoreService(
            settings,
            hub=hub,
            index_threads=settings.store.index_threads,
            store_kwargs={"synchronous": settings.store.synchronous.upper()},
        ),
    )
    from sidecar.memory.service import MemoryService  # sessions: ingest/compact/forget

    app.provide(MemoryService, MemoryService(settings, app.service(StoreService), hub))
    # the daemon-owned markdown watcher (docs/authored.md); also without roots when an
    # earlier configuration had some, to retire their documents
    from sidecar.memory.watcher import STATE_FILE

    if settings.authored.roots or (settings.data_path / STATE_FILE).exists():
        from sidecar.memory.watcher import AuthoredWatcher, watcher_for_app

        app.provide(AuthoredWatcher, watcher_for_app(app))
