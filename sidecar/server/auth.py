"""The shared-secret token that guards socket connections when one is configured.

The token comes from a file (``server.auth_token_file``), never from a command-line flag,
which every local user could read in ``ps``. The file must belong to the daemon's user and
be readable by nobody else, or the daemon refuses to start. A client sends the token as
``authToken`` in ``initialize``, the first request of its connection.
"""

from __future__ import annotations

import hmac
import os
import stat
from pathlib import Path

MIN_TOKEN_CHARS = 16


class AuthConfigError(ValueError):
    """The token file is missing, unsafe or too weak; the daemon does not start."""


def load_token(path_text: str) -> str:
    path = Path(path_text).expanduser()
    try:
        st = os.stat(path)
    except OSError as exc:
        raise AuthConfigError(f"auth token file {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise AuthConfigError(f"auth token file {path} is not a regular file")
    if st.st_mode & 0o077:
        raise AuthConfigError(
            f"auth token file {path} is readable by others (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"run `chmod 600 {path}`"
        )
    if st.st_uid != os.getuid():
        raise AuthConfigError(f"auth token file {path} belongs to another user")
    token = path.read_text(encoding="utf-8", errors="strict").strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise AuthConfigError(
            f"auth token in {path} is shorter than {MIN_TOKEN_CHARS} characters; "
            "generate one with `python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )
    return token


def token_matches(expected: str, given: object) -> bool:
    """Constant-time comparison; anything but a string is a mismatch."""
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8", "replace"))
