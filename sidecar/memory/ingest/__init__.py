"""Turns coming in: the admission gate (``gate``: what becomes durable memory) and the
ingestion of a batch into a session (``sessions``: raw history, durable copies, session
state, duplicate detection). Imports ``memory.core`` and ``sidecar.store``."""
