"""``libravdb service install|uninstall|status``: run the daemon with the user's session.

A systemd user unit on Linux, a launchd agent on macOS (``--platform`` picks either
anywhere, e.g. to print a plist on Linux). The service runs the installed ``libravdbd``
with ``serve --socket`` at the socket clients look for by default
(``$HOME/.clawdb/run/libravdb.sock``), restarts it when it fails, and logs JSON to the
journal (systemd) or ``~/Library/Logs/libravdbd.log`` (launchd).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from sidecar.exit_status import EXIT_FAILED, EXIT_OK
from sidecar.ops.service_render import (
    LAUNCHD_LABEL,
    UNIT_NAME,
    Platform,
    ServiceError,
    ServiceSpec,
    installed_argv,
    launchd_log_path,
    option_value,
    render,
    unit_path,
)

COMMANDS = ("service",)
EXIT_NOT_RUNNING = 3  # `status`: the LSB code for "not running", as systemctl uses
TOOL_TIMEOUT_S = 30.0


def add_parser(sub: Any) -> None:
    service = sub.add_parser(
        "service", help="install the daemon as a user service (systemd or launchd)"
    )
    actions = service.add_subparsers(dest="action", required=True)

    def common(cmd: Any) -> None:
        cmd.add_argument(
            "--platform",
            choices=["systemd", "launchd"],
            help="service manager (default: launchd on macOS, systemd elsewhere)",
        )
        cmd.add_argument("--label", default=LAUNCHD_LABEL, help="launchd label")

    install = actions.add_parser("install", help="write the service file and start it")
    common(install)
    install.add_argument("--data-dir", metavar="DIR", help="data directory the service uses")
    install.add_argument("--config", metavar="FILE", help="TOML settings file the service uses")
    install.add_argument("--socket", metavar="PATH", help="socket path (default: the clients')")
    install.add_argument("--no-start", action="store_true", help="write the file only")
    install.add_argument(
        "--dry-run",
        "--print",
        dest="dry_run",
        action="store_true",
        help="print the service file; change nothing",
    )
    uninstall = actions.add_parser("uninstall", help="stop, disable and remove the service")
    common(uninstall)
    status = actions.add_parser("status", help="installed? enabled? does the socket answer?")
    common(status)
    status.add_argument("--endpoint", help="unix:/path or tcp:host:port (default: the unit's)")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    platform: Platform = args.platform or ("launchd" if sys.platform == "darwin" else "systemd")
    try:
        home = _home()
        target = unit_path(platform, home, os.environ.get("XDG_CONFIG_HOME", ""), args.label)
        if args.action == "install":
            return _install(args, platform, home, target, out)
        if args.action == "uninstall":
            return _uninstall(args, platform, target, out)
        return _status(args, platform, target, out)
    except (ServiceError, OSError) as exc:
        print(f"libravdb service {args.action}: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _home() -> Path:
    home = os.environ.get("HOME", "")
    if not home:
        raise ServiceError("HOME is not set: the service files live under it")
    return Path(home)


def daemon_program() -> Path:
    """The ``libravdbd`` installed beside this interpreter (the venv's console script),
    else the one on PATH: the service must run the same installation as this command."""
    beside = Path(sys.executable).parent / "libravdbd"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside.absolute()
    found = shutil.which("libravdbd")
    if found:
        return Path(found).absolute()
    raise ServiceError(
        f"no libravdbd program beside {sys.executable} or on PATH; install the package "
        "(pip install -e . in the checkout) first"
    )


def _absolute(value: str | None) -> Path | None:
    return Path(value).expanduser().absolute() if value else None


def build_spec(args: argparse.Namespace, platform: Platform, home: Path) -> ServiceSpec:
    config = _absolute(args.config)
    if config is not None and not config.is_file():
        raise ServiceError(f"config file not found: {config}")
    return ServiceSpec(
        program=daemon_program(),
        socket=_absolute(args.socket) or home / ".clawdb" / "run" / "libravdb.sock",
        data_dir=_absolute(args.data_dir),
        config=config,
        log_file=launchd_log_path(home) if platform == "launchd" else None,
        label=args.label,
    )


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` atomically (temp file, fsync, rename) with an owner-only file: it
    names the data directory and config, which are nobody else's business."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True, slots=True)
class ToolRun:
    argv: list[str]
    code: int
    output: str

    @property
    def ok(self) -> bool:
        return self.code == 0


def run_tool(argv: Sequence[str]) -> ToolRun | None:
    """Run a service manager command; None when the program is not installed."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ToolRun(list(argv), -1, str(exc))
    return ToolRun(list(argv), done.returncode, (done.stdout + done.stderr).strip())


def _start_commands(platform: Platform, target: Path, label: str) -> list[list[str]]:
    if platform == "systemd":
        return [
            ["systemctl", "--user", "daemon-reload"],
            ["systemctl", "--user", "enable", "--now", UNIT_NAME],
        ]
    return [["launchctl", "bootstrap", f"gui/{os.getuid()}", str(target)]]


def _stop_commands(platform: Platform, target: Path, label: str) -> list[list[str]]:
    if platform == "systemd":
        return [
            ["systemctl", "--user", "disable", "--now", UNIT_NAME],
            ["systemctl", "--user", "daemon-reload"],
        ]
    return [["launchctl", "bootout", f"gui/{os.getuid()}/{label}"]]


def _shell_line(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def _run_all(commands: list[list[str]], out: TextIO, *, tolerate: bool = False) -> str:
    """Run the commands in order, printing each: "ok", "missing" (the service manager is
    not installed; what to run is printed) or "failed" (stopped at the first failure,
    unless ``tolerate``)."""
    for argv in commands:
        done = run_tool(argv)
        if done is None:
            print(f"{argv[0]} is not installed here; run these yourself:", file=out)
            for line in commands:
                print(f"  {_shell_line(line)}", file=out)
            return "missing"
        print(f"ran: {_shell_line(argv)}" + ("" if done.ok else f" (exit {done.code})"), file=out)
        if not done.ok:
            if done.output:
                print(f"  {done.output.splitlines()[-1]}", file=out)
            if not tolerate:
                return "failed"
    return "ok"


def _install(
    args: argparse.Namespace, platform: Platform, home: Path, target: Path, out: TextIO
) -> int:
    spec = build_spec(args, platform, home)
    text = render(platform, spec)
    if args.dry_run:
        print(f"# would be written to {target}", file=sys.stderr)
        out.write(text)
        return EXIT_OK
    if spec.log_file is not None:
        spec.log_file.parent.mkdir(parents=True, exist_ok=True)
    existed = target.exists()
    write_private(target, text)
    print(f"{'replaced' if existed else 'wrote'} {target}", file=out)
    print(f"it runs: {_shell_line(spec.argv)}", file=out)
    commands = _start_commands(platform, target, spec.label)
    if args.no_start:
        print("not started (--no-start); to start it now and at every login run:", file=out)
        for argv in commands:
            print(f"  {_shell_line(argv)}", file=out)
        return EXIT_OK
    if platform == "launchd" and existed:
        _run_all(_stop_commands(platform, target, spec.label), out, tolerate=True)
    outcome = _run_all(commands, out)
    if outcome == "missing":
        return EXIT_OK  # nothing failed: the file is in place, what to run was printed
    if outcome == "failed":
        print(
            "the service file is in place but the service did not start; once the "
            "service manager runs for your session, run:",
            file=out,
        )
        for argv in commands:
            print(f"  {_shell_line(argv)}", file=out)
        return EXIT_FAILED
    where = "journalctl --user -u libravdbd" if platform == "systemd" else str(spec.log_file)
    print(f"started; clients find it at unix:{spec.socket}; logs: {where}", file=out)
    return EXIT_OK


def _uninstall(args: argparse.Namespace, platform: Platform, target: Path, out: TextIO) -> int:
    if not target.exists():
        print(f"not installed: no {target}", file=out)
        return EXIT_OK
    # A failed stop (the manager absent, the service not loaded) must not keep the file:
    # nothing can run under a manager that is not there.
    _run_all(_stop_commands(platform, target, args.label), out, tolerate=True)
    target.unlink()
    print(f"removed {target}", file=out)
    return EXIT_OK


def _manager_state(platform: Platform, label: str) -> dict[str, str]:
    """enabled/active as the service manager reports them ("unknown: why" without one)."""
    if platform == "systemd":
        probes = {
            "enabled": ["systemctl", "--user", "is-enabled", UNIT_NAME],
            "active": ["systemctl", "--user", "is-active", UNIT_NAME],
        }
    else:
        probes = {"loaded": ["launchctl", "print", f"gui/{os.getuid()}/{label}"]}
    state: dict[str, str] = {}
    for key, argv in probes.items():
        done = run_tool(argv)
        if done is None:
            state[key] = f"unknown ({argv[0]} is not installed)"
        elif platform == "launchd":
            state[key] = "yes" if done.ok else "no"
        else:
            first = done.output.splitlines()[0] if done.output else f"exit {done.code}"
            # is-enabled/is-active print the state; a failure to reach the manager does not
            known = first.split()[0] if first and " " not in first.strip() else ""
            state[key] = known or f"unknown ({first})"
    return state


def auth_token_for(config: str | None) -> str | None:
    """The token a daemon run with ``config`` (and this environment) expects, if any; an
    unreadable one is left for the connection to report."""
    from sidecar.config import ConfigError, load_settings
    from sidecar.server.auth import AuthConfigError, load_token

    try:
        path = load_settings({"config_file": config}).server.auth_token_file.strip()
        return load_token(path) if path else None
    except (ConfigError, AuthConfigError):
        return None


def probe_health(
    endpoint: str, auth_token: str | None = None, timeout: float = 5.0
) -> tuple[bool, str]:
    """Whether ``endpoint`` answers ``health`` with ok, and what it said."""
    from libravdb_client import Client, LibravdbError, RpcError

    try:
        with Client(endpoint, timeout=timeout, auth_token=auth_token) as client:
            health = client.health()
    except RpcError as exc:  # something answered, and said no (e.g. unauthorized)
        return False, f"refused: {exc}"
    except (LibravdbError, OSError, ValueError) as exc:
        return False, f"not reachable: {exc}"
    return bool(health.ok), health.message


def _status(args: argparse.Namespace, platform: Platform, target: Path, out: TextIO) -> int:
    from libravdb_client import default_endpoint

    argv: list[str] = []
    if target.exists():
        argv = installed_argv(platform, target.read_text(encoding="utf-8"))
        print(f"installed: yes ({target})", file=out)
        print(f"runs: {_shell_line(argv) if argv else '(no command found in the file)'}", file=out)
    else:
        print(f"installed: no ({target} does not exist)", file=out)
    for key, value in _manager_state(platform, args.label).items():
        print(f"{key}: {value}", file=out)
    socket = option_value(argv, "--socket")
    endpoint = args.endpoint or (f"unix:{socket}" if socket else default_endpoint())
    ok, message = probe_health(endpoint, auth_token_for(option_value(argv, "--config")))
    print(f"health at {endpoint}: {'ok' if ok else 'FAIL'}: {message}", file=out)
    return EXIT_OK if ok else EXIT_NOT_RUNNING
