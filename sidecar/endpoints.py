"""Where a tool finds the daemon (its endpoint and its auth token), and how it says it
could not reach it (:func:`connect_failure`, the shared exit statuses).

The console, ``libravdb call`` and the other CLI commands, the MCP server, the UI and
the ops reports all reach a running daemon the way the daemon itself would be reached
with this environment: flags > ``LIBRAVDB_RPC_ENDPOINT`` > config file >
``unix:$HOME/.clawdb/run/libravdb.sock``, and the token of ``server.auth_token_file``
(``LIBRAVDB_AUTH_TOKEN_FILE``) when one is configured.
"""

from __future__ import annotations

from typing import Final, TextIO

from libravdb_client import ConnectError, default_endpoint

EXIT_OK: Final = 0
EXIT_RPC_ERROR: Final = 1  # the daemon answered with an error
EXIT_NO_ANSWER: Final = 2  # cannot connect, connection lost, timeout, malformed reply


def resolve_endpoint(endpoint: str | None) -> str:
    """The explicit endpoint, else the one the daemon would use with this environment."""
    if endpoint:
        return endpoint
    try:
        from sidecar.config import load_settings

        return load_settings().resolved_endpoint
    except Exception:  # an unreadable config file: fall back to env / default
        return default_endpoint()


def resolve_auth_token() -> str | None:
    """The daemon's auth token when one is configured (``server.auth_token_file`` /
    ``LIBRAVDB_AUTH_TOKEN_FILE``): a tool authenticates as the daemon expects."""
    try:
        from sidecar.config import load_settings

        path = load_settings().server.auth_token_file.strip()
    except Exception:
        return None
    if not path:
        return None
    from sidecar.server.auth import load_token

    return load_token(path)


def connect_failure(exc: Exception, err: TextIO) -> int:
    """Say why the daemon did not answer (with a hint when it is not running)."""
    hint = ""
    if isinstance(exc, ConnectError):
        hint = "\nIs the daemon running? Start it with `libravdbd serve` or pass --endpoint."
    print(f"libravdb: {exc}{hint}", file=err, flush=True)
    return EXIT_NO_ANSWER
