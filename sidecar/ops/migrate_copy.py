"""The copy of ``libravdb migrate``: collections, records and tombstones, source to target.

Records are copied in the order they were last written (their ``seq``, store-wide), so the
target's own sequence keeps that order: batches of :data:`BATCH` records, each read from the
source with its vector (one ``get_many`` per collection in the batch) and written to the
target in one transaction. Texts, metadata (ints stay ints), vectors (float32, bit for bit)
and creation times are kept; record versions restart at 1 and update times are the copy's,
as an ``import`` does. Empty collections are created too, and every tombstone is added with
its reason, so a forgotten memory stays forgotten in the new store.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

from sidecar.ops.migrate_open import MigrateError
from sidecar.store.interface import StoreBackend
from sidecar.store.types import Put

BATCH = 500


@dataclass(slots=True)
class Copied:
    collections: int = 0
    records: int = 0
    tombstones: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


class Progress:
    """``migrate: 12,000/100,000 records (4,100/s, ETA 0:19)`` on stderr: redrawn in place
    at a terminal (at most ten times a second), else a line every :attr:`every_s`."""

    def __init__(self, total: int, stream: TextIO | None = None, every_s: float = 5.0) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self._tty = self.stream.isatty()
        self._t0 = time.monotonic()
        self._last = 0.0
        self.done = 0

    def line(self) -> str:
        spent = time.monotonic() - self._t0
        rate = self.done / spent if spent > 0 else 0.0
        left = (self.total - self.done) / rate if rate > 0 else 0.0
        eta = f"{int(left) // 60}:{int(left) % 60:02d}"
        return f"migrate: {self.done:,}/{self.total:,} records ({rate:,.0f}/s, ETA {eta})"

    def advance(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        wait = 0.1 if self._tty else self.every_s
        if now - self._last >= wait:
            self._last = now
            self._draw()

    def _draw(self, final: bool = False) -> None:
        text = self.line()
        try:
            if self._tty:
                self.stream.write("\r" + text + ("\n" if final else ""))
            else:
                self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def finish(self) -> None:
        self._draw(final=True)


def record_keys(source: StoreBackend) -> list[tuple[int, str, str]]:
    """``(seq, collection, id)`` of every record of the source, in write order."""
    keys: list[tuple[int, str, str]] = []
    for info in source.collections():
        keys.extend((r.seq, info.name, r.id) for r in source.list_records(info.name))
    keys.sort()
    return keys


def _batches(keys: list[tuple[int, str, str]], size: int) -> Iterator[list[tuple[int, str, str]]]:
    for start in range(0, len(keys), size):
        yield keys[start : start + size]


def copy_store(
    source: StoreBackend,
    target: StoreBackend,
    keys: list[tuple[int, str, str]],
    progress: Progress,
    batch: int = BATCH,
) -> Copied:
    """Copy everything (module doc); the target must be empty (the caller checks)."""
    t0 = time.monotonic()
    out = Copied()
    infos = source.collections()
    target.ensure_collections([i.name for i in infos])
    for info in infos:
        made = target.collection(info.name)
        if made is None or (made.dims, made.kind) != (info.dims, info.kind):
            got = "missing" if made is None else f"{made.kind}, {made.dims} dims"
            raise MigrateError(
                f"collection {info.name!r} is {info.kind}, {info.dims} dims in the source "
                f"but {got} in the target; nothing more was copied"
            )
    out.collections = len(infos)
    vectored = {i.name for i in infos if i.has_vectors}
    # a bulk load: PostgreSQL builds each large collection's ANN index once, at the end,
    # instead of inserting every copied record into a growing graph (docs/store.md)
    with target.bulk_load():
        for part in _batches(keys, batch):
            by_coll: dict[str, list[str]] = defaultdict(list)
            for _seq, name, rid in part:
                by_coll[name].append(rid)
            found = {
                (name, r.id): r
                for name, ids in by_coll.items()
                for r in source.get_many(name, ids, include_vectors=name in vectored)
            }
            puts: list[Put] = []
            for _seq, name, rid in part:
                rec = found.get((name, rid))
                if rec is None:  # deleted under us, or damaged: the counts will say so
                    continue
                vec = rec.vector if name in vectored else None
                puts.append(Put(name, rid, rec.text, rec.metadata, vec, created_ms=rec.created_ms))
            if puts:
                target.write(puts)
            out.records += len(puts)
            progress.advance(len(part))
    out.tombstones = copy_tombstones(source, target)
    out.seconds = time.monotonic() - t0
    progress.finish()
    return out


def copy_tombstones(source: StoreBackend, target: StoreBackend) -> int:
    grouped: dict[tuple[str, str], list[str]] = defaultdict(list)
    rows = source.list_tombstones()
    for ns, key, reason, _created in rows:
        grouped[(ns, reason)].append(key)
    for (ns, reason), tkeys in grouped.items():
        for start in range(0, len(tkeys), BATCH * 4):
            target.add_tombstones(ns, tkeys[start : start + BATCH * 4], reason)
    return len(rows)
