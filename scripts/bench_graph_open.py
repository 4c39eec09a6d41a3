#!/usr/bin/env python3
"""What opening a large SQLite store costs before anything is asked of it, and what the
first search then pays: resident memory after ``Store.open``, the open's time, the first
search of each collection (which loads its saved HNSW graph when graphs load on first
use) and the memory after it. Each measurement runs in a fresh process on the same store.

    python scripts/bench_graph_open.py --dir /tmp/graph-open [--n 100000] [--collections 2]
        [--runs 3]

The store is built once in ``--dir`` (seeded clustered 384-d vectors, the store's default
graph settings, graphs built and saved) and reused by later runs. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.bench_store import _quiet, clustered, rss_bytes  # noqa: E402

DIMS = 384


def _names(collections: int) -> list[str]:
    return [f"bench:c{i}" for i in range(collections)]


def build(path: Path, n: int, collections: int) -> None:
    """A store of ``collections`` collections of ``n`` records each, graphs saved."""
    from sidecar.store import Put, Store

    with Store.open(path, embed_dims=DIMS, background=False, index_threads=2) as store:
        for c, name in enumerate(_names(collections)):
            data, _ = clustered(n, DIMS, seed=c)
            for lo in range(0, n, 5000):
                store.put_many(
                    [
                        Put(name, f"r{i:07d}", f"text {i}", {"i": i}, data[i])
                        for i in range(lo, min(lo + 5000, n))
                    ]
                )
        store.run_index_work()
        store.checkpoint()


def measure(path: Path, collections: int) -> dict[str, Any]:
    """In this process: RSS before and after the open, each first search, and after."""
    _quiet()
    from sidecar.store import Store

    out: dict[str, Any] = {}
    base = rss_bytes()
    t0 = time.perf_counter()
    store = Store.open(path, embed_dims=DIMS)
    out["open_s"] = round(time.perf_counter() - t0, 3)
    out["rss_after_open_mb"] = round((rss_bytes() - base) / 2**20, 1)
    out["modes_after_open"] = [s.mode for s in store.index_status()]
    queries, _ = clustered(2, DIMS, seed=0)  # near collection 0's clusters
    firsts, seconds, answers = [], [], []
    for name in _names(collections):
        t = time.perf_counter()
        hits = store.search(name, queries[0], 10)
        firsts.append(round((time.perf_counter() - t) * 1e3, 1))
        t = time.perf_counter()
        store.search(name, queries[1], 10)
        seconds.append(round((time.perf_counter() - t) * 1e3, 2))
        answers.append([h.id for h in hits])
    out["first_search_ms"] = firsts
    out["second_search_ms"] = seconds
    out["rss_after_searches_mb"] = round((rss_bytes() - base) / 2**20, 1)
    out["answers"] = hashlib.sha256(json.dumps(answers).encode()).hexdigest()[:16]
    if hasattr(store, "graph_idle_s"):  # graphs unloaded when idle (not before issue 36)
        from sidecar.store import graph_lazy

        store.graph_idle_s = 0.0
        store.checkpoint()  # the files hold the graphs as they are
        out["unloaded"] = graph_lazy.unload_idle(store)
        out["rss_after_unload_mb"] = round((rss_bytes() - base) / 2**20, 1)
        t = time.perf_counter()
        store.search(_names(collections)[0], queries[0], 10)
        out["search_after_unload_ms"] = round((time.perf_counter() - t) * 1e3, 1)
    store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, type=Path)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--collections", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    path = args.dir / "store"
    if args.child:
        print(json.dumps(measure(path, args.collections)))
        return
    if not path.exists():
        _quiet()
        t = time.perf_counter()
        build(path, args.n, args.collections)
        print(f"built {path} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    runs: list[dict[str, Any]] = []
    for _ in range(args.runs):
        cmd = [sys.executable, __file__, "--dir", str(args.dir), "--child"]
        cmd += ["--collections", str(args.collections)]
        res = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO)
        runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    print(json.dumps({"n": args.n, "collections": args.collections, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
