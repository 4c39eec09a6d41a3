"""``libravdb memory list|get|update|forget``: see and correct what the memory keeps, from
a shell, through the running daemon.

Tables on stdout (``--json`` prints the results as JSON instead); errors on stderr, in the
flags' terms (``--limit must be at most 500``, not the wire's ``$.limit``). Exit status:
0 ok; 1 the daemon refused, or ``forget`` found nothing for something it was given (a
``--message`` or ``--record`` that does not exist, a ``--query`` without matches: what
was found is still forgotten); 2 no answer from the daemon, or unusable arguments.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from libravdb_client import Client, LibravdbError, RpcError

from sidecar.command_args import add_endpoint
from sidecar.console_input import format_json
from sidecar.endpoints import connect_failure, resolve_auth_token, resolve_endpoint
from sidecar.exit_status import EXIT_OK, EXIT_RPC_ERROR
from sidecar.ops.cli_terms import in_flag_terms, since_ms, until_ms

TEXT_WIDTH = 80
SCOPES = ("durable", "history", "summary", "elevated", "dream")


COMMANDS = ("memory",)

EXIT_STATUS = (
    "exit status: 0 ok; 1 the daemon refused, or forget found nothing for a --message, "
    "--record or --query it was given (what was found is still forgotten); 2 no answer "
    "from the daemon, or unusable arguments"
)
_WHEN = (
    "ISO 8601 (2026-08-01, 2026-08-01T09:30, ...+02:00; UTC unless an offset is given) or "
    "epoch milliseconds"
)

# The wire fields each action sends, by the flag (or argument) they came from: the
# daemon's refusals name fields, the user typed flags.
_NAMESPACE = {"namespace": "--user", "userId": "--user"}
FLAGS: dict[str, dict[str, str]] = {
    "list": {
        **_NAMESPACE,
        "sessionId": "--session",
        "scope": "--scope",
        "since": "--since",
        "until": "--until",
        "limit": "--limit",
        "includeSuperseded": "--superseded",
    },
    "get": {**_NAMESPACE, "collection": "COLLECTION", "id": "ID"},
    "update": {**_NAMESPACE, "collection": "COLLECTION", "id": "ID", "text": "TEXT"},
    "forget": {
        **_NAMESPACE,
        "messageIds": "--message",
        "records": "--record",
        "query": "--query",
        "limit": "--limit",
    },
}


def add_parser(sub: Any) -> None:
    memory = sub.add_parser(
        "memory", help="list, show, correct or forget memories", epilog=EXIT_STATUS
    )
    actions = memory.add_subparsers(dest="action", required=True)

    def common(cmd: Any, *, namespace_required: bool = True) -> None:
        cmd.add_argument(
            "--user", "--namespace", dest="user", required=namespace_required, metavar="NS"
        )
        add_endpoint(cmd)
        cmd.add_argument("--json", action="store_true", help="print JSON instead of a table")

    lst = actions.add_parser("list", help="records of one scope, newest first", epilog=EXIT_STATUS)
    common(lst, namespace_required=False)
    lst.add_argument("--scope", choices=SCOPES, default="durable")
    lst.add_argument(
        "--session", metavar="SID", help="only this session's records (--user or --session)"
    )
    lst.add_argument(
        "--since", type=since_ms, metavar="WHEN", help=f"records at or after WHEN: {_WHEN}"
    )
    lst.add_argument(
        "--until",
        type=until_ms,
        metavar="WHEN",
        help="records at or before WHEN (a date alone: through its end)",
    )
    lst.add_argument("--limit", type=int, default=50, help="records per page (1..500; 50)")
    lst.add_argument("--all", action="store_true", help="every page, not just the first")
    lst.add_argument("--superseded", action="store_true", help="include corrected versions")
    get = actions.add_parser("get", help="one record, in full", epilog=EXIT_STATUS)
    common(get)
    get.add_argument("collection")
    get.add_argument("id")
    upd = actions.add_parser(
        "update", help="replace a durable fact's text (old one kept)", epilog=EXIT_STATUS
    )
    common(upd)
    upd.add_argument("collection", help="user:<ns> or turns:<ns>")
    upd.add_argument("id")
    upd.add_argument("text")
    fgt = actions.add_parser(
        "forget", help="forget messages, records or a query's matches", epilog=EXIT_STATUS
    )
    common(fgt)
    fgt.add_argument("--message", action="append", default=[], metavar="ID")
    fgt.add_argument("--record", action="append", default=[], metavar="COLLECTION/ID")
    fgt.add_argument("--query", metavar="TEXT")
    fgt.add_argument("--limit", type=int, default=1, help="matches of --query (default 1)")
    fgt.add_argument("--dry-run", action="store_true", help="list what would go; change nothing")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    try:
        with Client(
            resolve_endpoint(args.endpoint), timeout=60.0, auth_token=resolve_auth_token()
        ) as client:
            return _ACTIONS[args.action](client, args, out)
    except RpcError as exc:
        message = in_flag_terms(exc.message, FLAGS[args.action])
        print(f"libravdb memory {args.action}: {message}", file=sys.stderr)
        if exc.data is not None:
            print(format_json(exc.data), file=sys.stderr)
        return EXIT_RPC_ERROR
    except (LibravdbError, ValueError) as exc:
        return connect_failure(exc, sys.stderr)


def _namespace(args: argparse.Namespace) -> dict[str, Any]:
    return {"namespace": args.user} if args.user else {}


def _list(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    params: dict[str, Any] = {**_namespace(args), "scope": args.scope, "limit": args.limit}
    optional = {"sessionId": args.session, "since": args.since, "until": args.until}
    params.update({k: v for k, v in optional.items() if v is not None})
    if args.superseded:
        params["includeSuperseded"] = True
    records: list[dict[str, Any]] = []
    total = 0
    while True:
        page = client.call("memory.list", params)
        records += page["records"]
        total = page["total"]
        if not args.all or not page["nextCursor"]:
            break
        params["cursor"] = page["nextCursor"]
    if args.json:
        print(format_json({"records": records, "total": total}), file=out)
        return EXIT_OK
    print(format_records(records), file=out)
    more = f" (first {len(records)}; --all for every page)" if len(records) < total else ""
    print(f"{total} record(s) in {args.scope}{more}", file=out)
    return EXIT_OK


def _get(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    res = client.call(
        "memory.get", {**_namespace(args), "collection": args.collection, "id": args.id}
    )
    print(format_json(res["record"]) if args.json else format_record(res["record"]), file=out)
    return EXIT_OK


def _update(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    params = {
        **_namespace(args),
        "collection": args.collection,
        "id": args.id,
        "text": args.text,
    }
    res = client.call("memory.update", params)
    if args.json:
        print(format_json(res), file=out)
        return EXIT_OK
    rec, prev = res["record"], res["previous"]
    print(
        f"updated {rec['collection']}/{rec['id']} (revision {rec['metadata']['revision']})",
        file=out,
    )
    if prev is not None:
        print(f"kept the old text as {prev['id']}: {_clip(prev['text'])}", file=out)
    return EXIT_OK


def _forget(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    if not (args.message or args.record or args.query):
        raise ValueError(
            "name what to forget: --message, --record or --query (a whole namespace: "
            "libravdb call forget namespace=NS includeSessions=true)"
        )
    records = []
    for ref in args.record:
        coll, sep, rid = ref.rpartition("/")
        if not sep or not coll or not rid:
            raise ValueError(f"--record wants COLLECTION/ID, got {ref!r}")
        records.append({"collection": coll, "id": rid})
    params: dict[str, Any] = {**_namespace(args), "dryRun": args.dry_run}
    if args.message:
        params["messageIds"] = args.message
    if records:
        params["records"] = records
    if args.query:
        params["query"], params["limit"] = args.query, args.limit
    res = client.call("forget", params)
    missed = _misses(args, res)
    if args.json:
        print(format_json(res), file=out)
    else:
        _print_forget(res, out)
    for line in missed:
        print(f"libravdb memory forget: {line}", file=sys.stderr)
    return EXIT_RPC_ERROR if missed else EXIT_OK


def _misses(args: argparse.Namespace, res: dict[str, Any]) -> list[str]:
    """What was named and not found: a refusal of its own (exit status 1), since a script
    that forgets a message by a mistyped id must not believe it is gone."""
    lines = [
        f"not found: {miss['collection'] + '/' if miss['collection'] else ''}{miss['id']}"
        for miss in res["missing"]
    ]
    # (with ids too, the items do not say which came from the query: only none at all counts)
    if args.query and not res["items"]:
        lines.append(f"nothing clearly matches --query {args.query!r}")
    return lines


def _print_forget(res: dict[str, Any], out: TextIO) -> None:
    verb = "would forget" if res["dryRun"] else "forgot"
    for item in res["items"]:
        where = f"session {item['sessionId']}" if item["sessionId"] else item["collection"]
        print(
            f"{verb} {item['id']} ({where}, {item['copies']} copies): {_clip(item['text'])}",
            file=out,
        )
    rebuilt = res["summariesRebuilt"]
    print(f"{res['deleted']} record(s), {rebuilt} summary(ies) rebuilt", file=out)


_ACTIONS: dict[str, Callable[[Client, argparse.Namespace, TextIO], int]] = {
    "list": _list,
    "get": _get,
    "update": _update,
    "forget": _forget,
}


def _clip(text: str, width: int = TEXT_WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _when(ts: object) -> str:
    if not isinstance(ts, int):
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts / 1000))


def format_records(records: list[dict[str, Any]]) -> str:
    """One line per record: when (UTC), where, id, the text clipped."""
    rows = [("when (UTC)", "collection", "id", "text")]
    rows += [(_when(r.get("ts")), r["collection"], r["id"], _clip(r["text"])) for r in records]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r[:3])) + "  " + r[3] for r in rows
    )


def format_record(rec: dict[str, Any]) -> str:
    lines = [
        f"{rec['collection']}/{rec['id']}",
        f"  when     {_when(rec.get('ts'))} UTC",
        f"  kind     {rec['kind']}   role {rec['role'] or '-'}   session {rec['sessionId'] or '-'}",
        "",
        rec["text"],
    ]
    return "\n".join(lines)
