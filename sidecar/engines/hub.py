"""EngineHub: builds the engines from settings and reports their health and status.

The daemon makes one hub at startup::

    hub = EngineHub.from_settings(settings.embedding, settings.summarizer,
                                  search_roots=[settings.data_path.parent / "models"])
    fingerprint = hub.require_embedder().fingerprint   # cheap: hashes, no ONNX load
    await hub.start()                                  # background preload, idle-unload task
    ...
    await hub.close()

Construction never raises for asset or configuration problems: they are recorded and surface in
``health()`` / ``status()`` and as :class:`ModelUnavailableError` from ``require_embedder()``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.core import ComponentState, Seq2SeqState

from .embedder import Embedder
from .embedding_spec import resolve_embedding
from .errors import EngineError, ModelUnavailableError
from .lifecycle import ModelSlot, ModelState
from .seq2seq import Seq2SeqSummarizer, resolve_summarizer
from .summarizer import Summarizer

if TYPE_CHECKING:
    from sidecar.config import EmbeddingSettings, Settings, SummarizerSettings


class EngineHub:
    """Owns the embedder and the summarizers; an App component (start/close/states/counts)."""

    name = "engines"

    def __init__(
        self,
        embedder: Embedder | None,
        summarizer: Summarizer,
        *,
        embedder_error: str = "",
        preload: bool = False,
    ) -> None:
        self.embedder = embedder
        self.summarizer = summarizer
        self.embedder_error = embedder_error
        self.preload = preload
        self._idle_task: asyncio.Task[None] | None = None

    @classmethod
    def from_settings(
        cls,
        embedding: EmbeddingSettings,
        summarizer: SummarizerSettings,
        *,
        search_roots: Sequence[Path] = (),
        summarizer_threads: int = 1,
        max_batch_tokens: int = 8192,
    ) -> EngineHub:
        embedder: Embedder | None = None
        embedder_error = ""
        try:
            spec = resolve_embedding(embedding, search_roots=search_roots)
            embedder = Embedder(
                spec,
                max_batch=embedding.max_batch,
                max_wait_ms=embedding.max_wait_ms,
                idle_unload_s=embedding.idle_unload_s,
                threads=embedding.threads,
                lanes=embedding.lanes,
                spin=embedding.spin,
                int8_matmul=embedding.int8_matmul,
                max_batch_tokens=max_batch_tokens,
            )
        except EngineError as exc:
            embedder_error = str(exc)

        seq: Seq2SeqSummarizer | None = None
        unavailable = ""
        try:
            sspec = resolve_summarizer(summarizer, search_roots=search_roots)
            if sspec is None:
                backend = (summarizer.backend or "bundled").strip().lower()
                unavailable = (
                    "extractive summarizer selected by configuration"
                    if backend == "extractive" or summarizer.profile.strip() == "extractive"
                    else f"no {summarizer.profile or 't5-small'} seq2seq assets found "
                    "(set LIBRAVDB_SUMMARIZER_MODEL_PATH to a directory with summarizer.json)"
                )
            else:
                seq = Seq2SeqSummarizer(
                    sspec, idle_unload_s=summarizer.idle_unload_s, threads=summarizer_threads
                )
        except EngineError as exc:
            unavailable = str(exc)
        summ = Summarizer(
            embedder,
            seq,
            seq2seq_unavailable=unavailable,
            max_new_tokens=summarizer.max_new_tokens,
        )
        return cls(embedder, summ, embedder_error=embedder_error, preload=embedding.preload)

    @classmethod
    def for_tool(cls, settings: Settings) -> EngineHub:
        """The engines of an offline tool (reembed, doctor): the configured models, looked
        for in ``models/`` beside the data directory too, as the daemon does."""
        return cls.from_settings(
            settings.embedding,
            settings.summarizer,
            search_roots=[settings.data_path.parent / "models"],
        )

    # -- lifecycle -------------------------------------------------------------------------------
    def _slots(self) -> list[ModelSlot[Any]]:
        slots: list[ModelSlot[Any]] = []
        if self.embedder is not None:
            slots.append(self.embedder.slot)
        if self.summarizer.seq2seq is not None:
            slots.append(self.summarizer.seq2seq.slot)
        return slots

    async def start(self) -> None:
        """Begin background preload of the embedder (if configured) and the idle-unload task."""
        if self.preload and self.embedder is not None:
            self.embedder.preload()
        idle = [s.idle_unload_s for s in self._slots() if s.idle_unload_s > 0]
        if idle and self._idle_task is None:
            period = max(0.05, min(5.0, min(idle) / 4))
            self._idle_task = asyncio.create_task(self._idle_loop(period), name="engine-idle")

    async def _idle_loop(self, period: float) -> None:
        while True:
            await asyncio.sleep(period)
            for slot in self._slots():
                slot.unload_if_idle()

    async def close(self) -> None:
        if self._idle_task is not None:
            self._idle_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._idle_task
            self._idle_task = None
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._close_sync)

    def _close_sync(self) -> None:
        self.summarizer.close()
        if self.embedder is not None:
            self.embedder.close()

    # -- queries ---------------------------------------------------------------------------------
    def require_embedder(self) -> Embedder:
        if self.embedder is None:
            raise ModelUnavailableError(f"embedder unavailable: {self.embedder_error}")
        return self.embedder

    def health(self) -> dict[str, Any]:
        if self.embedder is None:
            return {"ok": False, "message": f"embedder unavailable: {self.embedder_error}"}
        state = self.embedder.slot.state
        if state is ModelState.FAILED:
            return {"ok": False, "message": f"embedder failed: {self.embedder.slot.reason}"}
        if state is ModelState.LOADING:
            return {"ok": True, "message": "ok (embedder loading)"}
        return {"ok": True, "message": "ok"}

    def status(self) -> dict[str, Any]:
        emb: dict[str, Any]
        if self.embedder is None:
            emb = {"state": ModelState.FAILED.value, "reason": self.embedder_error}
        else:
            emb = self.embedder.status()
        return {"embedder": emb, "summarizer": self.summarizer.status()}

    # -- App component protocol ------------------------------------------------------------------
    def states(self) -> dict[str, ComponentState]:
        """``embedder`` and ``summarizer`` readiness for health/status.

        A failed seq2seq model is reported as ``degraded`` (not ``failed``): summaries keep
        working through the extractive fallback, so it must not turn health red.
        """
        if self.embedder is None:
            emb = ComponentState(state=ModelState.FAILED.value, reason=self.embedder_error)
        else:
            e = self.embedder
            fallback = e.spec.fallback_reason
            failed = e.slot.state is ModelState.FAILED
            emb = ComponentState(
                # running another profile than the configured one (embedding.fallback_profile)
                state="degraded" if fallback and not failed else e.slot.state.value,
                reason=fallback if fallback and not failed else e.slot.reason,
                profile=e.profile,
                fingerprint=e.fingerprint,
                dims=e.dims,
                compute=dict(e.compute) or None,
            )
        seq = self.summarizer.seq2seq
        if seq is None:
            summ = ComponentState(
                state=ModelState.READY.value,
                reason=self.summarizer.seq2seq_unavailable,
                profile="extractive",
                seq2seq=Seq2SeqState(state="disabled", reason=self.summarizer.seq2seq_unavailable),
            )
        else:
            state = seq.slot.state.value
            reason = seq.slot.reason
            if seq.slot.state is ModelState.FAILED:
                state = "degraded"
                reason = f"seq2seq failed ({reason}); extractive fallback in use"
            summ = ComponentState(
                state=state,
                reason=reason,
                profile=seq.spec.profile,
                fingerprint=seq.spec.fingerprint,
                seq2seq=Seq2SeqState(
                    state=seq.slot.state.value, reason=seq.slot.reason, profile=seq.spec.profile
                ),
            )
        return {"embedder": emb, "summarizer": summ}

    async def counts(self) -> dict[str, int]:
        return {}
