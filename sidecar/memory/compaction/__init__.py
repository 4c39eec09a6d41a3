"""Lossless compaction: older turns folded into a summary DAG, nothing deleted.

``continuity`` picks the protected tail and the clusters, ``sanitize`` prepares summarizer
input, ``quality`` scores a summary against its turns, ``lineage`` names summaries and links
the DAG, ``autocompact`` tracks token pressure, and ``compactor`` runs one compaction in a
store transaction. Imports ``memory.core``, ``memory.authored`` (guidance detection),
``sidecar.store`` and ``sidecar.config``.
"""
