"""Giving the heap's free pages back to the system (sidecar.allocator, glibc only)."""

from __future__ import annotations

import gc
import os

import pytest

from sidecar import allocator
from sidecar.assembly.heap import HeapSettler

glibc_only = pytest.mark.skipif(
    not hasattr(os, "confstr") or not os.confstr("CS_GNU_LIBC_VERSION"), reason="glibc only"
)


def _anon_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise AssertionError("no RssAnon")


def _leave_a_hole(mb: int = 48) -> list[bytes]:
    """Free ``mb`` MB of small heap blocks below one that stays (the heap cannot shrink
    from its top); returns the block that stays."""
    blocks = [os.urandom(16) * 128 for _ in range(mb * 512)]  # 2 KB each: heap, not mmap
    pin = [os.urandom(16) * 128]
    del blocks
    return pin


@glibc_only
def test_release_returns_a_freed_hole_to_the_system() -> None:
    pin = _leave_a_hole()
    allocator.release_free_memory()  # what the test process had free already
    pin += _leave_a_hole()
    before = _anon_kb()
    assert allocator.release_free_memory()
    assert before - _anon_kb() > 24 * 1024  # most of the 48 MB hole left the process
    assert pin


@glibc_only
def test_release_does_nothing_with_tuning_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(allocator.TUNING_ENV, "off")
    pin = _leave_a_hole(8)
    assert not allocator.release_free_memory()
    assert pin


@glibc_only
def test_the_settler_releases_after_enough_rows_not_before() -> None:
    settler = HeapSettler(min_rows=10, release_rows=100)
    pin = _leave_a_hole(8)
    assert settler.loaded(60)
    assert settler.releases == 0 and settler.unreleased == 60
    before = _anon_kb()
    settler.loaded(40)  # 100 rows: the hole goes back
    assert settler.releases == 1 and settler.unreleased == 0
    assert before - _anon_kb() > 4 * 1024
    settler.loaded(0)
    assert settler.releases == 1
    assert pin
    gc.unfreeze()  # leave the test process as it was
