"""Keyset cursors round-trip, and anything a listing did not return is refused."""

from __future__ import annotations

import pytest

from sidecar.memory.core.cursor import Page, decode_cursor, encode_cursor
from sidecar.memory.core.errors import MemoryInputError
from sidecar.memory.lifecycle import listing, session_index


def test_round_trip_and_no_padding() -> None:
    c = encode_cursor((-1_700_000_000_000, "turns:u", "id/1"))
    assert "=" not in c and "/" not in c and "+" not in c
    assert decode_cursor(c, (int, str, str), "memory.list") == (
        -1_700_000_000_000,
        "turns:u",
        "id/1",
    )
    assert listing.decode_cursor(listing.encode_cursor((-5, "a", "b"))) == (-5, "a", "b")
    assert session_index.decode_cursor(session_index.encode_cursor((-5, "s1"))) == (-5, "s1")


@pytest.mark.parametrize(
    "cursor",
    ["", "not base64 !", encode_cursor((1, "a")), encode_cursor(("1", "a", "b")), "e30"],
)
def test_what_a_listing_did_not_return_is_refused(cursor: str) -> None:
    with pytest.raises(MemoryInputError, match=r"memory\.list returned"):
        decode_cursor(cursor, (int, str, str), "memory.list")
    with pytest.raises(MemoryInputError, match=r"memory\.list returned"):
        listing.decode_cursor(cursor)


def test_pages_are_made_through_their_aliases() -> None:
    page = listing.ListPage([], 0, "")
    assert (page.items, page.total, page.next_cursor) == ([], 0, "")
    summary = session_index.SessionSummary("s1", 1, 5, 5, 0)
    assert session_index.SessionsPage([summary], 1, "c").items == [summary]
    assert Page([1], 1, "").items == [1]


def test_a_sessions_cursor_is_not_a_memory_cursor() -> None:
    c = session_index.encode_cursor((-5, "s1"))
    with pytest.raises(MemoryInputError, match=r"memory\.list"):
        listing.decode_cursor(c)
    with pytest.raises(MemoryInputError, match=r"sessions\.list"):
        session_index.decode_cursor(listing.encode_cursor((-5, "a", "b")))
