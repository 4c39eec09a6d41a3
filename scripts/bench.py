#!/usr/bin/env python3
"""`make bench`: measure the daemon and rewrite the figures in docs/benchmarks.md.

Each section is a function returning rows; its table replaces the text between
`<!-- bench:NAME -->` markers in docs/benchmarks.md, so running one section
(`--only transport`) keeps the others' last figures. Ratios are measured side by
side in one run; absolute times depend on the (shared, noisy) machine.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DOC = REPO / "docs" / "benchmarks.md"

from scripts.doc_sections import replace_section  # noqa: E402


@dataclass
class Row:
    metric: str
    value: str
    target: str = ""
    verdict: str = ""  # "met", "missed" or ""

    @staticmethod
    def timed(
        metric: str, value: float, unit: str, target: float | None, lower_is_better: bool = True
    ) -> Row:
        verdict = ""
        target_text = ""
        if target is not None:
            ok = value <= target if lower_is_better else value >= target
            verdict = "met" if ok else "missed"
            target_text = f"{'≤' if lower_is_better else '≥'} {target:g} {unit}".strip()
        return Row(metric, f"{value:.3f} {unit}".strip(), target_text, verdict)


Section = Callable[[argparse.Namespace], list[Row]]


# -- transport -----------------------------------------------------------------------------
def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIBRAVDB_")}
    env["HOME"] = str(home)
    return env


def _spawn(tmp: Path, *args: str) -> tuple[subprocess.Popen[bytes], str, float]:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sidecar", "serve", *args, "--data-dir", str(tmp / "data")],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE if "--stdio" in args else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(tmp),
    )
    line = "" if "--stdio" in args else proc.stdout.readline().decode().strip()  # type: ignore[union-attr]
    return proc, line, time.perf_counter() - started


class _LineSocket:
    def __init__(self, endpoint: str) -> None:
        if endpoint.startswith("unix:"):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(endpoint[5:])
        else:
            host, _, port = endpoint[4:].rpartition(":")
            self.sock = socket.create_connection((host, int(port)))
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile("rb")

    def roundtrip(self, payload: bytes) -> None:
        self.sock.sendall(payload)
        self.file.readline()


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.95)]


def _health_samples(send: Callable[[], None], n: int) -> list[float]:
    for _ in range(200):
        send()
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        send()
        samples.append((time.perf_counter() - t0) * 1000)
    return samples


def bench_transport(args: argparse.Namespace) -> list[Row]:
    rows: list[Row] = []
    payload = b'{"jsonrpc":"2.0","id":1,"method":"health"}\n'
    n = args.calls
    with tempfile.TemporaryDirectory() as raw:
        tmp = Path(raw)
        for kind, flags in (
            ("unix", ("--socket", str(tmp / "b.sock"))),
            ("tcp", ("--tcp", "127.0.0.1:0")),
        ):
            proc, endpoint, _ = _spawn(tmp / kind, *flags)
            try:
                conn = _LineSocket(endpoint)
                p50, p95 = _percentiles(_health_samples(partial(conn.roundtrip, payload), n))
            finally:
                proc.terminate()
                proc.wait(10)
            target = 0.3 if kind == "unix" else None
            rows.append(Row.timed(f"health p50 over {kind}", p50, "ms", target))
            rows.append(Row.timed(f"health p95 over {kind}", p95, "ms", None))

        proc, _, _ = _spawn(tmp / "stdio", "--stdio")
        assert proc.stdin is not None and proc.stdout is not None
        stdin, stdout = proc.stdin, proc.stdout

        def stdio_roundtrip() -> None:
            stdin.write(payload)
            stdin.flush()
            stdout.readline()

        try:
            p50, p95 = _percentiles(_health_samples(stdio_roundtrip, n))
        finally:
            stdin.close()
            proc.wait(10)
        rows.append(Row.timed("health p50 over stdio", p50, "ms", None))
        rows.append(Row.timed("health p95 over stdio", p95, "ms", None))

        starts = []
        for i in range(args.starts):
            proc, endpoint, elapsed = _spawn(tmp / f"cold{i}", "--socket", str(tmp / f"c{i}.sock"))
            assert endpoint.startswith("unix:"), endpoint
            starts.append(elapsed)
            proc.terminate()
            proc.wait(10)
        rows.append(
            Row.timed(
                f"cold start to endpoint line (median of {args.starts})",
                statistics.median(starts),
                "s",
                1.5,
            )
        )
    return rows


# -- optional sections contributed by other modules ------------------------------------------
def _module_section(module_name: str) -> Section:
    def run(args: argparse.Namespace) -> list[Row]:
        module = importlib.import_module(module_name)
        rows = module.run(quick=args.quick)
        return [r if isinstance(r, Row) else _row_from_dict(r) for r in rows]

    return run


def _row_from_dict(row: dict[str, object]) -> Row:
    """Rows from section modules: {metric, value, unit?, target?, verdict? | ok?}."""
    value = row.get("value", "")
    unit = row.get("unit")
    shown = f"{value} {unit}".strip() if unit else str(value)
    verdict = str(row.get("verdict", ""))
    if not verdict and row.get("ok") is not None:
        verdict = "met" if row["ok"] else "missed"
    return Row(str(row["metric"]), shown, str(row.get("target", "")), verdict)


SECTIONS: dict[str, Section] = {
    "transport": bench_transport,
    "engines": _module_section("scripts.bench_engines"),
    "store": _module_section("scripts.bench_store"),
    "memory": _module_section("scripts.bench_memory"),
    "assemble": _module_section("scripts.bench_assemble"),
    "resident": _module_section("scripts.bench_resident"),
    "typescript": _module_section("scripts.bench_typescript"),
    "ui": _module_section("scripts.bench_ui"),
}


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{cpu}, {os.cpu_count()} cores, {mem_gib:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    )


def measured(command: str, took: str) -> str:
    """The line that opens a section of docs/benchmarks.md: when, on what machine, by
    which command, and ``took`` (how long)."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"Measured {stamp} on {_machine()} by `{command.strip()}` ({took})."


def _table(rows: list[Row]) -> str:
    lines = ["| metric | value | target | verdict |", "|---|---|---|---|"]
    lines += [f"| {r.metric} | {r.value} | {r.target} | {r.verdict} |" for r in rows]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", action="append", choices=sorted(SECTIONS), help="run a section")
    parser.add_argument("--calls", type=int, default=3000, help="round trips per transport")
    parser.add_argument("--starts", type=int, default=5, help="cold starts to time")
    parser.add_argument("--quick", action="store_true", help="smaller workloads")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    from sidecar.logging_setup import configure_logging

    configure_logging("warning")  # in-process sections must not print info logs into the table
    command = (
        "python scripts/bench.py " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "make bench"
    )

    doc = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    failures = 0
    for name in args.only or list(SECTIONS):
        print(f"== {name}", flush=True)
        started = time.perf_counter()
        try:
            rows = SECTIONS[name](args)
        except ModuleNotFoundError as exc:
            print(f"   skipped: {exc}", flush=True)
            continue
        except Exception as exc:  # keep the other sections' figures
            failures += 1
            print(f"   failed: {type(exc).__name__}: {exc}", flush=True)
            continue
        table = _table(rows)
        print(table, flush=True)
        body = f"{measured(command, f'{time.perf_counter() - started:.0f} s')}\n\n{table}"
        doc = replace_section(doc, name, body, name)
    if not args.no_write:
        DOC.parent.mkdir(exist_ok=True)
        DOC.write_text(doc)
        print(f"wrote {DOC.relative_to(REPO)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
