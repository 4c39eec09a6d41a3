"""What the saves of derived data in the database share (``saved_terms.py``,
``saved_views.py``): the claim on the collection a save starts with, and the framing of
PostgreSQL's binary COPY, in which a save streams its body without joining it."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

import psycopg

#: Binary COPY: the signature with no flags and no extension, then rows; a row is its
#: field count, then each value as its length and its bytes (integers big-endian).
SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
TRAILER = struct.pack(">h", -1)
LEN = struct.Struct(">i")


def claim(
    conn: psycopg.Connection[Any], collection: str, header: Mapping[str, Any], lock: int
) -> int | None:
    """The collection's ``cid`` when it is still the one ``header`` was taken at, with no
    removal since (else None: nothing may be saved), the collection row held in share
    mode and the save's advisory lock taken for it.

    Share mode waits for a removal's transaction holding the row (which then shows its new
    count) and holds back one that comes after until the save commits: the removal then
    deletes what was saved. The advisory lock puts two daemons' saves of one collection
    one after the other; the last one's stays."""
    row = conn.execute(
        "SELECT cid, removals FROM collections WHERE name = %s FOR SHARE", (collection,)
    ).fetchone()
    if row is None or (row[0], row[1]) != (header.get("cid"), header.get("removals")):
        return None
    cid = int(row[0])
    conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (lock, cid))
    return cid
