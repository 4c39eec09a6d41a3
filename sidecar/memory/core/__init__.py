"""The memory vocabulary every other memory package shares.

Owns the raw turn (``turns``), the one token estimator (``tokens``), collection names,
record ids and metadata keys (``layout``), which collections a namespace owns (``scope``),
text analysis (``analyzer``), the BM25 index (``lexical``), date anchors and temporal
questions (``temporal``: a query's windows, and the dates a turn mentions), per-key locks
(``keyed_locks``), change callbacks (``callbacks``), progress reporting (``progress``) and
the input-refusal errors (``errors``). Imports only ``sidecar.store`` (names and types),
never another memory package.
"""
