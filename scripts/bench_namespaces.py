"""`make bench-scale`, many namespaces: one daemon serving many users within its cache budget.

A SQLite store holds ``--namespaces`` namespaces of ``--memories`` memories each (every
memory written as ``ingest`` stores it: a raw turn, a history record and a durable memory,
seeded offline as ``scripts/bench_scale.py`` seeds its one namespace), and a daemon runs
on it with ``cache.max_bytes`` (``--max-bytes``, default 1 GiB). Three phases, one
``assemble`` per call, each on the namespace's own live session:

* **cold**: ``--cold`` namespaces never asked before, in random order: each call reads
  its namespace's views from the store (past the budget, the least recently used views
  are dropped to make room);
* **warm**: ``--warm`` calls on the namespaces of the last 20 cold calls (held in the
  cache), each beside a bare ``embed`` of the same prompt, alternated: the ratio is
  measured side by side;
* **random**: ``--random`` calls on a namespace drawn uniformly from all of them, the
  load the issue describes (hits and loads counted by the daemon's ``status.cache``).

The daemon's resident memory is read after every call: its most (VmRSS), its peak
(VmHWM), and both against ``max_bytes + 600 MB`` (issue 36's bound). With ``--data DIR``
the seeded store is kept there and reused by the next run with the same sizes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import random
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(1, str(REPO / "host_clients" / "python"))

from scripts import bench_assemble as BA  # noqa: E402
from scripts.bench import measured  # noqa: E402
from scripts.doc_sections import write_section  # noqa: E402

DOC = REPO / "docs" / "benchmarks.md"
MB = 1 << 20
HEADROOM_MB = 600  # issue 36: RSS within cache.max_bytes + 600 MB
RECENT = 20  # the warm phase's namespaces: the last cold ones, surely still held
SEED_FILE = "seeded.json"


@dataclass
class Phase:
    name: str
    asm: list[float] = field(default_factory=list)
    emb: list[float] = field(default_factory=list)
    hits: int = 0
    loads: int = 0

    def pct(self, q: float) -> float:
        if not self.asm:
            return 0.0
        ordered = sorted(self.asm)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Run:
    namespaces: int
    memories: int
    max_bytes: int
    seed_s: float = 0.0
    records: int = 0
    phases: list[Phase] = field(default_factory=list)
    rss_start_mb: float = 0.0  # after the models are warm, before any view is read
    rss_max_mb: float = 0.0  # the most VmRSS seen after a call
    rss_peak_mb: float = 0.0  # VmHWM at the end
    cache: dict[str, Any] = field(default_factory=dict)


def names(count: int) -> list[str]:
    return [f"user{i:05d}" for i in range(count)]


def _seed(data_dir: Path, namespaces: list[str], memories: int) -> dict[str, Any]:
    from sidecar.logging_setup import configure_logging

    configure_logging("warning")  # a spawned child: the parent's setting is not inherited
    flags = {"store.index_threads": os.cpu_count() or 1}
    n_base = min(4000, max(500, memories * len(namespaces) // 10))
    return asyncio.run(
        BA._seed_offline(data_dir, memories, n_base, flags=flags, mix=True, namespaces=namespaces)
    )


def seed(data_dir: Path, count: int, memories: int) -> float:
    """Seed the store in a child process (the writer's memory is given back before the
    daemon starts); reuse a store seeded with the same sizes. Returns the seconds spent."""
    stamp = data_dir / SEED_FILE
    wanted = {"namespaces": count, "memories": memories}
    if stamp.exists() and json.loads(stamp.read_text()) == wanted:
        print(f"== reusing the store seeded in {data_dir}", flush=True)
        return 0.0
    shutil.rmtree(data_dir, ignore_errors=True)
    print(f"== seeding {count:,} namespaces x {memories:,} memories", flush=True)
    start = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        pool.apply(_seed, (data_dir, names(count), memories))
    stamp.write_text(json.dumps(wanted))
    return time.perf_counter() - start


@contextlib.contextmanager
def daemon(tmp: Path, data_dir: Path, max_bytes: int) -> Iterator[tuple[int, str]]:
    settings = {"LIBRAVDB_COMPACTION_AUTO": "false", "LIBRAVDB_CACHE_MAX_BYTES": str(max_bytes)}
    proc, endpoint = BA._spawn(tmp, data_dir, settings)
    try:
        yield proc.pid, endpoint
    finally:
        BA.stop(proc, 60)


def _status_mb(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def drive(pid: int, endpoint: str, run: Run, args: argparse.Namespace) -> None:
    from libravdb_client import Client

    rng = random.Random(17)
    every = names(run.namespaces)
    qs = BA.prompts(args.cold + args.warm + args.random + 8, seed=41)
    with Client.connect(endpoint, timeout=900) as client:
        for q in qs[:8]:  # the models' first runs are not a namespace's cost
            client.call("embed", {"texts": [q], "kind": "query"})
        run.rss_start_mb = _status_mb(pid, "VmRSS")
        before = client.call("status")["cache"]

        def assemble(ns: str, prompt: str, phase: Phase) -> None:
            params = {"sessionId": f"live-{ns}", "namespace": ns, "prompt": prompt}
            start = time.perf_counter()
            client.call("assemble", {**params, "tokenBudget": BA.TOKEN_BUDGET})
            phase.asm.append((time.perf_counter() - start) * 1000)
            run.rss_max_mb = max(run.rss_max_mb, _status_mb(pid, "VmRSS"))

        def counted(phase: Phase, calls: Iterator[tuple[str, str]]) -> None:
            nonlocal before
            for ns, prompt in calls:
                assemble(ns, prompt, phase)
            after = client.call("status")["cache"]
            phase.hits, phase.loads = (
                after["hits"] - before["hits"],
                after["loads"] - before["loads"],
            )
            before = after
            run.phases.append(phase)
            print(f"   {phase.name}: p50 {phase.pct(0.5):.1f} ms, RSS {run.rss_max_mb:,.0f} MB")

        prompts = iter(qs[8:])
        cold = rng.sample(every, min(args.cold, len(every)))
        counted(Phase("cold"), ((ns, next(prompts)) for ns in cold))
        warm = Phase("warm")
        recent = cold[-RECENT:]
        for j in range(args.warm):
            ns, q = recent[j % len(recent)], next(prompts)
            for what in ("embed", "assemble") if j % 2 == 0 else ("assemble", "embed"):
                if what == "embed":
                    start = time.perf_counter()
                    client.call("embed", {"texts": [q], "kind": "query"})
                    warm.emb.append((time.perf_counter() - start) * 1000)
                else:
                    assemble(ns, q, warm)
        counted(warm, iter(()))
        counted(Phase("random"), ((rng.choice(every), next(prompts)) for _ in range(args.random)))
        status = client.call("status")
        run.cache = status["cache"]
        run.records = int(status["records"]["records"])
        run.rss_peak_mb = _status_mb(pid, "VmHWM")


def table(run: Run) -> str:
    bound = run.max_bytes / MB + HEADROOM_MB
    emb = statistics.median(next(p for p in run.phases if p.name == "warm").emb or [0.0])
    lines = [
        "| phase | calls | views read (loads) / held (hits) | assemble p50 / p95 | "
        "assemble p50 / embed p50 |",
        "|---|---|---|---|---|",
    ]
    for p in run.phases:
        ratio = f"{p.pct(0.5) / emb:.2f}x" if emb else "-"
        lines.append(
            f"| {p.name} | {len(p.asm):,} | {p.loads:,} / {p.hits:,} | "
            f"{p.pct(0.5):.2f} / {p.pct(0.95):.2f} ms | {ratio} |"
        )
    c = run.cache
    lines += [
        "",
        f"{run.namespaces:,} namespaces x {run.memories:,} memories ({run.records:,} records); "
        f"`cache.max_bytes` {run.max_bytes / MB:,.0f} MB; embed p50 {emb:.2f} ms (warm phase). "
        f"Daemon RSS: {run.rss_start_mb:,.0f} MB with the models warm and no view, at most "
        f"{run.rss_max_mb:,.0f} MB after a call, peak (VmHWM) {run.rss_peak_mb:,.0f} MB, "
        f"against the bound of {bound:,.0f} MB (`max_bytes` + {HEADROOM_MB} MB): "
        f"{'within' if run.rss_peak_mb <= bound else 'OVER'}. The cache at the end: "
        f"{c.get('views', 0):,} views, {c.get('bytes', 0) / MB:,.0f} MB estimated, "
        f"{c.get('loads', 0):,} loads ({c.get('loadMs', 0) / max(c.get('loads', 0), 1):.1f} "
        f"ms each on average), {c.get('evictions', 0):,} evictions.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--namespaces", type=int, default=2000)
    parser.add_argument("--memories", type=int, default=500, help="memories per namespace")
    parser.add_argument("--max-bytes", type=int, default=1 << 30, help="cache.max_bytes")
    parser.add_argument("--cold", type=int, default=600, help="calls on unasked namespaces")
    parser.add_argument("--warm", type=int, default=200, help="calls on held namespaces")
    parser.add_argument("--random", type=int, default=400, help="calls on random namespaces")
    parser.add_argument("--data", type=Path, help="keep (and reuse) the seeded store here")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if min(args.namespaces, args.memories, args.cold, args.warm) < 1 or args.max_bytes < 0:
        parser.error("--namespaces, --memories, --cold and --warm need at least 1")
    from sidecar.logging_setup import configure_logging

    configure_logging("warning")
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="bench-ns-"))
    data_dir = args.data or tmp / "data"
    run = Run(args.namespaces, args.memories, args.max_bytes)
    try:
        run.seed_s = seed(data_dir, args.namespaces, args.memories)
        with daemon(tmp, data_dir, args.max_bytes) as (pid, endpoint):
            drive(pid, endpoint, run, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    body = table(run)
    print(body)
    if not args.no_write:
        command = "python scripts/bench_namespaces.py " + shlex.join(argv or sys.argv[1:])
        took = f"{time.perf_counter() - started:.0f} s, of which {run.seed_s:.0f} s seeding"
        text = f"{measured(command, took)}\n\n{body}"
        write_section(DOC, "namespaces", text, "many namespaces")
    return 0


if __name__ == "__main__":
    sys.exit(main())
