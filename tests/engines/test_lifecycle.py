from __future__ import annotations

import threading

import pytest

from sidecar.engines import Embedder, ModelLoadError, ModelSlot, ModelState
from sidecar.engines.embedding_spec import EmbeddingSpec


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_lazy_load_and_states() -> None:
    loads: list[int] = []

    def loader() -> str:
        loads.append(1)
        return "model"

    slot: ModelSlot[str] = ModelSlot("m", loader)
    assert slot.state is ModelState.UNLOADED and not loads
    with slot.lease() as m:
        assert m == "model"
        assert slot.state.value == "ready" and slot.in_use == 1
    assert slot.in_use == 0 and loads == [1]
    with slot.lease():
        pass
    assert loads == [1]
    snap = slot.snapshot()
    assert snap["state"] == "ready" and snap["uses"] == 2 and snap["loads"] == 1


def test_failure_is_reported_and_retried_after_backoff() -> None:
    clock = FakeClock()
    attempts: list[int] = []

    def loader() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ModelLoadError("weights missing: /x/model.onnx")
        return "ok"

    slot: ModelSlot[str] = ModelSlot("m", loader, retry_after_s=30, clock=clock)
    with pytest.raises(ModelLoadError), slot.lease():
        pass
    assert slot.state is ModelState.FAILED and "model.onnx" in slot.reason
    with pytest.raises(ModelLoadError), slot.lease():  # within backoff: no new attempt
        pass
    assert len(attempts) == 1
    clock.now += 31
    with pytest.raises(ModelLoadError), slot.lease():
        pass
    assert len(attempts) == 2
    clock.now += 31
    with slot.lease() as m:
        assert m == "ok"
    assert slot.state.value == "ready" and slot.reason == ""


def test_unexpected_loader_exception_becomes_load_error() -> None:
    def loader() -> str:
        raise RuntimeError("boom")

    slot: ModelSlot[str] = ModelSlot("m", loader)
    with pytest.raises(ModelLoadError, match="boom"), slot.lease():
        pass
    assert slot.state is ModelState.FAILED


def test_idle_unload_never_while_in_use() -> None:
    clock = FakeClock()
    closed: list[str] = []
    slot: ModelSlot[str] = ModelSlot(
        "m", lambda: "model", idle_unload_s=10, clock=clock, closer=closed.append
    )
    with slot.lease():
        clock.now += 100
        assert slot.unload_if_idle() is False  # leased: never unloaded
        assert slot.unload() is False
    assert slot.unload_if_idle() is False  # just released: not idle yet
    clock.now += 9
    assert slot.unload_if_idle() is False
    clock.now += 2
    assert slot.unload_if_idle() is True
    assert slot.state is ModelState.UNLOADED and closed == ["model"]
    assert "unloaded (idle)" in slot.reason
    with slot.lease() as m:  # reloads on next use
        assert m == "model"
    assert slot.load_count == 2


def test_idle_unload_disabled_by_zero() -> None:
    clock = FakeClock()
    slot: ModelSlot[str] = ModelSlot("m", lambda: "model", idle_unload_s=0, clock=clock)
    slot.ensure_loaded()
    clock.now += 1e6
    assert slot.unload_if_idle() is False


def test_concurrent_first_use_loads_once() -> None:
    gate = threading.Event()
    started = threading.Event()
    loads: list[int] = []

    def loader() -> str:
        loads.append(1)
        started.set()
        gate.wait(5)
        return "model"

    slot: ModelSlot[str] = ModelSlot("m", loader)
    results: list[str] = []

    def use() -> None:
        with slot.lease() as m:
            results.append(m)

    threads = [threading.Thread(target=use) for _ in range(5)]
    for t in threads:
        t.start()
    assert started.wait(5)  # the load is under way (and held at the gate)
    assert slot.state is ModelState.LOADING
    gate.set()
    for t in threads:
        t.join()
    assert loads == [1] and results == ["model"] * 5


def test_background_preload() -> None:
    slot: ModelSlot[str] = ModelSlot("m", lambda: "model")
    slot.preload_in_background().join(5)
    assert slot.state is ModelState.READY


def test_embedder_idle_unload_and_reload(minilm_spec: EmbeddingSpec) -> None:
    now = [1000.0]
    emb = Embedder(minilm_spec, idle_unload_s=0.05, clock=lambda: now[0])
    try:
        emb.embed_sync(["warm up"])
        assert emb.status()["state"] == "ready"
        assert not emb.slot.unload_if_idle()  # used just now
        now[0] += 0.1
        assert emb.slot.unload_if_idle()
        assert emb.status()["state"] == "unloaded"
        assert emb.embed_sync(["again"]).vectors.shape == (1, 384)
        assert emb.slot.load_count == 2
    finally:
        emb.close()
