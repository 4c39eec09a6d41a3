"""A saved view's matrix mapped from its file copy-on-write (sidecar/store/mapped_rows.py,
``view_files.read`` with a ``Mappable`` target): the rows are the file's bytes, the
spare rows zeros, a write stays the process's own, a file replaced or removed meanwhile
changes nothing mapped, damage is caught before anything is mapped, and an overlay that
cannot be done reads the bytes instead. A mapped matrix is no copy in the process's own
memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sidecar.store import mapped_rows, view_files
from sidecar.store.mapped_rows import MappedRows

pytestmark = pytest.mark.skipif(not mapped_rows.supported(), reason="Linux only")
COLL = "turns:u1"
DIMS = 384


def _save(data_dir: Path, mat: np.ndarray[Any, Any], lead: bytes) -> None:
    """A file of two sections: ``lead`` (so the matrix starts inside a page) and ``mat``."""
    sections = [view_files.Section(len(lead), [lead]), view_files.of_buffer(mat.data)]
    assert view_files.write(data_dir, COLL, {"rows": len(mat)}, sections)


def _read(data_dir: Path, target: MappedRows, lead: int) -> dict[str, Any] | None:
    buf = bytearray(lead)

    def into(i: int, size: int) -> memoryview | view_files.Mappable | None:
        return memoryview(buf) if i == 0 else target

    return view_files.read(data_dir, COLL, lambda meta: True, into)


def _rss_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(field)


def test_the_rows_are_the_files_the_spare_rows_zeros_and_writes_stay_private(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(3)
    mat = rng.standard_normal((1000, DIMS)).astype(np.float16)
    _save(tmp_path, mat, b"x" * 1001)  # the matrix starts at no page boundary
    path = view_files.path_of(tmp_path, COLL)
    before = path.read_bytes()
    rows = MappedRows(1300, 1000, DIMS, np.dtype(np.float16))
    assert _read(tmp_path, rows, 1001) is not None
    assert rows.mapped == mat.nbytes  # mapped, not read
    got = rows.array()
    assert np.array_equal(got[:1000], mat)
    assert not np.any(got[1000:])  # the file's checksum after the rows is not a row
    got[5] = 1.0  # a rewritten row, and an appended one
    got[1100] = 2.0
    assert np.all(got[5] == 1.0) and np.all(got[1100] == 2.0)
    assert path.read_bytes() == before  # copy-on-write: the file is as it was
    # a save replaces the file, a forget removes it: neither changes what is mapped
    _save(tmp_path, np.zeros_like(mat), b"y" * 1001)
    view_files.remove(tmp_path, COLL)
    assert np.array_equal(got[6:1000], mat[6:])


def test_damage_is_caught_before_anything_is_mapped(tmp_path: Path) -> None:
    mat = np.ones((800, DIMS), dtype=np.float16)
    _save(tmp_path, mat, b"x" * 10)
    path = view_files.path_of(tmp_path, COLL)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a byte of the matrix
    path.write_bytes(bytes(data))
    rows = MappedRows(800, 800, DIMS, np.dtype(np.float16))
    assert _read(tmp_path, rows, 10) is None
    assert rows.mapped == 0
    assert not path.exists()  # a damaged file is removed, as a read one is


class _Unmappable(MappedRows):
    def overlay(self, fd: int, at: int, size: int) -> bool:
        return False


def test_rows_that_cannot_be_mapped_are_read(tmp_path: Path) -> None:
    mat = np.arange(700 * DIMS, dtype=np.float32).reshape(700, DIMS)
    _save(tmp_path, mat, b"x" * 77)
    rows = _Unmappable(900, 700, DIMS, np.dtype(np.float32))
    assert _read(tmp_path, rows, 77) is not None
    assert rows.mapped == 0
    assert np.array_equal(rows.array()[:700], mat)
    assert not np.any(rows.array()[700:])


def test_a_mapped_matrix_is_resident_only_where_read(tmp_path: Path) -> None:
    mat = np.full((100_000, DIMS), 0.5, dtype=np.float16)  # 73 MiB
    _save(tmp_path, mat, b"x" * 3)
    del mat
    rows = MappedRows(125_000, 100_000, DIMS, np.dtype(np.float16))
    anon0, file0 = _rss_kb("RssAnon"), _rss_kb("RssFile")
    assert _read(tmp_path, rows, 3) is not None
    got = rows.array()
    # the checksum streamed through a 1 MiB buffer: neither the file's pages nor a copy
    # of them are the process's
    assert _rss_kb("RssAnon") - anon0 < 16 * 1024
    assert _rss_kb("RssFile") - file0 < 16 * 1024
    picked = got[np.arange(0, 100_000, 1000)].astype(np.float32)
    assert np.all(picked == 0.5)
    # rows read map the file's pages around them (the kernel's fault-around, a large
    # folio at a time), which the kernel can take back; they are no copy of the process's
    assert _rss_kb("RssAnon") - anon0 < 16 * 1024
