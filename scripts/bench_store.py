#!/usr/bin/env python3
"""Store benchmark: search latency (HNSW vs exact numpy), recall, insert rate, start, memory.

Importable: ``run(n=100_000)`` returns result rows (dicts with metric, value, unit, target,
ok); ``main()`` prints them. Data are synthetic Gaussian clusters (seeded), 384-d like
all-MiniLM-L6-v2, queries drawn from the same clusters.

    python scripts/bench_store.py [--n 100000] [--queries 200] [--threads 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

Row = dict[str, Any]


def _quiet() -> None:
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def clustered(
    n: int, dims: int = 384, clusters: int = 1000, noise: float = 0.8, seed: int = 0
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(data, centers): unit-ish cluster centers plus isotropic noise of norm ~noise."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, dims)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    data = np.empty((n, dims), dtype=np.float32)
    for lo in range(0, n, 20_000):
        m = min(20_000, n - lo)
        lab = rng.integers(0, clusters, m)
        data[lo : lo + m] = centers[lab] + noise * rng.standard_normal((m, dims)).astype(
            np.float32
        ) / np.sqrt(dims)
    return data, centers


def _queries(centers: np.ndarray[Any, Any], q: int, noise: float, seed: int) -> Any:
    rng = np.random.default_rng(seed + 1)
    dims = centers.shape[1]
    lab = rng.integers(0, len(centers), q)
    return (centers[lab] + noise * rng.standard_normal((q, dims)) / np.sqrt(dims)).astype(
        np.float32
    )


def rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _row(metric: str, value: float, unit: str, target: str = "", ok: bool | None = None) -> Row:
    return {"metric": metric, "value": round(value, 4), "unit": unit, "target": target, "ok": ok}


def _threshold(n: int) -> int:
    """The default exact/HNSW threshold, lowered for small runs so HNSW is what is measured."""
    return min(20_000, max(1000, n // 2))


def _settings(ef_construction: int) -> Any:
    from sidecar.config import StoreSettings

    return StoreSettings(hnsw_ef_construction=ef_construction)


def bench_insert_and_build(
    path: Path,
    data: np.ndarray[Any, Any],
    threads: int,
    ef_construction: int = 100,
    batch: int = 1000,
) -> list[Row]:
    """Insert with vectors given (acknowledged = committed), then build the HNSW graph."""
    from sidecar.store import Put, Store

    rows: list[Row] = []
    with Store.open(
        path,
        embed_dims=data.shape[1],
        index_threads=threads,
        background=False,
        settings=_settings(ef_construction),
        exact_threshold=_threshold(len(data)),
    ) as s:
        t0 = time.perf_counter()
        for lo in range(0, len(data), batch):
            s.put_many(
                [
                    Put("user:bench", f"r{i:07d}", "", {"i": i}, data[i])
                    for i in range(lo, min(lo + batch, len(data)))
                ]
            )
        dt = time.perf_counter() - t0
        rate = len(data) / dt
        rows.append(_row("insert_rate", rate, "records/s", ">= 5000", rate >= 5000))
        t0 = time.perf_counter()
        s.run_index_work()
        rows.append(_row("hnsw_build", time.perf_counter() - t0, "s"))
        t0 = time.perf_counter()
        single = min(300, len(data))
        for i in range(single):
            s.put("user:single", f"s{i}", vector=data[i])
        rows.append(
            _row("insert_rate_single_put", single / (time.perf_counter() - t0), "records/s")
        )
        s.drop_collections(["user:single"])
    return rows


def bench_search(
    path: Path, data: np.ndarray[Any, Any], queries: np.ndarray[Any, Any], threads: int
) -> list[Row]:
    from sidecar.store import Store

    rows: list[Row] = []
    norm = data / np.linalg.norm(data, axis=1, keepdims=True)
    with Store.open(
        path,
        embed_dims=data.shape[1],
        index_threads=threads,
        exact_threshold=_threshold(len(data)),
    ) as s:
        # the saved graph is checked at open and loaded by the collection's first search
        (status,) = [x for x in s.index_status() if x.collection == "user:bench"]
        assert status.mode == "saved" and status.pending == 0, status
        for q in queries[:20]:  # warm up
            s.search("user:bench", q, 10)
        (status,) = [x for x in s.index_status() if x.collection == "user:bench"]
        assert status.mode == "hnsw" and status.pending == 0, status
        lat = []
        hits = 0
        for q in queries:
            t0 = time.perf_counter()
            res = s.search("user:bench", q, 10)
            lat.append(time.perf_counter() - t0)
            qn = q / np.linalg.norm(q)
            exact = set(np.argpartition(-(norm @ qn), 10)[:10].tolist())
            hits += len(exact & {int(h.id[1:]) for h in res})
        graph = next(
            i for i in s._indexes.values() if i.name == "user:bench"
        ).ann  # the raw hnswlib query alone, for reference
        qn_all = queries / np.linalg.norm(queries, axis=1, keepdims=True)
        graph_lat = []
        for qn in qn_all:
            t0 = time.perf_counter()
            graph.knn_query(qn, k=10, num_threads=1)
            graph_lat.append(time.perf_counter() - t0)
        # The same query in the same conditions as the store search above: each one follows
        # an exact scan of the 150 MB matrix (the recall check), which evicts the CPU caches.
        graph_scan_lat = []
        for qn in qn_all:
            t0 = time.perf_counter()
            graph.knn_query(qn, k=10, num_threads=1)
            graph_scan_lat.append(time.perf_counter() - t0)
            np.argpartition(-(norm @ qn), 10)[:10]
        exact_lat = []
        for q in queries[:50]:
            t0 = time.perf_counter()
            qn = q / np.linalg.norm(q)
            sc = norm @ qn
            np.argpartition(-sc, 10)[:10]
            exact_lat.append(time.perf_counter() - t0)
        p50 = float(np.percentile(lat, 50)) * 1e3
        p95 = float(np.percentile(lat, 95)) * 1e3
        ep50 = float(np.percentile(exact_lat, 50)) * 1e3
        recall = hits / (10 * len(queries))
        rows += [
            _row("search_p50_hnsw", p50, "ms", "<= 1", p50 <= 1.0),
            _row("search_p95_hnsw", p95, "ms"),
            _row("search_p50_graph_only", float(np.percentile(graph_lat, 50)) * 1e3, "ms"),
            _row(
                "search_p50_graph_only_after_scan",
                float(np.percentile(graph_scan_lat, 50)) * 1e3,
                "ms",
            ),
            _row("search_p50_exact_numpy", ep50, "ms"),
            _row("speedup_vs_exact", ep50 / p50, "x", ">= 10", ep50 / p50 >= 10),
            _row("recall_at_10", recall, "", ">= 0.98", recall >= 0.98),
        ]
        s.checkpoint()
    return rows


_OPEN_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[3])
from scripts.bench_store import _quiet, rss_bytes
_quiet()
import numpy as np
from sidecar.store import Store
before = rss_bytes()
t0 = time.perf_counter()
s = Store.open(sys.argv[1], embed_dims=int(sys.argv[2]))
opened = time.perf_counter() - t0
t0 = time.perf_counter()
s.search("user:bench", np.ones(int(sys.argv[2]), dtype=np.float32), 10)  # loads the graph
first = time.perf_counter() - t0
after = rss_bytes()
out = {"open_s": opened, "first_s": first, "rss_delta": after - before, "report": s.open_report}
print(json.dumps(out))
s.close()
"""


def bench_start_and_memory(path: Path, dims: int, n: int) -> list[Row]:
    """Start (open, then the first search, which loads the saved graph and backfills it)
    and resident memory after both, in a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", _OPEN_CHILD, str(path), str(dims), str(REPO)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    res = json.loads(out.stdout.strip().splitlines()[-1])
    per_100k = res["rss_delta"] / n * 100_000 / 2**20
    return [
        _row("start_open_s", res["open_s"], "s", "<= 3", res["open_s"] <= 3.0),
        _row("start_first_search_s", res["first_s"], "s"),
        _row("memory_per_100k", per_100k, "MiB", "<= 250", per_100k <= 250),
        _row("start_indexes_loaded", res["report"]["indexes_loaded"], ""),
    ]


def run(
    n: int = 100_000,
    dims: int = 384,
    queries: int = 200,
    threads: int = 2,
    workdir: str | None = None,
    ef_construction: int = 100,
    noise: float = 1.0,
    quick: bool = False,
) -> list[Row]:
    """All store benchmarks; returns rows. Temporary data is removed afterwards.

    ``quick`` runs 20k records instead of 100k (the targets are stated for 100k).

    ``ef_construction`` 100 (not the settings default 200) keeps a 100k run under three
    minutes on two cores; recall is unchanged on this data (see docs/store.md).
    """
    if quick:
        n = min(n, 20_000)
    _quiet()
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="bench-store-"))
    path = root / "store"
    try:
        shutil.rmtree(path, ignore_errors=True)
        data, centers = clustered(n, dims, clusters=max(10, n // 100), noise=noise)
        qs = _queries(centers, queries, noise, 0)
        rows = [
            _row("records", n, ""),
            _row("dims", dims, ""),
            _row("hnsw_ef_construction", ef_construction, ""),
        ]
        rows += bench_insert_and_build(path, data, threads, ef_construction)
        rows += bench_search(path, data, qs, threads)
        rows += bench_start_and_memory(path, dims, n)
        return rows
    finally:
        if not workdir:
            shutil.rmtree(root, ignore_errors=True)


def format_rows(rows: list[Row]) -> str:
    lines = ["| metric | value | unit | target | ok |", "|---|---|---|---|---|"]
    for r in rows:
        ok = "" if r["ok"] is None else ("yes" if r["ok"] else "NO")
        lines.append(f"| {r['metric']} | {r['value']} | {r['unit']} | {r['target']} | {ok} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dims", type=int, default=384)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--ef-construction", type=int, default=100)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.time()
    rows = run(args.n, args.dims, args.queries, args.threads, ef_construction=args.ef_construction)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(format_rows(rows))
        print(f"\n(total {time.time() - t0:.1f} s)")
    return 0 if all(r["ok"] is not False for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
