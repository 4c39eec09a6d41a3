"""kill -9 during a stream of writes loses no acknowledged write (and indexes recover).

On PostgreSQL the killed process is the client (the daemon): every write it saw
acknowledged was committed by the server. A server that goes away is in
``test_pg_backend.py``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from sidecar.store import Store
from sidecar.store.backend import open_store

from .conftest import Location

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import sys, threading
    import numpy as np
    import structlog
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    from sidecar.store import Put
    from sidecar.store.backend import open_store

    data_dir, mode = sys.argv[1], sys.argv[2]
    store = open_store(
        data_dir, embed_dims=16, fingerprint="fp", exact_threshold=200,
        checkpoint_idle_s=0.05, index_threads=1,
    )
    print("ready", flush=True)
    out_lock = threading.Lock()

    def ack(line):
        with out_lock:
            sys.stdout.write(line + "\\n")
            sys.stdout.flush()

    def vec(i):
        return np.random.default_rng(i).standard_normal(16).astype(np.float32)

    def single(w):
        i = 0
        while True:
            rid = f"w{w}-{i}"
            store.put("user:u1", rid, text=rid, metadata={"i": i}, vector=vec(w * 1_000_000 + i))
            ack(rid)  # acknowledged: the write returned
            if i % 7 == 3:  # updates and deletes in the stream too
                v2 = vec(10**9 + w * 1_000_000 + i)
                store.put("user:u1", rid, text=rid + "!", metadata={"i": i}, vector=v2)
                ack(rid + "!")
            i += 1

    def batches(w):
        i = 0
        while True:
            ids = [f"b{w}-{i}-{j}" for j in range(20)]
            store.write([Put("user:u2", r, r, {}, vec(hash(r) % 10**6)) for r in ids])
            ack(" ".join(ids))
            i += 1

    def checkpoints():
        import time
        while True:
            time.sleep(0.15)
            store.checkpoint()  # index files saved mid-stream, stale by the time of the kill

    target = single if mode == "single" else batches
    threads = [threading.Thread(target=target, args=(w,), daemon=True) for w in range(3)]
    threads.append(threading.Thread(target=checkpoints, daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sys.exit(3)  # a writer thread died: never expected
    """
)


def _saved_graphs(data_dir: Location) -> int:
    """Graph files a checkpoint has saved in a SQLite data directory (none on PostgreSQL)."""
    index = Path(str(data_dir)) / "index"
    return len(list(index.rglob("*.hnsw"))) if index.is_dir() else 0


def _run_and_kill(
    data_dir: Location, mode: str, min_acks: int, *, after_a_save: int = 0
) -> list[str]:
    """Run the writer child and kill it once it acknowledged ``min_acks`` writes and, with
    ``after_a_save``, that many more after its first graph file was saved (a save is a
    checkpoint's work: how many writes come before one depends on the machine)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(data_dir), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=REPO,
    )
    assert proc.stdout is not None
    watchdog = threading.Timer(90, proc.kill)  # never hang the suite on a stuck child
    watchdog.start()
    acked: list[str] = []
    deadline = time.monotonic() + 60
    assert proc.stdout.readline().strip() == b"ready"
    saved_at: int | None = None if after_a_save else 0
    while time.monotonic() < deadline:
        if saved_at is None and _saved_graphs(data_dir):
            saved_at = len(acked)
        if saved_at is not None and len(acked) >= max(min_acks, saved_at + after_a_save):
            break
        line = proc.stdout.readline()
        if not line:
            break
        acked.extend(line.decode().split())
    proc.send_signal(signal.SIGKILL)
    # Everything the child printed before it died was acknowledged.
    rest = proc.stdout.read().decode()
    proc.wait()
    watchdog.cancel()
    acked.extend(rest.split())
    assert proc.returncode == -signal.SIGKILL
    assert len(acked) >= min_acks, "child did not produce enough writes"
    return acked


@pytest.mark.parametrize("mode", ["single", "batches"])
def test_sigkill_loses_no_acknowledged_write(location: Location, mode: str) -> None:
    data_dir = location
    acked = _run_and_kill(data_dir, mode, 600)
    collection = "user:u1" if mode == "single" else "user:u2"
    with open_store(data_dir, embed_dims=16, fingerprint="fp", exact_threshold=200) as store:
        present = {r.id: r for r in store.list_records(collection)}
        for token in acked:
            rid = token.rstrip("!")
            assert rid in present, f"acknowledged write {token} lost"
            if token.endswith("!"):
                assert present[rid].text.endswith("!"), f"acknowledged update {token} lost"
        # The index (saved mid-stream, then stale) finds every record by its own vector.
        assert store.wait_indexed(60)
        for rid in list(present)[:: max(1, len(present) // 60)]:
            rec = store.get(collection, rid, include_vector=True)
            assert rec is not None and rec.vector is not None
            hits = store.search(collection, rec.vector, 1)
            assert hits and hits[0].score == pytest.approx(1.0, abs=1e-5)
        assert store.count(collection) == len(present)


@pytest.mark.sqlite_only("the saved hnswlib graph's stamp and start-up backfill")
def test_kill_then_backfill_matches_exact(tmp_path: Path) -> None:
    """After a crash the saved index is stale; start-up backfills and results equal exact."""
    data_dir = tmp_path / "data"
    _run_and_kill(data_dir, "single", 900, after_a_save=300)
    with Store.open(data_dir, embed_dims=16, fingerprint="fp", exact_threshold=200) as store:
        report = store.open_report
        assert report["indexes_loaded"] == 1, report  # the mid-stream checkpoint's file
        assert report["backfilled"] > 0, report  # records acknowledged after it
        store.wait_indexed(60)
        recs = store.list_records("user:u1", include_vectors=True)
        mat = np.stack([r.vector for r in recs if r.vector is not None])
        mat /= np.linalg.norm(mat, axis=1, keepdims=True)
        rng = np.random.default_rng(5)
        agree = 0
        for _ in range(20):
            q = rng.standard_normal(16).astype(np.float32)
            exact = {recs[i].id for i in np.argsort(-(mat @ (q / np.linalg.norm(q))))[:5]}
            got = {h.id for h in store.search("user:u1", q, 5)}
            agree += len(exact & got)
        assert agree / 100 >= 0.95
