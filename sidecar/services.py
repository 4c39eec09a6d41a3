"""The daemon's wiring: every service built here, in dependency order.

``App.start`` starts the components in the order they are provided and ``App.close``
closes them in reverse, so the order below is the shutdown order read backwards:

1. the engine hub (the store opens with the embedder's dimension and fingerprint);
2. the store;
3. the memory service (sessions: ingest, compaction, change notices);
4. the authored-document, dream and lifecycle-journal services (store only);
5. retrieval (``assemble`` / ``search``), which reads the memory and follows authored
   changes; it closes before the store so its pending access counts are flushed; then
   the namespace's memory (``memory.*``, ``sessions.list``, ``forget``), which asks
   retrieval for a ``forget`` query's matches;
6. the authored-folder watcher, when folders are configured (or were, to retire their
   documents); it stops first.

Kept apart from the server so tests and tools build an App with the same wiring.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sidecar.app import App
from sidecar.assembly.forget_query import clear_matches, too_many
from sidecar.assembly.selection import AssemblyConfig
from sidecar.assembly.service import DAEMON_ASSEMBLY, Retrieval
from sidecar.assembly.view_graph import GraphParams
from sidecar.engines import EngineHub
from sidecar.engines.embedding_spec import PROFILES
from sidecar.memory.authored.service import AuthoredService
from sidecar.memory.authored.watcher import STATE_FILE, AuthoredWatcher
from sidecar.memory.lifecycle.dreams import DreamService
from sidecar.memory.lifecycle.forget_items import RecordRef
from sidecar.memory.lifecycle.journal import LifecycleJournal
from sidecar.memory.lifecycle.namespace_memory import NamespaceMemory
from sidecar.memory.service import MemoryService
from sidecar.store.service import StoreService

__all__ = ["install_memory", "install_services"]


def install_services(app: App) -> None:
    """Build the daemon's services on ``app`` (started later by ``app.start``)."""
    settings = app.settings
    # Local asset profiles may live in ~/.clawdb/models/<profile> beside the data directory.
    hub = EngineHub.from_settings(
        settings.embedding,
        settings.summarizer,
        search_roots=[settings.data_path.parent / "models"],
    )
    app.provide(EngineHub, hub)
    store = StoreService(
        settings,
        hub=hub,
        index_threads=settings.store.index_threads,
        store_kwargs={"synchronous": settings.store.synchronous.upper()},
        on_fatal=app.fail,
    )
    app.provide(StoreService, store)
    install_memory(app, store, hub)


def daemon_assembly(hub: EngineHub | None) -> AssemblyConfig:
    """The daemon's assembly configuration, with the relevance floor and the speaker
    focus chosen for the embedder's profile when it has them (a cosine means something
    else for each model)."""
    embedder = hub.embedder if hub is not None else None
    profile = PROFILES.get(embedder.profile) if embedder is not None else None
    config = DAEMON_ASSEMBLY
    if profile is not None and profile.relevance_floor is not None:
        config = replace(config, relevance_floor=profile.relevance_floor)
    if profile is not None and profile.speaker_label_weight is not None:
        config = replace(config, speaker_label_weight=profile.speaker_label_weight)
    if profile is not None and profile.forget_bar is not None:
        weight = profile.forget_weight or 0.0
        config = replace(config, forget_bar=profile.forget_bar, forget_weight=weight)
    if profile is not None and profile.implicit_recall is False:
        config = replace(config, implicit=replace(config.implicit, enabled=False))
    return config


@dataclass(frozen=True, slots=True)
class ForgetQueries:
    """A ``forget`` query's clear matches, from retrieval (``assembly.forget_query``), for
    :class:`NamespaceMemory`, which sits in a layer below retrieval."""

    retrieval: Retrieval

    async def matches(self, namespace: str, query: str) -> list[RecordRef]:
        found = await clear_matches(self.retrieval, namespace, query)
        return [RecordRef(m.collection, m.id) for m in found]

    def too_many(self, query: str, found: int, limit: int) -> Exception:
        return too_many(query, found, limit)


def install_memory(app: App, store: StoreService, hub: EngineHub | None = None) -> None:
    """Build the services above the store (steps 3 to 6). Tests that stand a hash embedder
    in for the models wire their own store, then call this."""
    settings = app.settings
    memory = MemoryService(settings, store, hub)
    app.provide(MemoryService, memory)
    authored = AuthoredService(store)
    app.provide(AuthoredService, authored)
    app.provide(DreamService, DreamService(store))
    app.provide(LifecycleJournal, LifecycleJournal(store, settings.journal.max_entries))
    st = settings.store
    retrieval = Retrieval(
        memory,
        daemon_assembly(hub),
        ann_min_rows=st.assemble_ann_rows,
        graph=st.assemble_graph,
        graph_params=GraphParams(
            m=st.hnsw_m,
            ef_construction=st.hnsw_ef_construction,
            ef_search=st.hnsw_ef_search,
            threads=st.index_threads,
        ),
        max_bytes=settings.cache.max_bytes,
    )
    app.provide(Retrieval, retrieval)
    memory.neighbours = retrieval
    app.provide(NamespaceMemory, NamespaceMemory(memory, ForgetQueries(retrieval)))
    if settings.authored.roots or (settings.data_path / STATE_FILE).exists():
        watcher = AuthoredWatcher(
            settings.authored,
            settings.data_path,
            authored,
            poll_interval_s=settings.authored.poll_interval_ms / 1000.0,
        )
        app.provide(AuthoredWatcher, watcher)
