"""Rows of a file mapped copy-on-write into an array with room to grow.

Why: a large view's matrix (768 MB at 1M rows in float16) is read from its saved file at
every start. Read into anonymous memory, it costs that memory for as long as the view
lives, though a request reads a few hundred of its rows. Mapped copy-on-write
(``MAP_PRIVATE``), only the pages a request touches are resident, the kernel can take
the clean ones back under pressure, and a row the view rewrites becomes the process's
own copy (the file never changes). The array keeps room for the rows appended after the
file's: it is an anonymous mapping of the whole capacity whose first bytes are replaced
by the file's (``MAP_FIXED``), so an append needs no copy until the capacity is passed.

The file must not be changed in place while it is mapped. The view files never are:
they are replaced by a rename (``view_files.write``) or removed, which leave a mapping's
inode as it was. Another program truncating one would make reading the truncated pages
fail (``SIGBUS``), as with every memory-mapped database file (LMDB's data file).
"""

from __future__ import annotations

import ctypes
import mmap
import sys
from typing import Any

import numpy as np

PAGE = mmap.PAGESIZE
#: A section smaller than this is read: a mapping per small view costs more than it saves
#: (and a process may hold only so many mappings, ``vm.max_map_count``).
MIN_BYTES = 1 << 20
_MAP_FIXED = 0x10  # Linux's value (the mmap module does not export it)

_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
if _libc is not None:
    _libc.mmap.restype = ctypes.c_void_p
    _libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int64,
    ]


def supported() -> bool:
    """Whether files can be mapped over a region here (Linux)."""
    return _libc is not None


class MappedRows:
    """``capacity`` rows of ``dims`` values of ``dtype``, zeros until written, whose first
    ``rows`` come from a file's section (:meth:`buffer` to read them, or
    :meth:`overlay`)."""

    def __init__(self, capacity: int, rows: int, dims: int, dtype: np.dtype[Any]) -> None:
        if not 0 <= rows <= capacity:
            raise ValueError(f"{rows} rows for a capacity of {capacity}")
        self.capacity = capacity
        self.rows = rows
        self.dims = dims
        self.dtype = dtype
        self._region: mmap.mmap | None = None
        self._lead = 0
        self.mapped = 0  # bytes of the rows that come from the file

    def buffer(self, at: int) -> memoryview:
        """The first ``rows`` rows' bytes, for a section at file offset ``at`` (the rows
        start as far into a page as the section does, so that the file's pages can be
        mapped over them)."""
        self._lead = at % PAGE
        size = self._lead + self.capacity * self.dims * self.dtype.itemsize
        self._region = mmap.mmap(-1, max(PAGE, -(-size // PAGE) * PAGE), flags=mmap.MAP_PRIVATE)
        return self.array()[: self.rows].data.cast("B")

    def array(self) -> np.ndarray[Any, Any]:
        """The rows (the array keeps the region mapped as long as it lives)."""
        assert self._region is not None, "buffer() first"
        count = self.capacity * self.dims
        flat = np.frombuffer(self._region, dtype=self.dtype, count=count, offset=self._lead)
        return flat.reshape(self.capacity, self.dims)

    def overlay(self, fd: int, at: int, size: int) -> bool:
        """Map ``size`` bytes of the file ``fd`` from offset ``at`` over the rows' first
        bytes, copy-on-write; False when it cannot be done here (read them instead)."""
        region = self._region
        if _libc is None or region is None or at % PAGE != self._lead or size <= 0:
            return False
        anchor = ctypes.c_char.from_buffer(region)
        try:
            base = ctypes.addressof(anchor)
        finally:
            del anchor  # the export would keep the region from being unmapped
        length = -(-(self._lead + size) // PAGE) * PAGE
        prot = mmap.PROT_READ | mmap.PROT_WRITE
        flags = mmap.MAP_PRIVATE | _MAP_FIXED
        got = _libc.mmap(base, length, prot, flags, fd, at - self._lead)
        if got != base:
            # a failed MAP_FIXED may have unmapped the range: zeros mapped back, or no use
            anon = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_FIXED
            if _libc.mmap(base, length, prot, anon, -1, 0) != base:
                raise OSError(ctypes.get_errno(), "a view's rows lost their memory mapping")
            return False
        # the last page may hold the file's next bytes: the rows past these are zeros
        region[self._lead + size : length] = bytes(length - self._lead - size)
        self.mapped = size
        return True
