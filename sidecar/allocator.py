"""Make freed memory go back to the operating system (glibc only).

glibc raises its mmap threshold each time a large block is freed, so the next large
buffers (embedding batches, onnxruntime activations, reply frames) come from the heap,
where freed space fragments and is never returned: one ingest of 200 messages of 5 KB
left the daemon 190 MB larger for good. A fixed threshold keeps every block of 32 MiB or
more (a long batch's attention buffers) in its own mapping, unmapped when freed, and two
arenas stop each worker thread from growing its own heap. The threshold is a trade: at
128 KiB resident memory stayed within 20 MB of the start but every batch paid page faults
for fresh mappings (short-text embedding 17 % slower, long ingests 45 %); at 32 MiB it
settles about 50 MB above the start after 500 long messages and costs a few percent.
Measured side by side in docs/benchmarks.md § resident.

Variables a user sets (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_ARENA_MAX``) win: glibc read
them at start, and this module then leaves that setting alone.

Blocks under the threshold still come from the heap, and a large load leaves holes in it:
loading the models left about 110 MB free inside the heap, and reading a 100k-memory
view's saved file another 80-120 MB (its buffers, the index's temporary id lists, the
sorts of the BM25 build). :func:`release_free_memory` (``malloc_trim``) hands such free
pages back; it takes 1-5 ms on a 1.5 GB heap, so it runs after the daemon starts and after
loads of many rows (:class:`~sidecar.assembly.heap.HeapSettler`), not after every request.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

import structlog

log = structlog.get_logger(__name__)

# mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
MMAP_THRESHOLD = 32 * 1024 * 1024
ARENA_MAX = 2
# LIBRAVDB_MEMORY_TUNING=off keeps glibc's and onnxruntime's defaults (for the side-by-side
# measurement in scripts/bench_resident.py, or to rule this module out when diagnosing).
TUNING_ENV = "LIBRAVDB_MEMORY_TUNING"


def tuning_enabled() -> bool:
    return os.environ.get(TUNING_ENV, "").strip().lower() not in ("off", "0", "false", "no")


def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc and tuning is on; None otherwise."""
    return _glibc_handle() if tuning_enabled() else None


@functools.cache
def _glibc_handle() -> ctypes.CDLL | None:
    """The process's C library when it is glibc, looked up once (``find_library`` runs
    ``ldconfig`` in a subprocess: 2 ms, and a release runs after every large load)."""
    if not hasattr(os, "confstr"):
        return None
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
    except (ValueError, OSError):
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def release_free_memory() -> bool:
    """Return the heap's free pages to the operating system; True when glibc released
    some (False: nothing to release, not glibc, or tuning off)."""
    libc = _glibc()
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return bool(trim(0))


def tune_allocator() -> dict[str, int]:
    """Apply the settings above; returns what was set (empty off glibc)."""
    libc = _glibc()
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return {}
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    applied: dict[str, int] = {}
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ and mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        applied["mmap_threshold"] = MMAP_THRESHOLD
    if "MALLOC_ARENA_MAX" not in os.environ and mallopt(_M_ARENA_MAX, ARENA_MAX):
        applied["arena_max"] = ARENA_MAX
    log.debug("allocator_tuned", **applied)
    return applied
