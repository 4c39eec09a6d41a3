"""`libravdb service`: the rendered systemd unit and launchd plist, checked by their own
parsers; the unit's command line run for real; install/uninstall/status in a tmp HOME."""

from __future__ import annotations

import configparser
import os
import plistlib
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from libravdb_client import Client, default_endpoint

from sidecar.ops.service_render import (
    ServiceError,
    ServiceSpec,
    installed_argv,
    render_launchd,
    render_systemd,
    systemd_quote,
    systemd_split,
)
from tests.support import REPO, daemon_env

DAEMON = Path(sys.executable).parent / "libravdbd"
AWKWARD = ["a b", 'say "hi"', "back\\slash", "100%", "$HOME", "it's", "${X}%h"]
TOOL = [sys.executable, "-c", "from sidecar.cli import tool_main; raise SystemExit(tool_main())"]


def _spec(home: Path, program: Path = DAEMON, **kwargs: Any) -> ServiceSpec:
    return ServiceSpec(program=program, socket=home / ".clawdb" / "run" / "libravdb.sock", **kwargs)


def _cli(home: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = daemon_env(home)
    env.pop("XDG_CONFIG_HOME", None)
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [*TOOL, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )


def _sections(unit: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(unit)
    return parser


def test_systemd_quoting_round_trips_awkward_arguments() -> None:
    line = " ".join(systemd_quote(a) for a in AWKWARD)
    assert systemd_split(line) == AWKWARD
    assert systemd_quote("50%") == '"50%%"'  # no specifier expansion
    assert systemd_quote("$X") == '"$$X"'  # no variable expansion
    with pytest.raises(ServiceError, match="control character"):
        systemd_quote("two\nlines")


def test_systemd_unit_has_the_expected_sections_and_keys(tmp_path: Path) -> None:
    home = tmp_path / "my home"
    spec = _spec(home, data_dir=tmp_path / "data dir", config=tmp_path / "my conf.toml")
    unit = _sections(render_systemd(spec))
    assert unit.sections() == ["Unit", "Service", "Install"]
    service = unit["Service"]
    assert service["Restart"] == "on-failure"
    assert service["UMask"] == "0077"
    assert unit["Install"]["WantedBy"] == "default.target"
    argv = systemd_split(service["ExecStart"])
    assert argv == spec.argv
    assert argv[:2] == [str(DAEMON), "serve"]
    assert argv[argv.index("--socket") + 1] == default_endpoint({"HOME": str(home)})[5:]
    assert argv[argv.index("--data-dir") + 1] == str(tmp_path / "data dir")
    assert argv[argv.index("--config") + 1] == str(tmp_path / "my conf.toml")
    assert argv[argv.index("--log-format") + 1] == "json"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze absent")
def test_systemd_analyze_verifies_the_unit_with_spaces_in_every_path(tmp_path: Path) -> None:
    # A program path with a space: systemd must read the quoted path as one word, or
    # verify reports that the command is not executable.
    bindir = tmp_path / "bin dir"
    bindir.mkdir()
    (bindir / "libravdbd").symlink_to(DAEMON)
    spec = _spec(tmp_path / "my home", bindir / "libravdbd", data_dir=tmp_path / "d 100%")
    unit_file = tmp_path / "units" / "libravdbd.service"
    unit_file.parent.mkdir()
    unit_file.write_text(render_systemd(spec))
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "HOME": str(tmp_path / "my home")}
    done = subprocess.run(
        ["systemd-analyze", "verify", "--user", str(unit_file)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == ""  # no unknown keys, no unparsable lines

    # the same check fails for a program that is not there: verify does read ExecStart
    broken = ServiceSpec(program=bindir / "missing", socket=spec.socket)
    unit_file.write_text(render_systemd(broken))
    done = subprocess.run(
        ["systemd-analyze", "verify", "--user", str(unit_file)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode != 0
    assert "bin dir/missing" in done.stderr


def test_launchd_plist_parses_and_keeps_awkward_paths(tmp_path: Path) -> None:
    home = tmp_path / "<my & home>"
    log = home / "Library" / "Logs" / "libravdbd.log"
    spec = _spec(home, data_dir=tmp_path / 'a "b" & c', log_file=log, label="org.example.test")
    text = render_launchd(spec)
    assert "&amp;" in text and "&lt;my" in text  # XML escaping, not raw markup
    plist = plistlib.loads(text.encode())
    assert plist["Label"] == "org.example.test"
    assert plist["ProgramArguments"] == spec.argv
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["StandardErrorPath"] == str(log)
    assert plist["Umask"] == 0o077
    assert installed_argv("launchd", text) == spec.argv


def test_exec_start_runs_a_daemon_that_answers_on_the_default_socket(tmp_path: Path) -> None:
    home = tmp_path / "h m"
    home.mkdir()
    unit = _sections(render_systemd(_spec(home, data_dir=tmp_path / "da ta")))
    argv = systemd_split(unit["Service"]["ExecStart"])
    assert argv == shlex.split(unit["Service"]["ExecStart"])  # nothing systemd-specific here
    env = daemon_env(home)
    log = tmp_path / "daemon.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()
        endpoint = default_endpoint({"HOME": str(home)})
        assert line == endpoint, log.read_text()
        with Client(endpoint, timeout=30) as client:
            assert client.health().ok
        assert (tmp_path / "da ta" / "store.sqlite3").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    assert not Path(endpoint[5:]).exists()  # removed at shutdown


def test_install_and_uninstall_with_no_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    unit = home / ".config" / "systemd" / "user" / "libravdbd.service"
    done = _cli(
        home,
        "service",
        "install",
        "--no-start",
        "--platform",
        "systemd",
        "--data-dir",
        str(tmp_path / "my data"),
    )
    assert done.returncode == 0, done.stderr
    assert f"wrote {unit}" in done.stdout
    assert "systemctl --user enable --now libravdbd.service" in done.stdout
    assert unit.stat().st_mode & 0o777 == 0o600
    argv = installed_argv("systemd", unit.read_text())
    assert argv[argv.index("--data-dir") + 1] == str(tmp_path / "my data")
    assert not list(unit.parent.glob("*.tmp"))

    again = _cli(home, "service", "install", "--no-start", "--platform", "systemd")
    assert again.returncode == 0 and f"replaced {unit}" in again.stdout
    assert "--data-dir" not in installed_argv("systemd", unit.read_text())

    gone = _cli(home, "service", "uninstall", "--platform", "systemd")
    assert gone.returncode == 0, gone.stderr
    assert f"removed {unit}" in gone.stdout
    assert not unit.exists()
    assert "not installed" in _cli(home, "service", "uninstall", "--platform", "systemd").stdout


def test_launchd_install_and_uninstall_without_launchctl(tmp_path: Path) -> None:
    home = tmp_path / "home"
    plist = home / "Library" / "LaunchAgents" / "org.libravdb.libravdbd.plist"
    done = _cli(home, "service", "install", "--no-start", "--platform", "launchd")
    assert done.returncode == 0, done.stderr
    assert plist.stat().st_mode & 0o777 == 0o600
    parsed = plistlib.loads(plist.read_bytes())
    assert parsed["StandardErrorPath"] == str(home / "Library" / "Logs" / "libravdbd.log")
    assert (home / "Library" / "Logs").is_dir()
    gone = _cli(home, "service", "uninstall", "--platform", "launchd")
    assert gone.returncode == 0, gone.stderr
    assert not plist.exists()
    if shutil.which("launchctl") is None:
        assert "launchctl is not installed here; run these yourself" in gone.stdout


def test_dry_run_prints_the_unit_and_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = _cli(home, "service", "install", "--dry-run", "--platform", "launchd")
    assert done.returncode == 0, done.stderr
    assert plistlib.loads(done.stdout.encode())["Label"] == "org.libravdb.libravdbd"
    assert "would be written to" in done.stderr
    assert not (home / "Library").exists()
    printed = _cli(home, "service", "install", "--print", "--platform", "systemd")
    assert _sections(printed.stdout)["Service"]["Restart"] == "on-failure"
    assert not (home / ".config").exists()


def test_install_refuses_a_missing_config_file(tmp_path: Path) -> None:
    done = _cli(
        tmp_path / "home",
        "service",
        "install",
        "--no-start",
        "--config",
        str(tmp_path / "nope.toml"),
    )
    assert done.returncode == 1
    assert (
        done.stderr.strip() == f"libravdb service install: config file not found: "
        f"{tmp_path / 'nope.toml'}"
    )
    assert not (tmp_path / "home" / ".config").exists()


def test_status_reports_not_installed_and_not_reachable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = _cli(home, "service", "status", "--platform", "systemd")
    assert done.returncode == 3, done.stderr
    assert "installed: no" in done.stdout
    assert f"health at {default_endpoint({'HOME': str(home)})}: FAIL: not reachable" in done.stdout


def test_status_of_an_installed_unit_whose_daemon_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert (
        _cli(
            home,
            "service",
            "install",
            "--no-start",
            "--platform",
            "systemd",
            "--data-dir",
            str(tmp_path / "data"),
        ).returncode
        == 0
    )
    unit = home / ".config" / "systemd" / "user" / "libravdbd.service"
    argv = installed_argv("systemd", unit.read_text())
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=daemon_env(home)
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline()
        done = _cli(home, "service", "status", "--platform", "systemd")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"installed: yes ({unit})" in done.stdout
    assert "runs: " + str(DAEMON) in done.stdout
    assert ": ok: ok" in done.stdout


def test_install_without_a_service_manager_says_what_to_run(tmp_path: Path) -> None:
    home, empty = tmp_path / "home", tmp_path / "empty-path"
    empty.mkdir()
    done = _cli(home, "service", "install", "--platform", "systemd", path=str(empty))
    assert done.returncode == 0, done.stderr
    assert "systemctl is not installed here; run these yourself:" in done.stdout
    assert "  systemctl --user daemon-reload\n" in done.stdout
    assert (home / ".config" / "systemd" / "user" / "libravdbd.service").exists()


def _user_manager_unreachable() -> bool:
    if shutil.which("systemctl") is None:
        return False
    probe = subprocess.run(
        ["systemctl", "--user", "show-environment"], capture_output=True, text=True, timeout=30
    )
    return "Failed to connect to bus" in probe.stderr


@pytest.mark.skipif(
    not _user_manager_unreachable(), reason="needs systemctl without a user manager"
)
def test_install_when_systemctl_cannot_reach_the_user_manager(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = _cli(home, "service", "install", "--platform", "systemd")
    assert done.returncode == 1
    assert "ran: systemctl --user daemon-reload (exit 1)" in done.stdout
    assert "the service file is in place but the service did not start" in done.stdout
    assert "  systemctl --user enable --now libravdbd.service" in done.stdout
    assert (home / ".config" / "systemd" / "user" / "libravdbd.service").exists()


def test_launchd_status_without_launchctl(tmp_path: Path) -> None:
    home, empty = tmp_path / "home", tmp_path / "empty-path"
    empty.mkdir()
    done = _cli(home, "service", "status", "--platform", "launchd", path=str(empty))
    assert done.returncode == 3
    plist = home / "Library" / "LaunchAgents" / "org.libravdb.libravdbd.plist"
    assert f"installed: no ({plist} does not exist)" in done.stdout
    assert "loaded: unknown (launchctl is not installed)" in done.stdout


def test_install_into_an_unwritable_place_is_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    (home / ".config" / "systemd").write_text("a file where a directory belongs")
    done = _cli(home, "service", "install", "--no-start", "--platform", "systemd")
    assert done.returncode == 1
    assert done.stderr.startswith("libravdb service install: [Errno")
    assert len(done.stderr.strip().splitlines()) == 1
