"""The on-disk state of an unfinished ``libravdb reembed`` (see ``sidecar.store.reembed``).

Kept apart from the re-embed itself because the store reads it when it opens a directory:
new vectors are staged in ``reembed_stage`` while the records keep the old ones, and the
``reembed_target*`` meta keys name the model being moved to.
"""

from __future__ import annotations

import sqlite3

STAGE_TABLE = "reembed_stage"
# Meta keys of an unfinished re-embed (read by Store when it opens the directory).
TARGET_KEY = "reembed_target"
TARGET_MODEL_KEY = "reembed_target_model"
TARGET_DIMS_KEY = "reembed_target_dims"
CREATE_STAGE = (
    f"CREATE TABLE IF NOT EXISTS {STAGE_TABLE} "
    "(rid INTEGER PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID"
)


def discard_stage(conn: sqlite3.Connection) -> bool:
    """Drop an unfinished re-embed's stage and markers; True if there was one.

    Called inside the caller's transaction. Used when the store is opened by the model it
    was written with: its vectors are intact, the stage would go stale with the next write.
    """
    had = bool(conn.execute("SELECT 1 FROM meta WHERE key = ?", (TARGET_KEY,)).fetchone())
    conn.execute(f"DROP TABLE IF EXISTS {STAGE_TABLE}")
    conn.execute(
        "DELETE FROM meta WHERE key IN (?, ?, ?, 'reembed_cursor')",
        (TARGET_KEY, TARGET_MODEL_KEY, TARGET_DIMS_KEY),
    )
    return had


def staged_progress(conn: sqlite3.Connection) -> tuple[int, int]:
    """(records staged, records to re-embed) of an unfinished re-embed."""
    has_stage = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (STAGE_TABLE,)
    ).fetchone()
    done = 0
    if has_stage:
        done = int(conn.execute(f"SELECT count(*) FROM {STAGE_TABLE}").fetchone()[0])
    return done, _vector_record_count(conn)


def _vector_record_count(conn: sqlite3.Connection) -> int:
    return int(
        conn.execute(
            "SELECT count(*) FROM records r JOIN collections c ON c.cid = r.cid "
            "WHERE c.kind = 'vector'"
        ).fetchone()[0]
    )
