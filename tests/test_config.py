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


def test_store_url_from_flag_env_and_toml(tmp_path: Path) -> None:
    url = "postgresql://team@db.example:5432/memory"
    config = tmp_path / "s.toml"
    config.write_text(f'[store]\nurl = "{url}"\n')
    from_toml = load_settings({"config_file": str(config)}, env={"HOME": str(tmp_path)})
    assert from_toml.store_url == url and from_toml.store_location == url
    env = {"HOME": str(tmp_path), "LIBRAVDB_STORE_URL": "postgres://other/db"}
    assert load_settings({}, env=env).store_url == "postgres://other/db"
    flag = load_settings({"store.url": url}, env=env)
    assert flag.store_url == url  # the flag beats the environment
    # sqlite:DIR names the embedded store's directory, and overrides a URL set earlier
    local = load_settings({"store.url": f"sqlite:{tmp_path}/d"}, env=env)
    assert local.store_url == "" and local.store_location == tmp_path / "d"
    assert load_settings({}, env={"HOME": str(tmp_path)}).store_location == (
        tmp_path / ".clawdb" / "data"
    )


def test_store_url_password_is_masked_and_never_in_errors(tmp_path: Path) -> None:
    from sidecar.config import mask_url

    assert mask_url("postgresql://u:s3cret@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert mask_url("postgresql://u:p%40ss@h1:1,h2:2/db") == "postgresql://u:***@h1:1,h2:2/db"
    assert mask_url("postgresql:///db?host=/run&password=s3cret&sslmode=require") == (
        "postgresql:///db?host=/run&password=***&sslmode=require"
    )
    assert mask_url("postgresql://u@h/db") == "postgresql://u@h/db"
    settings = load_settings({"store.url": "postgresql://u:s3cret@h/db"}, env={"HOME": "/x"})
    assert settings.store_display == "postgresql://u:***@h/db"
    for bad, needle in [
        ("postgresql://u:s3cret@h:port/db", "malformed"),
        ("postgresql://h/db?bogus=1&password=s3cret", "malformed"),
        ("mysql://u:s3cret@h/db", "not a postgresql://"),
        ("sqlite:", "needs a directory"),
    ]:
        with pytest.raises(ConfigError, match=needle) as err:
            load_settings({"store.url": bad}, env={"HOME": str(tmp_path)})
        assert "s3cret" not in str(err.value)


def test_the_assemble_graph_setting_is_checked(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    assert load_settings({}, env=env).store.assemble_graph == "auto"
    for value in ("on", "off", "auto"):
        assert load_settings({"store.assemble_graph": value}, env=env).store.assemble_graph == value
    with pytest.raises(ConfigError, match="assemble_graph must be auto, on or off"):
        load_settings({"store.assemble_graph": "yes"}, env=env)
