"""The PostgreSQL + pgvector store backend (``postgresql://`` store URLs).

Imported only when such a URL is opened (``sidecar.store.backend.open_store``), so the
SQLite store never loads the database driver. See ``store.py`` for the map of the modules.
"""
