"""Restarts of the daemon on a kept store, side by side with another revision's code.

A restart is what a user waits through after every upgrade or reboot, and at 1M memories
measuring one with ``bench_scale.py`` costs a new seed (11 minutes) and a first start
that builds the views' graphs (13 minutes). This script keeps the store: ``--seed N``
writes ``bench_scale.py``'s store of N memories into ``--data`` when it holds none and
runs one first start on it (the views, their BM25 terms and graphs saved beside the
store). Each round then starts this tree's daemon on it, and ``--baseline REV``'s (the
revision's tree exported with ``git archive``; both must read the same saved files), and
measures, for each (``--baseline-data DIR``: the baseline starts on that store instead, a
``cp -al`` of ``--data`` taken before this tree's first start, for a change of what is
saved beside the store, which the other revision's code would drop and rewrite):

* **endpoint**: from the process's start to its endpoint line (the store's open, which
  checks every page of the database);
* **first assemble**: the first call, which loads the views, and the peak resident
  memory (VmHWM) then;
* **warm**: ``--calls`` assembles interleaved with a bare embed of the same prompt (after
  30 to warm up; which of the two goes first alternates), p50 of each, their ratio, and
  the peak resident memory at the end.

Usage: ``python scripts/bench_restart.py --data DIR [--seed N] [--baseline REV]
[--baseline-data DIR] [--rounds 2] [--calls 150]``. Prints a table; writes nothing to
docs/.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scripts import bench_assemble as BA  # noqa: E402
from scripts import bench_scale as BS  # noqa: E402

WARM_UP = 30


@dataclass
class Start:
    code: str
    endpoint_s: float = 0.0
    first_s: float = 0.0
    first_rss_mb: float = 0.0
    asm: list[float] = field(default_factory=list)
    emb: list[float] = field(default_factory=list)
    rss_mb: float = 0.0


@contextlib.contextmanager
def _tree(rev: str) -> Iterator[Path]:
    """``rev``'s tree in a temporary directory (``REPO`` itself for this tree: '')."""
    if not rev:
        yield REPO
        return
    with tempfile.TemporaryDirectory(prefix="bench-restart-") as tmp:
        tree = subprocess.run(
            ["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=tree, check=True)
        yield Path(tmp)


def _start(code: Path, home: Path, data: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The daemon of the tree at ``code`` on ``data`` (``python -m sidecar`` from that
    directory imports its own package)."""
    with contextlib.chdir(code):
        return BS._spawn(home, data, [])


def measure(code: Path, label: str, home: Path, data: Path, calls: int) -> Start:
    from libravdb_client import Client

    start = Start(label)
    began = time.perf_counter()
    proc, endpoint = _start(code, home, data)
    start.endpoint_s = time.perf_counter() - began
    try:
        with Client.connect(endpoint, timeout=1800) as client:
            base = {"sessionId": BA.LIVE, "namespace": BA.NS, "tokenBudget": BA.TOKEN_BUDGET}
            began = time.perf_counter()
            client.call("assemble", {**base, "prompt": BA.prompts(1, seed=47)[0]})
            start.first_s = time.perf_counter() - began
            start.first_rss_mb = BS._peak_rss_mb(proc.pid)
            BA._wait_idle(proc.pid, limit_s=1800.0)
            prompts = BA.prompts(WARM_UP + calls, seed=41)
            for q in prompts[:WARM_UP]:
                client.call("assemble", {**base, "prompt": q})
            for i, q in enumerate(prompts[WARM_UP:]):
                pair: list[tuple[list[float], str, dict[str, object]]] = [
                    (start.emb, "embed", {"texts": [q], "kind": "query"}),
                    (start.asm, "assemble", {**base, "prompt": q}),
                ]
                for times, method, params in pair[:: 1 if i % 2 else -1]:
                    began = time.perf_counter()
                    client.call(method, params)
                    times.append((time.perf_counter() - began) * 1000)
            start.rss_mb = BS._peak_rss_mb(proc.pid)
    finally:
        BA.stop(proc, 120)
    return start


def first_start(home: Path, data: Path) -> None:
    """One daemon on a freshly seeded store: its views loaded, their graphs built and
    everything saved beside the store, as a restart finds it."""
    from libravdb_client import Client

    proc, endpoint = _start(REPO, home, data)
    try:
        with Client.connect(endpoint, timeout=3600) as client:
            base = {"sessionId": BA.LIVE, "namespace": BA.NS, "tokenBudget": BA.TOKEN_BUDGET}
            client.call("assemble", {**base, "prompt": BA.prompts(1, seed=47)[0]})
            BS._wait_graphs(client, BS.Point("sqlite", 0))
            BA._wait_idle(proc.pid, limit_s=3600.0)
    finally:
        BA.stop(proc, 300)


def table(starts: list[Start]) -> str:
    lines = [
        "| code | endpoint after | first assemble (peak RSS) | assemble p50 | embed p50 "
        "| assemble / embed | peak RSS at the end |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in starts:
        a50 = statistics.median(s.asm) if s.asm else 0.0
        e50 = statistics.median(s.emb) if s.emb else 0.0
        ratio = f"{a50 / e50:.2f}x" if e50 else "-"
        lines.append(
            f"| {s.code} | {s.endpoint_s:.1f} s | {s.first_s:.1f} s ({s.first_rss_mb:,.0f} MB) "
            f"| {a50:.2f} ms | {e50:.2f} ms | {ratio} | {s.rss_mb:,.0f} MB |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, required=True, help="the kept store")
    parser.add_argument("--seed", type=int, default=0, help="seed this many memories first")
    parser.add_argument("--baseline", default="", help="also start this git revision's code")
    parser.add_argument(
        "--baseline-data", type=Path, default=None, help="the baseline's copy of the store"
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--calls", type=int, default=150, help="warm assembles a start")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.calls < 1 or args.seed < 0:
        parser.error("--rounds and --calls need at least 1, --seed no less than 0")
    base_data = args.baseline_data or args.data
    if args.baseline_data is not None and not (base_data / "store.sqlite3").exists():
        parser.error(f"{base_data} holds no store (--baseline-data: a copy of --data)")
    from sidecar.logging_setup import configure_logging

    configure_logging("warning")
    with tempfile.TemporaryDirectory(prefix="bench-restart-home-") as tmp:
        home = Path(tmp)
        if not (args.data / "store.sqlite3").exists():
            if not args.seed:
                parser.error(f"{args.data} holds no store: give --seed N to write one")
            print(f"== seeding {args.seed:,} memories into {args.data}", flush=True)
            n_base = min(4000, max(500, args.seed // 10))
            BS._seed_in_child(args.data, args.seed, n_base, {"store.index_threads": 2})
            print("== the first start (views loaded, graphs built, all saved)", flush=True)
            first_start(home, args.data)
        starts: list[Start] = []
        with _tree(args.baseline) as base_code:
            for r in range(args.rounds):
                print(f"== round {r + 1} of {args.rounds}", flush=True)
                starts.append(measure(REPO, "this tree", home, args.data, args.calls))
                if args.baseline:
                    label = args.baseline
                    starts.append(measure(base_code, label, home, base_data, args.calls))
    print(table(starts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
