"""Dates the tools show: a record stored with a time outside the daemon's range (written
before ingest refused such times) shows no date instead of failing the whole tool call."""

from __future__ import annotations

from sidecar.mcp.tools import iso_date
from sidecar.store.timestamps import TS_MAX_MS


def test_times_in_range_are_iso_dates() -> None:
    assert iso_date(0) == "1970-01-01T00:00:00+00:00"
    assert iso_date(TS_MAX_MS) == "9999-12-31T23:59:59+00:00"
    assert iso_date(None) is None


def test_times_outside_the_range_have_no_date() -> None:
    assert iso_date(TS_MAX_MS + 1) is None
    assert iso_date(1_764_000_000_000_000) is None  # microseconds
    assert iso_date(-1) is None
