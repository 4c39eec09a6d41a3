"""Memory core: pure logic (no I/O, no store, no models) used by ingest and compaction.

Modules: ``tokens`` (the one token estimator), ``sanitize`` (summarizer input, tool-output
masking), ``gate`` (durable-admission gating scalar), ``deontic`` (rule classifier),
``markdown`` (authored documents → tiered nodes), ``dream`` (dream diary and promotion
gates), ``turns`` (the raw turn), ``continuity`` (tail, clusters, progress, ladder, prior
context, guidance protection), ``quality`` (preservation metrics, extractive selection),
``lineage`` (summary ids, metadata, the summary DAG), ``autocompact`` (pressure
accumulator, compaction barrier). See docs/memory.md.
"""
