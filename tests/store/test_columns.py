"""A view's load reads the store as pages of columns (``StoreBackend.columns``,
``view_load.read_rows``) instead of records: the same records in the same order, and the
same rows and matrix, bit for bit, as the records read by ``list_records`` and loaded one
page at a time (``view_load.load_rows``). On both backends; damaged records (SQLite) are
skipped and reported as ``list_records`` does."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.assembly import view_load as VL
from sidecar.assembly import view_rows as VR
from sidecar.memory.core import layout as C
from sidecar.store import Store
from sidecar.store.interface import StoreBackend
from sidecar.store.rows import json_decode, json_encode
from sidecar.store.types import Put

DIMS = 4
NAMES = (
    C.TURNS_PREFIX + "u1",
    C.USER_PREFIX + "u1",
    C.SESSION_RAW_PREFIX + "s1",
    C.SESSION_SUMMARY_PREFIX + "s1",
    C.DREAM_PREFIX + "u1",
)


def _meta(rng: np.random.Generator, i: int) -> dict[str, Any]:
    """Metadata with every kind of value under the keys a row reads, or none."""
    values: list[Any] = [None, True, False, 0, 7, -3, 2.5, 1e3, "", "x", "s9", [1], {"a": 1}]
    keys = ("type", "sessionId", "role", "text", "ts", "source_ts_max", "seq", "source_turn_id")
    meta: dict[str, Any] = {"k": i, "é": 'ü \u2028 \\ " \x01', "f": 0.1 + i}
    for key in keys:
        pick = int(rng.integers(len(values) + 3))
        if pick < len(values):
            meta[key] = values[pick]
    if rng.random() < 0.3:
        meta["type"] = C.TYPE_SUMMARY
    if rng.random() < 0.5:
        meta["ts"] = 1_700_000_000_000 + i
    return meta


def _seed(store: StoreBackend, n: int = 60) -> None:
    rng = np.random.default_rng(3)
    for name in NAMES:
        puts = []
        for i in range(n):
            vec = rng.standard_normal(DIMS) * (0.0 if i % 17 == 0 else 10.0 ** rng.integers(-3, 4))
            text = "" if i % 11 == 0 else f"line {i} about tea {'é' * (i % 3)}"
            puts.append(Put(name, f"r{i:03d}", text, _meta(rng, i), vec))
        puts.append(Put(name, "nul", "a\x00b", {"role": "user"}, np.ones(DIMS)))
        store.put_many(puts)


def _old(
    store: StoreBackend, name: str, page: int, count: int | None = None
) -> tuple[VR.ViewRows, VR.F32]:
    pages = []
    after = None
    while recs := store.list_records(name, after_id=after, limit=page, include_vectors=True):
        pages.append(recs)
        after = recs[-1].id
    return VL.load_rows(name, pages, store.count(name) if count is None else count, DIMS)


def _same(a: tuple[VR.ViewRows, VR.F32], b: tuple[VR.ViewRows, VR.F32]) -> None:
    (ra, ma), (rb, mb) = a, b
    for slot in VR.ViewRows.__slots__:
        if slot in ("roles", "sessions"):
            assert getattr(ra, slot).names == getattr(rb, slot).names
        else:
            assert getattr(ra, slot) == getattr(rb, slot), slot
    assert ma.shape == mb.shape and ma.tobytes() == mb.tobytes()


@pytest.mark.parametrize("page", [7, 2048])
def test_a_load_from_columns_has_the_rows_and_matrix_of_a_load_from_records(
    store: StoreBackend, page: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(store)
    monkeypatch.setattr(VL, "READ_PAGE", page)
    for name in NAMES:
        new = VL.read_rows(store, name, store.count(name), DIMS)
        _same(new, _old(store, name, page))
        assert len(new[0]) == 61
        # more rows than the state said (written since): the matrix grows as it did
        grown = VL.read_rows(store, name, 3, DIMS)
        _same(grown, _old(store, name, page, 3))
        assert not grown[1][61:].any()
    assert len(VL.read_rows(store, "turns:nobody", 0, DIMS)[0]) == 0


def test_columns_are_the_records_of_list_records(store: StoreBackend) -> None:
    _seed(store, n=30)
    name = NAMES[0]
    after = None
    while recs := store.list_records(name, after_id=after, limit=8, include_vectors=True):
        cols = store.columns(name, after, 8)
        assert list(cols.ids) == [r.id for r in recs]
        assert list(cols.texts) == [r.text for r in recs]
        assert [json_decode(m) for m in cols.metas] == [r.metadata for r in recs]
        # the JSON as stored is what the view's rows would encode from the record
        assert [m.encode() for m in cols.metas] == [json_encode(r.metadata) for r in recs]
        assert list(cols.versions) == [r.version for r in recs]
        assert list(cols.created) == [r.created_ms for r in recs]
        assert list(cols.updated) == [r.updated_ms for r in recs]
        assert list(cols.ts) == [r.ts_ms for r in recs]
        assert list(cols.seqs) == [r.seq for r in recs]
        assert [np.frombuffer(v or b"", np.float32).tolist() for v in cols.vectors] == [
            [] if r.vector is None else r.vector.tolist() for r in recs
        ]
        after = recs[-1].id
    assert store.columns("turns:nobody", None, 8).ids == ()


@pytest.mark.sqlite_only("damaged records are written through SQLite's own connection")
def test_damaged_or_odd_metadata_loads_as_the_records_say(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = NAMES[0]
    with Store.open(data_dir, embed_dims=DIMS) as store:
        _seed(store, n=20)
    conn = sqlite3.connect(data_dir / "store.sqlite3")
    with conn:
        conn.execute("UPDATE records SET metadata = '[1, 2]' WHERE id = 'r003'")  # no object
        conn.execute("UPDATE records SET ts_ms = NULL WHERE id IN ('r004', 'r006')")  # as v4
        conn.execute("UPDATE records SET metadata = '{\"a\": ' WHERE id = 'r005'")  # not JSON
        conn.execute(
            "UPDATE records SET text = CAST(? AS TEXT) WHERE id = 'r008'", (b"\xff\xfe bad",)
        )
        conn.execute(
            "UPDATE records SET metadata = CAST(? AS TEXT) WHERE id = 'r012'", (b'{"a": "\xff"}',)
        )
    conn.close()
    monkeypatch.setattr(VL, "READ_PAGE", 4)
    with Store.open(data_dir, embed_dims=DIMS) as store:
        new = VL.read_rows(store, name, 21, DIMS)
        bad = dict(store.bad_records)
        store.bad_records.clear()
        _same(new, _old(store, name, 4))
        assert bad == store.bad_records
        assert sorted(rid for _, rid in bad) == ["r005", "r008", "r012"]
        rows = new[0]
        assert "r003" in rows.ids and rows.metadata(rows.ids.index("r003")) == {}


def test_vectors_from_bytes_have_the_bits_of_unit_row_by_row() -> None:
    rng = np.random.default_rng(5)
    dims = 384
    vectors: list[Any] = [rng.standard_normal(dims).astype(np.float32) * s for s in (1, 1e3)]
    vectors += [rng.standard_normal(dims).astype(np.float32) for _ in range(300)]
    vectors += [None, np.zeros(dims, np.float32), np.ones(dims - 1, np.float32)]
    vectors += [np.full(dims, 1e-20, np.float32)]
    order = rng.permutation(len(vectors))
    vectors = [vectors[i] for i in order]
    blobs = [None if v is None else v.tobytes() for v in vectors]
    want = np.stack([VL.unit(v, dims) for v in vectors])
    out = np.zeros((len(vectors) + 2, dims), dtype=np.float32)
    VL.vectors_into(out[1:-1], blobs, dims)
    assert out[1:-1].tobytes() == want.tobytes()
    assert not out[0].any() and not out[-1].any()
    full = np.zeros((300, dims), dtype=np.float32)  # every row present: one division
    VL.vectors_into(full, blobs[:0] + [v.tobytes() for v in vectors if v is not None][:300], dims)
    kept = [v for v in vectors if v is not None][:300]
    assert full.tobytes() == np.stack([VL.unit(v, dims) for v in kept]).tobytes()


@pytest.mark.sqlite_only("damaged records are written through SQLite's own connection")
def test_a_page_of_damaged_records_only_does_not_end_the_load(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records after a page whose every record is damaged (skipped) are still loaded
    (the load once stopped there: the page read again as records came back empty)."""
    name = NAMES[0]
    with Store.open(data_dir, embed_dims=DIMS) as store:
        _seed(store, n=20)
    conn = sqlite3.connect(data_dir / "store.sqlite3")
    with conn:
        # one page of two: (nul, r000), (r001, r002), (r003, r004), (r005, r006), ...
        conn.execute("UPDATE records SET metadata = '{' WHERE id IN ('r005', 'r006')")
    conn.close()
    monkeypatch.setattr(VL, "READ_PAGE", 2)
    with Store.open(data_dir, embed_dims=DIMS) as store:
        rows = VL.read_rows(store, name, 21, DIMS)[0]
        assert "r005" not in rows.ids and "r006" not in rows.ids
        assert len(rows) == store.count(name) - 2
        assert rows.ids[-1] == max(r.id for r in store.list_records(name, limit=100))
