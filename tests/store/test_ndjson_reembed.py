"""Export/import round trips, re-embedding on import, and `reembed`."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from sidecar.store import FingerprintMismatch, InvalidInput, UnfinishedReembed
from sidecar.store.backend import open_store, reembed
from sidecar.store.interface import StoreBackend as Store

from .conftest import Location

NewLocation = Callable[[], Location]


def fake_embed(dims: int) -> Any:
    """Deterministic text embedder (hash-based), like the reference's test embedder."""

    def embed(texts: list[str]) -> np.ndarray[Any, Any]:
        out = np.zeros((len(texts), dims), dtype=np.float32)
        for i, t in enumerate(texts):
            for tok in t.lower().split() or [t]:
                d = hashlib.sha256(tok.encode()).digest()
                out[i] += np.array([d[j % 32] / 127.5 - 1 for j in range(dims)], np.float32)
            n = np.linalg.norm(out[i])
            out[i] /= n if n else 1
        return out

    return embed


def _populate(store: Store) -> None:
    emb = fake_embed(store.embed_dims)
    texts = {"a": "alpha apples", "b": "beta bananas", "c": "gamma grapes"}
    for rid, t in texts.items():
        store.put("user:u1", rid, text=t, metadata={"n": len(t), "f": 0.5}, vector=emb([t])[0])
    store.put("session:s1", "t1", text="hello there", vector=emb(["hello there"])[0])
    store.put("authored:hard", "doc#000000", text="Always test", metadata={"tier": 1})
    store.put("session_state:s1", "__session_state__", metadata={"generation": 0})
    store.add_tombstones("user:u1", ["gone"], reason="forget")


def _snapshot(store: Store) -> dict[str, Any]:
    out = {}
    for info in store.collections():
        for r in store.list_records(info.name, include_vectors=True):
            vec = None if r.vector is None else np.round(r.vector, 6).tolist()
            out[f"{info.name}/{r.id}"] = (r.text, r.metadata, r.created_ms, vec)
    return out


def test_export_import_round_trip_with_vectors(new_location: NewLocation) -> None:
    with open_store(new_location(), embed_dims=8, fingerprint="fp") as src:
        _populate(src)
        buf = io.StringIO()
        progress: list[tuple[int, int | None]] = []
        stats = src.export_ndjson(buf, progress=lambda d, t: progress.append((d, t)))
        assert stats.records == 6 and stats.collections == 4 and stats.tombstones == 1
        assert progress[-1] == (6, 6)
        before = _snapshot(src)
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert lines[0]["kind"] == "header" and lines[-1] == {
        "kind": "end",
        "records": 6,
        "collections": 4,
        "tombstones": 1,
    }
    with open_store(new_location(), embed_dims=8, fingerprint="fp") as dst:
        calls: list[int] = []

        def must_not_embed(texts: list[str]) -> Any:
            calls.append(len(texts))
            raise AssertionError("vectors were usable")

        st = dst.import_ndjson(io.StringIO(buf.getvalue()), embed=must_not_embed)
        assert st.records == 6 and st.reembedded == 0 and st.tombstones == 1
        assert _snapshot(dst) == before
        assert dst.tombstoned("user:u1", ["gone"]) == {"gone"}
        # importing again is an idempotent upsert
        dst.import_ndjson(io.StringIO(buf.getvalue()))
        assert dst.total_records() == 6
        assert dst.get("user:u1", "a").version == 2  # type: ignore[union-attr]
        assert not calls


def test_import_reembeds_when_vectors_missing_or_foreign(new_location: NewLocation) -> None:
    with open_store(new_location(), embed_dims=8, fingerprint="old-model") as src:
        _populate(src)
        with_vectors, without = io.StringIO(), io.StringIO()
        src.export_ndjson(with_vectors)
        src.export_ndjson(without, include_vectors=False, collections=["user:u1"])
    assert '"vector":' not in without.getvalue()
    emb = fake_embed(16)
    with open_store(new_location(), embed_dims=16, fingerprint="new-model") as dst:
        st = dst.import_ndjson(io.StringIO(with_vectors.getvalue()), embed=emb)
        assert st.reembedded == 4  # every text record of a vector collection
        hit = dst.search("user:u1", emb(["beta bananas"])[0], 1)[0]
        assert hit.id == "b" and hit.score == pytest.approx(1.0, abs=1e-5)
    with open_store(new_location(), embed_dims=8, fingerprint="old-model") as dst:
        with pytest.raises(InvalidInput, match="needs an embedder"):
            dst.import_ndjson(io.StringIO(without.getvalue()))
        st = dst.import_ndjson(io.StringIO(without.getvalue()), embed=fake_embed(8))
        assert st.records == 3 and st.reembedded == 3


def test_import_rejects_garbage(location: Location) -> None:
    with open_store(location, embed_dims=4) as store:
        with pytest.raises(InvalidInput, match="missing header"):
            store.import_ndjson(io.StringIO('{"kind": "record"}\n'))
        with pytest.raises(InvalidInput, match="not JSON"):
            store.import_ndjson(io.StringIO("{nope\n"))
        with pytest.raises(InvalidInput, match="empty import"):
            store.import_ndjson(io.StringIO(""))
        header = json.dumps({"kind": "header", "format": "libravdb-store", "version": 1})
        bad = json.dumps({"kind": "record", "collection": "", "id": "x"})
        with pytest.raises(InvalidInput):
            store.import_ndjson(io.StringIO(header + "\n" + bad + "\n"))
        assert store.total_records() == 0


def test_reembed_switches_model(location: Location) -> None:
    path = location
    with open_store(path, embed_dims=8, fingerprint="minilm", exact_threshold=2) as store:
        _populate(store)
        store.put("user:u1:64d", "x", text="tier text", vector=np.ones(64))
        store.wait_indexed(30)
    with pytest.raises(FingerprintMismatch):
        open_store(path, embed_dims=128, fingerprint="nomic")
    emb = fake_embed(128)
    progress: list[tuple[int, int | None]] = []
    stats = reembed(path, emb, "nomic", lambda d, t: progress.append((d, t)), batch=2)
    assert stats.records == 5 and stats.new_fingerprint == "nomic" and stats.embed_dims == 128
    assert progress[-1] == (5, 5)
    with open_store(path, embed_dims=128, fingerprint="nomic") as store:
        assert store.collection("user:u1").dims == 128  # type: ignore[union-attr]
        assert store.collection("user:u1:64d").dims == 64  # type: ignore[union-attr]
        assert store.collection("authored:hard").dims == 1  # type: ignore[union-attr]
        hit = store.search("user:u1", emb(["gamma grapes"])[0], 1)[0]
        assert hit.id == "c" and hit.score == pytest.approx(1.0, abs=1e-5)
        tier = store.get("user:u1:64d", "x", include_vector=True)
        assert tier is not None and tier.vector is not None
        assert np.linalg.norm(tier.vector) == pytest.approx(1.0, abs=1e-5)
        assert store.get("session_state:s1", "__session_state__") is not None
        # the re-embedded records' fresh seqs are under the watermark of a state read now
        for name, st in store.collection_states(["user:u1", "user:u1:64d"]).items():
            assert st.count > 0 and store.changed_since(name, st.max_seq) == []


def _interrupt_reembed(path: Location, at_call: int, exc: BaseException) -> None:
    emb = fake_embed(8)
    seen = {"n": 0}

    def dies(texts: list[str]) -> Any:
        seen["n"] += 1
        if seen["n"] == at_call:
            raise exc
        return emb(texts)

    with pytest.raises(type(exc)):
        reembed(path, dies, "new", batch=1, embed_dims=8)


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), RuntimeError("model failed")])
def test_interrupted_reembed_is_refused_then_resumed(
    location: Location, exc: BaseException
) -> None:
    path = location
    with open_store(path, embed_dims=8, fingerprint="old") as store:
        _populate(store)
        before = _snapshot(store)
    _interrupt_reembed(path, 3, exc)
    with pytest.raises(UnfinishedReembed) as refused:  # the new model waits for the end
        open_store(path, embed_dims=8, fingerprint="new")
    assert "2 of 4 records staged" in refused.value.message
    stats = reembed(path, fake_embed(8), "new", batch=1, embed_dims=8)
    assert stats.resumed and stats.records == 4
    with open_store(path, embed_dims=8, fingerprint="new") as store:
        assert store.total_records() == 6
        after = _snapshot(store)
    assert {k: v[:3] for k, v in after.items()} == {k: v[:3] for k, v in before.items()}


def test_interrupted_reembed_leaves_the_old_model_serving(location: Location) -> None:
    path = location
    with open_store(path, embed_dims=8, fingerprint="old") as store:
        _populate(store)
        before = _snapshot(store)
    _interrupt_reembed(path, 3, KeyboardInterrupt())
    with open_store(path, embed_dims=8, fingerprint="old") as store:  # vectors untouched
        assert _snapshot(store) == before
    stats = reembed(path, fake_embed(8), "new", batch=1, embed_dims=8)
    assert not stats.resumed and stats.records == 4  # the stale stage was dropped
