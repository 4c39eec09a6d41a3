"""PostgreSQL URLs: a failover list of ``host:port`` pairs with a password opens the store
(it refused to start: urllib's "Port could not be cast"), and no piece of a password shows
in a masked URL or a refusal, whatever it holds (``@``, ``:``, ``/``, ``?``, ``#``,
escaped or not: unescaped, libpq reads an ``@`` or ``/`` as part of a host or a path)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from sidecar.config import ConfigError, check_store_url, mask_url, url_secrets
from sidecar.store.backend import open_store
from sidecar.store.pg.conn import redact
from sidecar.store.pg.store import PgStore
from tests.pg_server import PgTestServer

# Each password is made of three-character tokens that appear nowhere else: a token in
# any output is a piece of the password.
TOKENS = ("Qx7", "Zr9", "Wv2", "Ty4")
PASSWORDS = ["Qx7@Zr9", "Qx7:Zr9", "Qx7/Zr9", "Qx7?Zr9#Wv2", "Qx7@Zr9/Wv2:Ty4", "Qx7%Zr9"]
HOSTS = ["db.example:5432", "h1.example:5432,h2.example:5433"]


def _leaks(text: str) -> list[str]:
    return [t for t in TOKENS if t in text]


def _urls(password: str) -> list[str]:
    return [f"postgresql://memory:{password}@{hosts}/team" for hosts in HOSTS]


@pytest.mark.sqlite_only("no store: URL text only")
@pytest.mark.parametrize("password", PASSWORDS)
def test_no_piece_of_a_password_shows_escaped_or_not(password: str) -> None:
    for url in _urls(password) + _urls(quote(password, safe="")):
        shown = mask_url(url)
        assert _leaks(shown) == [] and shown.startswith("postgresql://memory:***@")
        assert redact(url) == shown  # it raised on a failover list ("Port could not be cast")
        try:
            check_store_url(url)
        except ConfigError as exc:
            assert _leaks(str(exc)) == [], exc
        # the log net: every token is in some secret the log redacts (4 chars and more)
        secrets = [s for s in url_secrets(url) if len(s) >= 4]
        assert all(any(t in s for s in secrets) for t in TOKENS if t in password)


@pytest.mark.sqlite_only("no store: URL text only")
def test_escaped_passwords_and_failover_lists_are_accepted() -> None:
    for password in PASSWORDS:
        for url in _urls(quote(password, safe="")):
            check_store_url(url)
    check_store_url("postgresql://memory:Qx7:Zr9?Wv2@h1:5432,h2:5433/team?sslmode=require")
    check_store_url("postgresql://h1,h2/team?application_name=a@b")  # an '@' in a parameter


@pytest.mark.sqlite_only("no store: URL text only")
@pytest.mark.parametrize(
    ("password", "words"),
    [
        ("Qx7@Zr9", "an '@' or '/' in the user name or password"),
        ("Qx7/Zr9", "an '@' or '/' in the user name or password"),
        ("Qx7/Z?r9@Wv2", "percent-encode"),
    ],
)
def test_an_unescaped_at_or_slash_is_refused_naming_the_fix(password: str, words: str) -> None:
    for url in _urls(password):
        with pytest.raises(ConfigError, match="is malformed") as caught:
            check_store_url(url)
        assert words in str(caught.value) and "%40" in str(caught.value)
        assert _leaks(str(caught.value)) == []


@pytest.mark.sqlite_only("no store: URL text only")
def test_a_port_that_is_no_number_is_refused_without_quoting_a_password_piece() -> None:
    # password "Qx7?host=Zr9/Wv2": libpq reads host "memory", port "Qx7", host= "Zr9/Wv2@db"
    with pytest.raises(ConfigError, match="a port is not a number") as caught:
        check_store_url("postgresql://memory:Qx7?host=Zr9/Wv2@db/team")
    assert _leaks(str(caught.value)) == []
    with pytest.raises(ConfigError, match="port 'nine' is not a number"):
        check_store_url("postgresql://db:nine/team")


def _socket(server: PgTestServer) -> tuple[str, str]:
    """The test server's socket directory and port (it listens on a Unix socket only)."""
    host = parse_qs(urlsplit(server.url()).query)["host"][0]
    with server.admin() as conn:
        row = conn.execute("SHOW port").fetchone()
    assert row is not None
    return host, str(row[0])


def test_a_failover_url_with_a_password_opens_the_store(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("--backend") == "sqlite":
        pytest.skip("PostgreSQL tests deselected (--backend sqlite)")
    server: PgTestServer = request.getfixturevalue("pg_server")
    dbname = urlsplit(server.new_database(migrated=True)).path.lstrip("/")
    sock, port = _socket(server)
    # the first host is a socket directory that does not exist: libpq goes on to the next
    hosts = f"{quote('/nonexistent-libravdb', safe='')}:{port},{quote(sock, safe='')}:{port}"
    url = f"postgresql://postgres:{quote('Qx7@Zr9/Wv2', safe='')}@{hosts}/{dbname}"
    check_store_url(url)
    store: Any = open_store(url, embed_dims=4, fingerprint="fp")
    try:
        assert isinstance(store, PgStore)
        assert _leaks(store.location) == [] and store.location.startswith(
            "postgresql://postgres:***@"
        )
        store.put("user:u", "a", text="x", vector=[1, 0, 0, 0])
        assert store.get("user:u", "a") is not None
    finally:
        store.close()
