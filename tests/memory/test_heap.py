"""The heap freeze that keeps full garbage collections off the retrieval caches
(sidecar.assembly.heap)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from sidecar.assembly import heap
from sidecar.assembly.heap import HeapSettler


class Row:
    pass


@pytest.fixture
def thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # leave the test process as it was


def test_freezes_once_enough_rows_were_loaded(thawed: None) -> None:
    settler = HeapSettler(min_rows=100)
    assert gc.get_freeze_count() == 0
    assert not settler.loaded(60)
    assert gc.get_freeze_count() == 0
    cached = [Row() for _ in range(50)]
    assert all(gc.is_tracked(row) for row in cached)
    assert settler.loaded(40)  # 60 + 40 reaches the threshold
    assert settler.freezes == 1 and settler.pending == 0
    assert gc.get_freeze_count() > 0
    tracked = {id(o) for o in gc.get_objects()}
    assert not any(id(row) in tracked for row in cached)  # no collection walks them
    assert not settler.loaded(0)


def test_frozen_objects_are_still_freed_when_dropped(thawed: None) -> None:
    row = Row()
    ref = weakref.ref(row)
    HeapSettler(min_rows=1).loaded(1)
    del row  # reference counting, not the collector, releases it
    assert ref() is None


def test_the_collector_is_paused_while_caches_load_and_restored_after() -> None:
    assert gc.isenabled()
    with heap.paused():
        assert not gc.isenabled()
        with heap.paused():  # nested (or another thread's): still off
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()  # off before: left off
    try:
        with heap.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
    try:
        with heap.paused():
            raise KeyError("load failed")
    except KeyError:
        pass
    assert gc.isenabled()
