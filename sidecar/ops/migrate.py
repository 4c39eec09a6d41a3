"""``libravdb migrate --from LOCATION --to LOCATION``: move a store between the embedded
SQLite backend and PostgreSQL (either way, or between two databases or directories).

1. The source's identity (fingerprint, model, dimension) is read from its ``meta``; both
   ends are opened with it. A SQLite end is opened as the daemon opens it, taking its
   ``LOCK``: a daemon serving that directory makes the command stop (stop it first). A
   PostgreSQL source must not be written meanwhile either: stop the daemons on it.
2. The target must be **empty** (no collection, no tombstone): migrate never merges into
   or overwrites a store. To redo a migration, point it at a new directory or database
   (``dropdb``/``createdb``), so that a typo cannot replace a store.
3. The copy (``migrate_copy``) shows progress on stderr (records/s, ETA), then the check
   (``migrate_verify``) compares the counts of every collection and a sample of records,
   vectors bit for bit. Exit status 0 when both agree, 1 with the differences otherwise.

Vector indexes are not copied: a daemon builds them when it starts on the new store.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from sidecar.exit_status import EXIT_FAILED, EXIT_OK

COMMANDS = ("migrate",)


def add_parser(sub: Any) -> None:
    cmd = sub.add_parser(
        "migrate",
        help="copy a store to another backend: sqlite:DIR <-> postgresql://... (daemons stopped)",
    )
    cmd.add_argument(
        "--from", dest="source", required=True, metavar="LOCATION", help="sqlite:DIR or URL"
    )
    cmd.add_argument(
        "--to", dest="target", required=True, metavar="LOCATION", help="sqlite:DIR or URL"
    )
    cmd.add_argument(
        "--sample",
        type=int,
        default=200,
        metavar="N",
        help="records compared one by one at the end (default 200)",
    )
    cmd.add_argument("--seed", type=int, default=0, help="the sample's random seed (default 0)")


def run(args: argparse.Namespace) -> int:
    from sidecar.logging_setup import configure_logging
    from sidecar.ops.migrate_open import MigrateError
    from sidecar.store.errors import StoreError

    configure_logging("warning")
    try:
        line = migrate(args.source, args.target, sample=max(0, args.sample), seed=args.seed)
    except MigrateError as exc:
        _say(f"libravdb migrate: {exc}")
        return EXIT_FAILED
    except StoreError as exc:
        _say(f"libravdb migrate: {exc.message}")
        return EXIT_FAILED
    _say(line)
    return EXIT_OK


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def migrate(source: str, target: str, *, sample: int = 200, seed: int = 0) -> str:
    """Copy and verify (module doc); the summary line, or MigrateError."""
    from sidecar.ops.migrate_copy import Progress, copy_store, record_keys
    from sidecar.ops.migrate_open import (
        MigrateError,
        open_end,
        parse_location,
        read_identity,
    )
    from sidecar.ops.migrate_verify import describe, verify

    src, dst = parse_location(source), parse_location(target)
    if src.same_as(dst):
        raise MigrateError("--from and --to name the same store")
    ident = read_identity(src)
    if not ident.exists or ident.embed_dims < 1:
        raise MigrateError(f"no store at {src.shown} (nothing to migrate)")
    there = read_identity(dst)
    if there.fingerprint and ident.fingerprint and there.fingerprint != ident.fingerprint:
        raise MigrateError(
            f"{dst.shown} holds vectors of another model ({there.model or there.fingerprint[:12]}"
            f"); migrate into an empty directory or database"
        )
    with open_end(src, ident, ident.embed_dims) as s, open_end(dst, ident, ident.embed_dims) as t:
        if t.collections() or t.list_tombstones():
            raise MigrateError(
                f"{dst.shown} is not empty ({t.total_records()} records in "
                f"{len(t.collections())} collections); migrate never merges into a store: "
                "give a new directory, or a new database (createdb)"
            )
        keys = record_keys(s)
        _say(
            f"migrate: copying {len(keys):,} records in {len(s.collections())} collections "
            f"from {src.shown} to {dst.shown}"
        )
        copied = copy_store(s, t, keys, Progress(len(keys)))
        checked = verify(s, t, keys, sample=sample, seed=seed)
    if not checked.ok:
        raise MigrateError(
            f"the copy in {dst.shown} does not match the source: {describe(checked)}"
        )
    return (
        f"migrated {copied.records:,} records in {copied.collections} collections and "
        f"{copied.tombstones:,} tombstones from {src.shown} to {dst.shown} in "
        f"{copied.seconds:.1f} s ({copied.rate:,.0f} records/s); verified: the counts of "
        f"{checked.collections} collections, {checked.sampled} sampled records (vectors "
        f"bit for bit), fingerprint {ident.fingerprint[:12] or '(none)'}"
    )
