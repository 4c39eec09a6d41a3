"""``libravdb backup PATH`` (daemon running or not) and ``libravdb restore PATH`` (daemon
stopped): the command lines; the work is in ``backup_copy`` and ``backup_restore``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

COMMANDS = (
    "backup",
    "restore",
)


def add_parser(sub: Any) -> None:
    def common(cmd: Any) -> None:
        cmd.add_argument(
            "--data-dir", metavar="DIR", help="data directory (default ~/.clawdb/data)"
        )
        cmd.add_argument("--config", metavar="FILE", help="TOML settings file")

    backup = sub.add_parser(
        "backup", help="copy the store to a new directory (works while the daemon runs)"
    )
    backup.add_argument(
        "path",
        help="the backup directory to create (must not exist; missing parent directories are "
        "created, owner-only)",
    )
    common(backup)
    restore = sub.add_parser(
        "restore", help="put a backup back into the data directory (daemon stopped)"
    )
    restore.add_argument("path", help="a directory written by `libravdb backup`")
    common(restore)
    restore.add_argument(
        "--force",
        action="store_true",
        help="replace an existing store (it is moved aside beside the data directory)",
    )


def run(args: argparse.Namespace) -> int:
    from sidecar.config import ConfigError, load_settings
    from sidecar.ops.backup_format import BackupError

    try:
        settings = load_settings({"data_dir": args.data_dir, "config_file": args.config})
    except ConfigError as exc:
        print(f"libravdb {args.command}: {exc}", file=sys.stderr)
        return 1
    if settings.store_url:
        print(
            f"libravdb {args.command}: the store is the PostgreSQL database "
            f"{settings.store_display}, which `libravdb {args.command}` does not copy: use "
            "the server's backup (pg_dump -Fc / pg_restore, docs/operations.md), or "
            "`libravdb migrate` to a sqlite: directory",
            file=sys.stderr,
        )
        return 1
    target = Path(args.path).expanduser().absolute()
    try:
        if args.command == "backup":
            line = _backup(settings.data_path, target)
        else:
            from sidecar.ops.backup_restore import restore_backup

            line = restore_backup(target, settings.data_path, force=args.force).line()
    except BackupError as exc:
        print(f"libravdb {args.command}: {exc}", file=sys.stderr)
        return 1
    print(line, file=sys.stderr)
    return 0


def _backup(data_dir: Path, target: Path) -> str:
    from sidecar.ops.backup_copy import DEFAULT_STEP_PAGES, make_backup
    from sidecar.tools import ProgressBar

    bar = ProgressBar("backing up (pages)")
    drawn = False

    def progress(done: int, total: int) -> None:
        nonlocal drawn
        # A store copied in one step needs no bar; a larger one shows pages copied.
        if total > DEFAULT_STEP_PAGES:
            drawn = True
            bar(done, total)

    summary = make_backup(data_dir, target, progress=progress)
    if drawn:
        bar.finish()
    return summary.line()
