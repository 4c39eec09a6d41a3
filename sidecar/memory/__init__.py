"""Memory core: ingest, compaction, authored markdown, dreams, assembly.

Two layers. Pure logic (no I/O, no store, no models): ``tokens`` (the one token
estimator), ``sanitize`` (summarizer input, tool-output masking), ``gate`` (durable-admission
gating scalar), ``deontic`` (rule classifier), ``markdown`` (authored documents → tiered
nodes), ``dream`` (dream diary and promotion gates), ``turns`` (the raw turn),
``continuity`` (tail, clusters, progress, ladder, prior context, guidance protection),
``quality`` (preservation metrics, extractive selection), ``lineage`` (summary ids,
metadata, the summary DAG), ``autocompact`` (pressure accumulator, compaction barrier),
``collections``, ``budget``, ``temporal``, ``lexical``, ``scoring``, ``render`` and
``assemble``. Services that hold the store, the engines and the settings: ``service``,
``sessions``, ``compactor``, ``forget``, ``retrieval``, ``authored_service``,
``dream_service``, ``journal``, ``watcher``. See docs/memory.md.
"""
