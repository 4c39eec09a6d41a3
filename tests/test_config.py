"""Settings precedence: flags > environment > TOML file > defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.config import ConfigError, load_settings


def test_defaults(tmp_path: Path) -> None:
    settings = load_settings({}, env={"HOME": str(tmp_path)})
    assert settings.data_path == tmp_path / ".clawdb" / "data"
    assert settings.resolved_endpoint == f"unix:{tmp_path}/.clawdb/run/libravdb.sock"
    assert settings.server.max_frame_bytes == 8 * 1024 * 1024
    assert settings.gating.threshold == 0.21 and settings.gating.model == "conversation"
    assert settings.embedding.profile == "all-minilm-l6-v2"


def test_precedence(tmp_path: Path) -> None:
    config = tmp_path / "d.toml"
    config.write_text(
        'data_dir = "/from/toml"\nlog_level = "debug"\n'
        '[server]\nmax_frame_bytes = 5000\nendpoint = "tcp:127.0.0.1:1"\n'
        "[gating]\nthreshold = 0.5\n"
    )
    env = {
        "HOME": str(tmp_path),
        "LIBRAVDB_CONFIG": str(config),
        "LIBRAVDB_DB_PATH": "/from/env",
        "LIBRAVDB_MAX_FRAME_BYTES": "6000",
        "LIBRAVDB_GATING_THRESHOLD": "0.42",
    }
    settings = load_settings({"data_dir": "/from/flag"}, env=env)
    assert settings.data_dir == "/from/flag"  # flag beats env and file
    assert settings.server.max_frame_bytes == 6000  # env beats file
    assert settings.log_level == "debug"  # file beats default
    assert settings.gating.threshold == 0.42
    assert settings.resolved_endpoint == "tcp:127.0.0.1:1"

    without_flag = load_settings({}, env=env)
    assert without_flag.data_dir == "/from/env"


def test_reference_env_names_are_accepted(tmp_path: Path) -> None:
    env = {
        "HOME": str(tmp_path),
        "LIBRAVDB_RPC_ENDPOINT": "unix:/tmp/x.sock",
        "LIBRAVDB_EMBEDDING_PROFILE": "nomic-embed-text-v1.5",
        "LIBRAVDB_LIFECYCLE_JOURNAL_MAX_ENTRIES": "0",
        "LIBRAVDB_EMBEDDING_NORMALIZE": "false",
    }
    settings = load_settings({}, env=env)
    assert settings.resolved_endpoint == "unix:/tmp/x.sock"
    assert settings.embedding.profile == "nomic-embed-text-v1.5"
    assert settings.journal.max_entries == 0  # 0 = unbounded, unlike the reference
    assert settings.embedding.normalize is False


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"LIBRAVDB_MAX_FRAME_BYTES": "lots"}, "max_frame_bytes"),
        ({"LIBRAVDB_MAX_FRAME_BYTES": "10"}, "at least 1024"),
        ({"LIBRAVDB_LOG_LEVEL": "chatty"}, "log level"),
        ({"LIBRAVDB_CONFIG": "/nonexistent/x.toml"}, "not found"),
    ],
)
def test_bad_settings_are_clear(tmp_path: Path, env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_settings({}, env={"HOME": str(tmp_path), **env})


def test_bad_toml(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("this is = = not toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings({"config_file": str(bad)}, env={"HOME": str(tmp_path)})
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[server]\nbogus = 1\n")
    with pytest.raises(ConfigError, match="bogus"):
        load_settings({"config_file": str(unknown)}, env={"HOME": str(tmp_path)})
