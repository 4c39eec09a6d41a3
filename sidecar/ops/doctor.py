"""``libravdb doctor``: is this installation healthy, and if not, what to run.

One line per check (``ok``, ``warn`` or ``FAIL``, its name, a short detail) and, under each
failure, the command that fixes it. Exit status 0 when nothing failed (warnings allowed),
1 otherwise. ``--json`` prints the same findings as one JSON object. The checks only read:
no lock is taken and nothing is changed, so it is safe beside a running daemon.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from sidecar.command_args import add_endpoint
from sidecar.exit_status import EXIT_OK, EXIT_PROBLEM

if TYPE_CHECKING:
    from sidecar.config import Settings
    from sidecar.ops.doctor_result import Check

COMMANDS = ("doctor",)


def add_parser(sub: Any) -> None:
    doctor = sub.add_parser(
        "doctor", help="check models, data directory, lock, socket, store (SQLite or PostgreSQL)"
    )
    doctor.add_argument("--data-dir", metavar="DIR", help="data directory (default ~/.clawdb/data)")
    doctor.add_argument(
        "--store", metavar="URL", help="a postgresql:// store (default: store.url, if set)"
    )
    doctor.add_argument("--config", metavar="FILE", help="TOML settings file")
    add_endpoint(doctor)
    doctor.add_argument("--json", action="store_true", help="print JSON instead of lines")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from sidecar.config import ConfigError, load_settings
    from sidecar.ops.doctor_result import fail, format_lines

    out = sys.stdout if out is None else out
    try:
        flags = {"data_dir": args.data_dir, "config_file": args.config, "store.url": args.store}
        settings = load_settings(flags)
    except ConfigError as exc:
        checks = [fail("config", str(exc), "fix the setting it names, then run doctor again")]
    else:
        checks = run_checks(settings, args.endpoint)
    healthy = all(c.status != "FAIL" for c in checks)
    if args.json:
        payload = {"ok": healthy, "checks": [c.as_dict() for c in checks]}
        print(json.dumps(payload, indent=2), file=out)
    else:
        print(format_lines(checks), file=out)
    return EXIT_OK if healthy else EXIT_PROBLEM


def run_checks(settings: Settings, endpoint: str | None) -> list[Check]:
    from sidecar.logging_setup import configure_logging
    from sidecar.ops.doctor_files import check_data_dir, check_disk, check_lock
    from sidecar.ops.doctor_models import check_models
    from sidecar.ops.doctor_result import ok, q
    from sidecar.ops.doctor_store import check_fingerprint, check_indexes

    configure_logging("error")  # the findings are the output; engine logs would repeat them
    data_dir = settings.data_path
    where = f" --data-dir {q(data_dir)}" + (
        f" --config {q(settings.config_file)}" if settings.config_file else ""
    )
    models = check_models(settings)
    if settings.store_url:
        from sidecar.ops.doctor_pg import check_postgres

        # A shared database: the SQLite file, lock and index checks do not apply; the data
        # directory holds only this daemon's local state (the authored watcher's).
        # (the fix commands read the URL from the same settings: never print it)
        where = f" --config {q(settings.config_file)}" if settings.config_file else ""
        return [
            ok("config", settings.config_file or "defaults (no config file)"),
            *models.checks,
            ok("backend", f"postgresql: {settings.store_display}"),
            check_data_dir(data_dir)
            if data_dir.exists()
            else ok("data dir", f"{data_dir} (not created yet; holds only this daemon's files)"),
            check_socket(settings, endpoint, where),
            *check_postgres(
                settings.store_url, models.fingerprint, models.profile, f"libravdb reembed{where}"
            ),
        ]
    return [
        ok("config", settings.config_file or "defaults (no config file)"),
        *models.checks,
        ok("backend", f"sqlite: {data_dir}"),
        check_data_dir(data_dir),
        check_lock(data_dir),
        check_socket(settings, endpoint, where),
        check_fingerprint(data_dir, models.fingerprint, models.profile, f"libravdb reembed{where}"),
        check_disk(data_dir),
        *check_indexes(data_dir, settings.store.exact_threshold),
    ]


def check_socket(settings: Settings, endpoint: str | None, where: str) -> Check:
    """``health`` over the endpoint (the settings' unless given), authenticated as the
    settings say the daemon expects. ``where``: the daemon's --data-dir/--config options."""
    from sidecar.ops.doctor_result import fail, ok
    from sidecar.ops.service import probe_health
    from sidecar.server.auth import AuthConfigError, load_token

    if endpoint is None and settings.server.transport == "stdio":
        return ok("socket", "stdio transport: the host starts the daemon, no socket to check")
    endpoint = endpoint or settings.resolved_endpoint
    token = None
    token_file = settings.server.auth_token_file.strip()
    if token_file:
        try:
            token = load_token(token_file)
        except AuthConfigError as exc:
            return fail("socket", f"cannot authenticate: {exc}", "fix the auth token file it names")
    answered, message = probe_health(endpoint, token)
    if answered:
        return _same_data_dir(settings, endpoint, token) or ok(
            "socket", f"{endpoint} answers health: {message}"
        )
    if message.startswith("not reachable"):
        return fail(
            "socket",
            f"{endpoint} {message}",
            f"start the daemon: libravdbd serve{where}  (or libravdb service install"
            f"{where} to run it with your session)",
        )
    if message.startswith("refused"):
        return fail(
            "socket",
            f"{endpoint} {message}",
            "give doctor the daemon's settings (--config; server.auth_token_file)",
        )
    return fail(
        "socket",
        f"{endpoint} answers, unhealthy: {message}",
        "read the daemon's log (journalctl --user -u libravdbd, or its stderr)",
    )


def _same_data_dir(settings: Settings, endpoint: str, token: str | None) -> Check | None:
    """A failure when the daemon answering at ``endpoint`` serves another data directory
    than the one doctor checks (``--data-dir ~/typo-data`` beside a daemon serving
    ``~/.clawdb/data``): its health says nothing about this one. None when they agree, or
    when the daemon does not say (``status.dataDir`` empty: an older daemon)."""
    from libravdb_client import Client, LibravdbError

    from sidecar.ops.doctor_result import fail, q

    try:
        with Client(endpoint, timeout=5.0, auth_token=token) as client:
            served = str(client.call("status", {}).get("dataDir") or "")
    except (LibravdbError, OSError, ValueError):
        return None  # it answered health a moment ago; the health line stands
    asked = settings.data_path
    if not served or _same_path(Path(served), asked):
        return None
    config = f" --config {q(settings.config_file)}" if settings.config_file else ""
    where = f" --data-dir {q(asked)}{config}"
    return fail(
        "socket",
        f"{endpoint} answers health, but that daemon serves {served}, not {asked}: its "
        f"health says nothing about {asked}",
        f"check the daemon that runs: libravdb doctor --data-dir {q(served)}; or start one "
        f"for this directory on a socket of its own: libravdbd serve{where} --socket PATH, "
        f"then libravdb doctor{where} --endpoint unix:PATH",
    )


def _same_path(a: Path, b: Path) -> bool:
    try:
        return a.expanduser().resolve() == b.expanduser().resolve()
    except OSError:
        return a == b
