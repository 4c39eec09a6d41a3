"""``libravdb stats``: what the memory holds, asked of the running daemon (``memory.stats``).

Text on stdout: the store's totals and size on disk, authored rules per tier, then per
namespace its records per scope, sessions, summaries per DAG level and a chart of records
over time (one row per month, week or day, with a bar of block characters; at most 260
rows, the newest). ``--json`` prints the RPC result instead. Exit statuses as the
console's: 0 ok, 1 refused (also: the namespace asked for has no records), 2 no answer.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from sidecar.command_args import add_endpoint

COMMANDS = ("stats",)

BAR_WIDTH = 30
# Longer runs of empty buckets are folded into one line.
EMPTY_RUN = 2
# Eighths of a block, so that small differences between rows still show.
_PARTIAL = " ▏▎▍▌▋▊▉"
_FULL = "█"


def add_parser(sub: Any) -> None:
    stats = sub.add_parser(
        "stats", help="records per namespace and scope, summaries, size, a chart over time"
    )
    stats.add_argument(
        "--namespace", "--user", dest="namespace", metavar="NS", help="only this namespace"
    )
    stats.add_argument(
        "--by",
        choices=["month", "week", "day"],
        default="month",
        help="the chart's rows: calendar months (default), ISO weeks or days (UTC); at most "
        "260 rows, the newest (older records are counted as 'earlier')",
    )
    add_endpoint(stats)
    stats.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from libravdb_client import Client, LibravdbError, RpcError

    from sidecar.console_input import format_json
    from sidecar.endpoints import connect_failure, resolve_auth_token, resolve_endpoint
    from sidecar.exit_status import EXIT_OK, EXIT_RPC_ERROR
    from sidecar.ops.cli_terms import in_flag_terms

    out = sys.stdout if out is None else out
    params: dict[str, Any] = {"bucket": args.by}
    if args.namespace:
        params["namespace"] = args.namespace
    try:
        with Client(
            resolve_endpoint(args.endpoint), timeout=120.0, auth_token=resolve_auth_token()
        ) as client:
            result: dict[str, Any] = client.call("memory.stats", params)
            if args.namespace and not result["namespaces"][0]["records"]:
                known = client.call("memory.stats", {"bucket": args.by})["namespaces"]
                names = ", ".join(n["namespace"] for n in known[:20]) or "none"
                print(
                    f"libravdb stats: namespace {args.namespace!r} has no records; "
                    f"namespaces in this store: {names}",
                    file=sys.stderr,
                )
                return EXIT_RPC_ERROR
    except RpcError as exc:
        message = in_flag_terms(exc.message, {"namespace": "--namespace", "bucket": "--by"})
        print(f"libravdb stats: {message}", file=sys.stderr)
        return EXIT_RPC_ERROR
    except (LibravdbError, ValueError) as exc:
        return connect_failure(exc, sys.stderr)
    print(format_json(result) if args.json else format_stats(result), file=out)
    return EXIT_OK


def format_stats(result: dict[str, Any]) -> str:
    disk = result["disk"]
    auth = result["authored"]
    lines = [
        f"store: {result['records']} records in {result['collections']} collections, "
        f"{human_bytes(disk['totalBytes'])} on disk (database "
        f"{human_bytes(disk['databaseBytes'])}, WAL {human_bytes(disk['walBytes'])}, "
        f"indexes {human_bytes(disk['indexBytes'])})",
        f"authored rules: {auth['documents']} document(s); {auth['hard']} hard, "
        f"{auth['soft']} soft, {auth['variant']} variant",
    ]
    if not result["namespaces"]:
        lines.append("no namespace has records yet")
    for ns in result["namespaces"]:
        lines += ["", *format_namespace(ns, result["bucket"])]
    return "\n".join(lines)


def format_namespace(ns: dict[str, Any], bucket: str) -> list[str]:
    span = ""
    if ns["firstTs"] is not None:
        span = f", {_day(ns['firstTs'])} .. {_day(ns['lastTs'])}"
    superseded = f" (+{ns['superseded']} superseded)" if ns["superseded"] else ""
    lines = [
        f"namespace {ns['namespace']}: {ns['records']} records, {ns['sessions']} session(s){span}",
        f"  durable {ns['durable']}{superseded}, history {ns['history']}, summary "
        f"{ns['summary']}, elevated {ns['elevated']}, dream {ns['dream']}",
    ]
    if ns.get("outOfRange"):
        lines.append(
            f"  {ns['outOfRange']} record(s) dated outside 1970-01-01 .. 9999-12-31 (stored "
            "before ingest checked ts): counted above, not in the chart"
        )
    if ns["summaryLevels"]:
        levels = ", ".join(f"level {lv['level']}: {lv['count']}" for lv in ns["summaryLevels"])
        lines.append(f"  summaries: depth {ns['depth']} ({levels})")
    if ns["timeline"]:
        lines.append(
            f"  records by {bucket}" + (f" ({ns['earlier']} earlier)" if ns["earlier"] else "")
        )
        lines += ["    " + row for row in chart_rows(ns["timeline"], bucket)]
    return lines


def chart_rows(timeline: list[dict[str, Any]], bucket: str = "month") -> list[str]:
    """One row per bucket: its label, a bar scaled to the largest bucket, the count. A run
    of more than ``EMPTY_RUN`` empty buckets is one line saying how many there were."""
    peak = max((b["records"] for b in timeline), default=0)
    width = max(len(b["label"]) for b in timeline)
    digits = len(str(peak))
    rows: list[str] = []
    empty: list[str] = []

    def flush() -> None:
        if len(empty) > EMPTY_RUN:
            rows.append(f"{'':<{width}}  ... {len(empty)} {bucket}s without records ...")
        else:
            rows.extend(empty)
        empty.clear()

    for b in timeline:
        row = f"{b['label']:<{width}}  {bar(b['records'], peak)} {b['records']:>{digits}}"
        if b["records"]:
            flush()
            rows.append(row)
        else:
            empty.append(row)
    flush()
    return rows


def bar(value: int, peak: int, width: int = BAR_WIDTH) -> str:
    """A bar of ``value / peak * width`` cells in eighth-block steps, padded to ``width``;
    a non-zero value always shows at least one eighth."""
    if peak <= 0 or value <= 0:
        return " " * width
    eighths = max(1, round(value / peak * width * 8))
    full, rest = divmod(eighths, 8)
    text = _FULL * full + (_PARTIAL[rest] if rest else "")
    return text.ljust(width)


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _day(ms: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ms / 1000))
