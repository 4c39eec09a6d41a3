"""The service files of `libravdb service`: a systemd user unit and a launchd agent.

Rendering is a pure function of a :class:`ServiceSpec` (no environment, no file system),
so both formats can be produced and checked on any platform. Arguments are quoted for
systemd's own command-line syntax (not a shell's) and XML-escaped for the plist, so paths
with spaces, quotes, ``%`` or ``$`` arrive at the daemon unchanged.
"""

from __future__ import annotations

import plistlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Platform = Literal["systemd", "launchd"]

UNIT_NAME = "libravdbd.service"
LAUNCHD_LABEL = "org.libravdb.libravdbd"
LOG_FILE_NAME = "libravdbd.log"
# Restart on failure, but a daemon that cannot start (a bad setting, a locked store) must
# not spin: systemd gives up after 5 failed starts in a minute, launchd waits 10 s.
RESTART_DELAY_S = 2
START_LIMIT_BURST = 5
START_LIMIT_INTERVAL_S = 60
LAUNCHD_THROTTLE_S = 10
PRIVATE_UMASK = 0o077


class ServiceError(Exception):
    """A service file cannot be rendered or managed; printed as one line, exit 1."""


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """What the service runs: ``program`` (absolute) followed by ``args``."""

    program: Path
    socket: Path
    data_dir: Path | None = None
    config: Path | None = None
    log_file: Path | None = None  # launchd only: systemd sends stderr to the journal
    label: str = LAUNCHD_LABEL

    @property
    def argv(self) -> list[str]:
        """The daemon's full command line. JSON logs: the journal and the log file keep
        one object per line whatever a terminal would have chosen."""
        argv = [str(self.program), "serve", "--socket", str(self.socket), "--log-format", "json"]
        if self.data_dir is not None:
            argv += ["--data-dir", str(self.data_dir)]
        if self.config is not None:
            argv += ["--config", str(self.config)]
        return argv


def _check_arg(arg: str) -> None:
    if any(ord(ch) < 0x20 or ch == "\x7f" for ch in arg):
        raise ServiceError(f"argument {arg!r} contains a control character")


def systemd_quote(arg: str) -> str:
    """One argument in systemd's ExecStart syntax: double-quoted, backslash and quote
    escaped, and ``%`` / ``$`` doubled so that neither specifiers nor variables expand."""
    _check_arg(arg)
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("%", "%%").replace("$", "$$") + '"'


def systemd_split(line: str) -> list[str]:
    """The arguments systemd reads from an ExecStart value written by :func:`systemd_quote`
    (or bare words): the inverse, so tests and ``status`` see what systemd will run."""
    words: list[str] = []
    i, n = 0, len(line)
    while i < n:
        if line[i].isspace():
            i += 1
            continue
        word: list[str] = []
        quote = line[i] if line[i] in "\"'" else ""
        i += 1 if quote else 0
        while i < n:
            ch = line[i]
            if quote and ch == quote:
                i += 1
                break
            if not quote and ch.isspace():
                break
            if ch == "\\" and i + 1 < n:
                word.append(line[i + 1])
                i += 2
                continue
            if ch in "%$" and i + 1 < n and line[i + 1] == ch:
                i += 1  # %% and $$ are the literal characters
            word.append(ch)
            i += 1
        else:
            if quote:
                raise ServiceError(f"unterminated quote in {line!r}")
        words.append("".join(word))
    return words


def render_systemd(spec: ServiceSpec) -> str:
    exec_start = " ".join(systemd_quote(arg) for arg in spec.argv)
    return "\n".join(
        [
            "# Written by `libravdb service install`; `libravdb service uninstall` removes it.",
            "[Unit]",
            "Description=libravdb memory daemon",
            f"StartLimitIntervalSec={START_LIMIT_INTERVAL_S}",
            f"StartLimitBurst={START_LIMIT_BURST}",
            "",
            "[Service]",
            "Type=simple",
            f"ExecStart={exec_start}",
            "Restart=on-failure",
            f"RestartSec={RESTART_DELAY_S}",
            f"UMask={PRIVATE_UMASK:04o}",
            # stdout carries only the endpoint line; stderr the JSON log: both to the journal
            "StandardOutput=journal",
            "StandardError=journal",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )


def render_launchd(spec: ServiceSpec) -> str:
    for arg in spec.argv:
        _check_arg(arg)
    plist: dict[str, object] = {
        "Label": spec.label,
        "ProgramArguments": spec.argv,
        "RunAtLoad": True,
        # restart when it exits with a failure status or is killed, not after `shutdown`
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": LAUNCHD_THROTTLE_S,
        "ProcessType": "Background",
        "Umask": PRIVATE_UMASK,
    }
    if spec.log_file is not None:
        plist["StandardErrorPath"] = str(spec.log_file)
        plist["StandardOutPath"] = str(spec.log_file)
    return plistlib.dumps(plist, sort_keys=False).decode("utf-8")


def render(platform: Platform, spec: ServiceSpec) -> str:
    return render_systemd(spec) if platform == "systemd" else render_launchd(spec)


def unit_path(platform: Platform, home: Path, xdg_config_home: str = "", label: str = "") -> Path:
    """Where the service file goes: the user's systemd unit directory, or LaunchAgents."""
    if platform == "systemd":
        base = Path(xdg_config_home) if xdg_config_home else home / ".config"
        return base / "systemd" / "user" / UNIT_NAME
    return home / "Library" / "LaunchAgents" / f"{label or LAUNCHD_LABEL}.plist"


def launchd_log_path(home: Path) -> Path:
    return home / "Library" / "Logs" / LOG_FILE_NAME


def installed_argv(platform: Platform, text: str) -> list[str]:
    """The command line an installed service file runs ([] when it names none)."""
    if platform == "launchd":
        try:
            data = plistlib.loads(text.encode("utf-8"))
        except Exception:  # plistlib raises several unrelated types on garbage
            return []
        args = data.get("ProgramArguments") if isinstance(data, dict) else None
        return [str(a) for a in args] if isinstance(args, list) else []
    for line in text.splitlines():
        if line.startswith("ExecStart="):
            return systemd_split(line[len("ExecStart=") :])
    return []


def option_value(argv: Sequence[str], option: str) -> str | None:
    """The value after ``option`` in a command line, if it is there."""
    for i, arg in enumerate(argv[:-1]):
        if arg == option:
            return argv[i + 1]
    return None
