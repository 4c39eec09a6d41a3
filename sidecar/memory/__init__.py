"""Memory: what is kept and how it changes (ingest, compaction, authored rules, lifecycle).

Packages, lower first; a package imports only the ones before it, plus ``sidecar.store``,
``sidecar.engines``, ``sidecar.config`` and ``sidecar.errors``:

* ``core``: the shared vocabulary: turns, token estimates, collection layout, text
  analysis (BM25), locks, callbacks, progress, input errors. Pure or nearly so.
* ``authored``: authored markdown parsed into tiered rules, the rule classifier, the
  authored-document service and its file watcher.
* ``ingest``: the admission gate and turn ingestion into a session.
* ``compaction``: the summary DAG: tail selection, clusters, summaries, quality, pressure.
* ``service``: :class:`MemoryService`, the sessions' owner (ingest, compaction, locks,
  change notifications), built on the three packages above.
* ``lifecycle``: what happens over time: dreams, the lifecycle journal, forget.

Nothing here reads for a prompt: ``sidecar.assembly`` consumes this package, never the
reverse. See docs/memory.md.
"""
