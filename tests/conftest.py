"""Store backends for the daemon's tests: every test that depends on ``store_target`` (the
directories' conftests make it autouse for the RPC tests) runs twice, on the embedded
SQLite store and on a fresh database of a real PostgreSQL + pgvector server
(``tests/pg_server.py``: one server per test session, a database per test).

* ``@pytest.mark.sqlite_only("why")`` keeps a test (or a module, as ``pytestmark``) on
  SQLite: for tests about SQLite's files, locks and tools; the reason is required.
* ``--backend sqlite|postgres|both`` (or ``LIBRAVDB_TEST_BACKEND``) narrows a run while
  developing; ``make test`` runs both.
* A test parametrised on ``postgres`` that never asked for its database fails: it did not
  exercise PostgreSQL, so it should be ``sqlite_only`` (or not depend on a store at all).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import StoreTarget, using_store

BACKENDS = ("sqlite", "postgres")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=("sqlite", "postgres", "both"),
        default=os.environ.get("LIBRAVDB_TEST_BACKEND", "both"),
        help="store backends the daemon's tests run on (default both)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sqlite_only(reason): runs on the SQLite store only (say why)"
    )


def _selected(config: pytest.Config) -> tuple[str, ...]:
    chosen = str(config.getoption("--backend"))
    return BACKENDS if chosen == "both" else (chosen,)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("sqlite_only")
    if marker is not None and not (marker.args or marker.kwargs.get("reason")):
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: sqlite_only needs a reason")
    backends = ("sqlite",) if marker is not None else _selected(metafunc.config)
    metafunc.parametrize("backend", backends, indirect=True)


@pytest.fixture(scope="module")
def backend(request: pytest.FixtureRequest) -> str:
    """``sqlite`` or ``postgres`` (parametrised by ``pytest_generate_tests``)."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    """The test session's PostgreSQL server (started on first use)."""
    from tests import pg_server

    with pg_server.session_server() as server:
        yield server


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> str:
    """A fresh database of the session's PostgreSQL server with the store's schema (the
    test skips under ``--backend sqlite``)."""
    if request.config.getoption("--backend") == "sqlite":
        pytest.skip("PostgreSQL tests deselected (--backend sqlite)")
    server: Any = request.getfixturevalue("pg_server")
    return str(server.new_database(migrated=True))


def _target(backend: str, request: pytest.FixtureRequest) -> StoreTarget:
    if backend != "postgres":
        return StoreTarget(backend)
    from tests import pg_server

    def new_database() -> str:
        return pg_server.new_database(request.getfixturevalue("pg_server"))

    return StoreTarget(backend, new_database)


@pytest.fixture(scope="module")
def module_store_target(backend: str, request: pytest.FixtureRequest) -> StoreTarget:
    """One store target for a module's shared daemon (a database for the whole module)."""
    return _target(backend, request)


@pytest.fixture
def store_target(backend: str, request: pytest.FixtureRequest) -> Iterator[StoreTarget]:
    """The test's store target, current for the helpers while the test runs."""
    target = _target(backend, request)
    with using_store(target):
        yield target
    if target.postgres and not target.used and "module_store_target" not in request.fixturenames:
        pytest.fail(
            "parametrised on postgres but never opened a PostgreSQL store: mark it "
            "@pytest.mark.sqlite_only(reason) or keep it out of the backend fixtures",
            pytrace=False,
        )
