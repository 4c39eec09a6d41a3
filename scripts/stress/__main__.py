"""`make stress` (``python -m scripts.stress``): every part at full size, figures written to
docs/benchmarks.md § reliability. ``--only fuzz,crash`` runs some parts (the others keep
their last figures only if the whole section is rewritten later: run all before
committing figures). Exit status 1 when any promise failed."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from scripts.doc_sections import write_section
from scripts.stress.common import Report
from scripts.stress.crash import run_crash
from scripts.stress.faults import run_faults
from scripts.stress.fuzz import run_fuzz
from scripts.stress.pg_kill import run_pg_kill
from scripts.stress.soak import run_soak

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "benchmarks.md"


def _parts(args: argparse.Namespace) -> dict[str, Callable[[Path], Report]]:
    return {
        "fuzz": lambda t: run_fuzz(t, frames=args.frames, seed=args.seed),
        "crash": lambda t: run_crash(t, kills=args.kills, seed=args.seed),
        "soak": lambda t: run_soak(t, clients=args.clients, seconds=args.seconds),
        "faults": run_faults,
        "pgkill": lambda t: run_pg_kill(t, kills=args.pg_kills, seed=args.seed),
    }


def _cell(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text.replace("|", "\\|")


def render(reports: list[Report], command: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    lines = [
        f"`{command}` ({stamp}, {platform.machine()}, {platform.python_version()}): the real "
        "daemon process; a part passes when its promise held in every case.",
        "",
    ]
    for r in reports:
        lines += [
            f"**{r.name}**: {'passed' if r.ok else 'FAILED'}",
            "",
            "| figure | value |",
            "|---|---|",
        ]
        lines += [f"| {k} | {_cell(v)} |" for k, v in r.figures.items()]
        lines += [f"| failure | {_cell(f)} |" for f in r.failures[:10]]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.stress", description=__doc__)
    ap.add_argument("--only", default="fuzz,crash,soak,faults,pgkill")
    ap.add_argument("--frames", type=int, default=10_000)
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--pg-kills", type=int, default=20, help="pgkill: daemons killed")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-write", action="store_true", help="print, do not touch the docs")
    args = ap.parse_args(argv)
    parts = _parts(args)
    chosen = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in parts]
    if unknown:
        ap.error(f"unknown part(s) {unknown}; known: {', '.join(parts)}")
    reports = []
    for name in chosen:
        started = time.perf_counter()
        print(f"stress: {name} ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix=f"stress-{name}-") as tmp:
            report = parts[name](Path(tmp))
        took = time.perf_counter() - started
        print(
            f"stress: {name} {'passed' if report.ok else 'FAILED'} in {took:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        for f in report.failures:
            print(f"  {f}", file=sys.stderr)
        reports.append(report)
    command = (
        "make stress"
        if argv is None and len(sys.argv) == 1
        else ("python -m scripts.stress " + " ".join(sys.argv[1:] if argv is None else argv))
    )
    block = render(reports, command)
    print(block)
    if not args.no_write and chosen == list(parts):
        write_section(DOC, "reliability", block, "Reliability")
        print(f"wrote {DOC.relative_to(REPO)}", file=sys.stderr)
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    raise SystemExit(main())
