"""End to end: a real daemon process serving the v1 storage methods, via the Python client.

``sidecar/services.py`` does not install the store yet, so the child process patches
``install_services`` to provide :class:`StoreService` (with a deterministic hash embedder)
and then runs the normal ``libravdbd serve`` entry point on loopback TCP. On both store
backends (``store_target``): a PostgreSQL daemon gets ``--store <url>``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from libravdb_client import Client
from libravdb_client import InvalidInput as ClientInvalidInput

from tests.support import StoreTarget, current_store

REPO = Path(__file__).resolve().parents[2]

LAUNCHER = textwrap.dedent(
    """
    import hashlib, re, sys
    import numpy as np
    import sidecar.server.daemon as daemon
    from sidecar.services import install_memory
    from sidecar.store.service import StoreService

    async def embed(texts, kind):
        out = np.zeros((len(texts), 16), dtype=np.float32)
        for i, t in enumerate(texts):
            for tok in re.findall(r"[a-z0-9]+", t.lower()) or [t]:
                d = hashlib.sha256(tok.encode()).digest()
                out[i] += np.array([d[j] / 127.5 - 1 for j in range(16)], dtype=np.float32)
            out[i] /= np.linalg.norm(out[i]) or 1
        return out

    def install(app):
        store = StoreService(app.settings, embed=embed, embed_dims=16, fingerprint="hash16")
        app.provide(StoreService, store)
        install_memory(app, store)

    daemon.install_services = install
    from sidecar.cli import daemon_main
    sys.exit(daemon_main(sys.argv[1:]))
    """
)


def _args(data_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-c",
        LAUNCHER,
        "serve",
        "--tcp",
        "127.0.0.1:0",
        "--data-dir",
        str(data_dir),
        *current_store().args(data_dir),
    ]


def _start(data_dir: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIBRAVDB_")}
    env.update(PYTHONPATH=str(REPO), HOME=str(data_dir.parent))
    proc = subprocess.Popen(
        _args(data_dir),
        stdout=subprocess.PIPE,
        stderr=log.open("wb"),
        env=env,
        cwd=REPO,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("tcp:"):
        proc.kill()
        raise AssertionError(f"daemon did not start: {line!r}\n{log.read_text()}")
    return proc, line


@pytest.fixture(autouse=True)
def _both_backends(store_target: StoreTarget) -> StoreTarget:
    return store_target


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    data_dir = tmp_path / "data"
    proc, endpoint = _start(data_dir, tmp_path / "daemon.log")
    try:
        yield endpoint, data_dir
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_v1_storage_over_a_real_daemon(daemon: tuple[str, Path], tmp_path: Path) -> None:
    endpoint, data_dir = daemon
    with Client(endpoint) as c:
        assert c.call("ensure_collections", {"collections": ["session:s1", "user:u1"]}) == {
            "ok": True
        }
        for rid, text in [("alpha", "alpha"), ("beta", "beta")]:
            c.call("insert_text", {"collection": "session:s1", "id": rid, "text": text})
        res = c.call("search_text", {"collection": "session:s1", "text": "query-alpha", "k": 5})
        assert [r["id"] for r in res["results"]] == ["alpha", "beta"]
        assert res["results"][0]["metadata"]["collection"] == "session:s1"
        c.call("insert_text", {"collection": "user:u1", "id": "m", "text": "likes tea"})
        c.call("bump_access_counts", {"updates": [{"collection": "user:u1", "ids": ["m", "x"]}]})
        (m,) = c.call("list_collection", {"collection": "user:u1"})["results"]
        assert m["metadata"]["access_count"] == 1
        with pytest.raises(ClientInvalidInput, match="record id is required"):
            c.call("insert_text", {"collection": "user:u1", "text": "x"})
        c.call("delete_batch", {"collection": "session:s1", "ids": ["beta", "beta", "nope"]})
        assert c.call("export_memory", {"userId": "u1"})["records"][0]["id"] == "m"
        assert c.call("flush") == {"ok": True}
        status = c.status()
        assert status.memory_count == 1
    if current_store().postgres:
        # a second daemon on the same database serves the same memory
        proc, other = _start(data_dir, tmp_path / "other.log")
        try:
            with Client(other) as c:
                (m,) = c.call("list_collection", {"collection": "user:u1"})["results"]
                assert m["id"] == "m" and m["metadata"]["access_count"] == 1
        finally:
            proc.terminate()
            proc.wait(15)
        return
    # a second daemon on the same data directory is refused, naming the holder
    other_log = tmp_path / "other.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIBRAVDB_")}
    env.update(PYTHONPATH=str(REPO), HOME=str(tmp_path))
    second = subprocess.run(
        _args(data_dir),
        stdout=subprocess.PIPE,
        stderr=other_log.open("wb"),
        env=env,
        cwd=REPO,
        timeout=60,
    )
    assert second.returncode == 1
    assert "in use by process" in other_log.read_text()


def test_v1_data_survives_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    proc, endpoint = _start(data_dir, tmp_path / "a.log")
    try:
        with Client(endpoint) as c:
            c.call("insert_text", {"collection": "user:u1", "id": "m", "text": "likes tea"})
    finally:
        proc.kill()  # no clean shutdown
        proc.wait()
    proc, endpoint = _start(data_dir, tmp_path / "b.log")
    try:
        with Client(endpoint) as c:
            res = c.call("search_text", {"collection": "user:u1", "text": "tea", "k": 1})
            assert [r["id"] for r in res["results"]] == ["m"]
    finally:
        proc.terminate()
        proc.wait(15)
