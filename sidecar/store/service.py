"""The store as a daemon component (App service): open/close, health, counts, embedding.

Install it in ``sidecar/services.py``::

    hub = EngineHub.from_settings(...)
    app.provide(EngineHub, hub)
    app.provide(StoreService, StoreService(app.settings, hub=hub))

Start-up opens the store with the embedder's dimension and fingerprint: the embedded
SQLite store in ``settings.data_path``, or the PostgreSQL database of ``store.url``
(``--store``, ``LIBRAVDB_STORE_URL``), which several daemons may share. A second daemon on
the same directory, a fingerprint mismatch, an unusable disk, an unreachable server or a
database without the ``vector`` extension make start-up fail with one clear line
(``StartupError``); a URL's password never appears in it or in a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import structlog

from protocol.core import ComponentState
from sidecar.config import scrub, url_secrets
from sidecar.errors import StartupError
from sidecar.logging_setup import redact_in_logs
from sidecar.store.aio import AsyncStore
from sidecar.store.errors import StoreError
from sidecar.store.interface import StoreBackend
from sidecar.store.probe import StoreProbe

if TYPE_CHECKING:
    from sidecar.config import Settings
    from sidecar.engines import EngineHub

log = structlog.get_logger(__name__)

F32 = npt.NDArray[np.float32]
# async (texts, kind) -> float32 [n, dims]; kind is "document" or "query"
AsyncEmbed = Callable[[Sequence[str], str], Awaitable[F32]]


class StoreStartError(StartupError):
    """The store could not open; the daemon must exit 1 with this message."""


class StoreService:
    """App component owning the :class:`AsyncStore`."""

    name = "store"

    def __init__(  # noqa: PLR0913 - keyword-only test seams (embed, dims)
        self,
        settings: Settings,
        *,
        hub: EngineHub | None = None,
        embed: AsyncEmbed | None = None,
        embed_dims: int | None = None,
        fingerprint: str | None = None,
        tiers: Sequence[int] | None = None,
        ann_dims: int | None = None,
        index_threads: int = 1,
        store_kwargs: dict[str, Any] | None = None,
        on_fatal: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        # called (event loop) when the open store turns out unusable: App.fail
        self._on_fatal = on_fatal
        self.hub = hub
        self._embed = embed
        self._embed_dims = embed_dims
        self._fingerprint = fingerprint
        self._tiers = tiers
        self._ann_dims = ann_dims
        self._index_threads = index_threads
        self._store_kwargs = store_kwargs or {}
        self._store: AsyncStore | None = None
        self._error = ""
        self._probe = StoreProbe(settings.store_display)
        self._last_counts: dict[str, int] = {}

    # ---- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        dims, fingerprint, tiers = self._embed_dims, self._fingerprint, self._tiers
        model = ""
        no_embedder = ""
        if self.hub is not None:
            try:
                embedder = self.hub.require_embedder()
            except Exception as exc:  # the engines report it; open with what the store knows
                no_embedder = str(exc)
                log.warning("store.no_embedder", error=no_embedder)
            else:
                dims = dims or embedder.dims
                fingerprint = embedder.fingerprint if fingerprint is None else fingerprint
                model = model or embedder.profile
                if tiers is None and embedder.supports_matryoshka:
                    tiers = tuple(d for d in embedder.matryoshka_dims if d < embedder.dims)
        if not dims:
            # the cause, not its consequence: the model that could not load and why
            self._error = no_embedder or "embedding dimension unknown (no embedder)"
            raise StoreStartError(f"cannot open the store: {self._error}")
        location = self.settings.store_location
        extra: dict[str, Any] = {}
        if self.settings.store_url:
            redact_in_logs(*url_secrets(self.settings.store_url))
            extra["pool_size"] = self.settings.store.pool_size
        try:
            self._store = await AsyncStore.open(
                location,
                embed_dims=dims,
                fingerprint=fingerprint or "",
                model=model,
                tiers=tuple(tiers or ()),
                ann_dims=self._ann_dims,
                settings=self.settings.store,
                index_threads=self._index_threads,
                **self._store_kwargs,
                **extra,
            )
        except StoreError as exc:
            self._error = self._masked(exc.message)
            raise StoreStartError(self._error) from exc
        except Exception as exc:  # a driver's own error that the store did not map
            if not self.settings.store_url:
                raise
            detail = self._masked(str(exc).strip().splitlines()[0] if str(exc).strip() else "")
            self._error = f"cannot open the store at {self.settings.store_display}: {detail}"
            raise StoreStartError(self._error) from None
        # A large SQLite database's pages are checked beside the start (page_check.py):
        # damage found then ends the daemon as damage found at open does.
        loop = asyncio.get_running_loop()

        def failed(exc: Exception) -> None:  # the check's thread
            with contextlib.suppress(RuntimeError):  # the loop is gone: exiting anyway
                loop.call_soon_threadsafe(self._failed, exc)

        self._store.store.on_failure(failed)

    def _failed(self, exc: Exception) -> None:
        message = exc.message if isinstance(exc, StoreError) else str(exc)
        self._error = self._masked(message)
        log.error("store.failed", error=getattr(exc, "code", type(exc).__name__))
        if self._on_fatal is not None:
            self._on_fatal(self._error)

    def _masked(self, text: str) -> str:
        """``text`` without the URL's password (however the URL was quoted in it), on one
        line (a driver's message may span several, or quote them as ``\\n``)."""
        url = self.settings.store_url
        if not url:
            return text
        text = " ".join(text.replace("\\n", " ").replace("\\t", " ").split())
        return scrub(text, url, min_len=1)

    @property
    def backend(self) -> str:
        """``sqlite`` or ``postgresql`` (what the settings name, open or not)."""
        return "postgresql" if self.settings.store_url else "sqlite"

    async def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            await store.aclose()

    # ---- access ------------------------------------------------------------------------

    @property
    def store(self) -> AsyncStore:
        if self._store is None:
            raise StoreError("store unavailable")
        return self._store

    @property
    def ready(self) -> bool:
        return self._store is not None

    async def embed(self, texts: Sequence[str], kind: str) -> F32:
        """Embed with the injected function, else the hub's embedder."""
        if self._embed is not None:
            return await self._embed(texts, kind)
        if self.hub is None:
            raise StoreError("no embedder configured")
        res = await self.hub.require_embedder().embed(list(texts), kind)
        return res.vectors

    # ---- reporting ---------------------------------------------------------------------

    async def probe(self) -> None:
        """Ask a PostgreSQL server whether it answers (``probe.py``: cached, bounded), so
        that ``health`` and ``status`` report the store ``unavailable`` while it does not."""
        ping = getattr(self._store.store, "ping", None) if self._store is not None else None
        if callable(ping):  # only a store with a server to lose has one (PgStore)
            await self._probe.check(ping)

    def states(self) -> dict[str, ComponentState]:
        if self._store is not None:
            s = self._store.store
            down = self._probe.down
            state = "failed" if self._error else "ready" if down is None else "unavailable"
            return {
                "store": ComponentState(
                    state=state,
                    reason=self._error or down or "",
                    profile="postgresql+pgvector"
                    if self.backend == "postgresql"
                    else "sqlite+hnsw",
                    fingerprint=s.fingerprint,
                    dims=s.embed_dims,
                    page_check=s.page_check_report(),
                )
            }
        if self._error:
            return {"store": ComponentState(state="failed", reason=self._error)}
        return {"store": ComponentState(state="unloaded")}

    async def counts(self) -> dict[str, int]:
        """Status counts (raw collection-name prefixes) plus the total."""
        if self._store is None:
            return {}
        if self._probe.down is not None:  # the server is away: the counts it last gave
            return dict(self._last_counts)
        # in the read pool: on a PostgreSQL store each count is a round trip to the server
        self._last_counts = await self._store.call(_counts, self._store.store)
        return dict(self._last_counts)


def _counts(s: StoreBackend) -> dict[str, int]:
    return {
        "turns": s.count_prefix("turns:"),
        "memories": s.count_prefix("user:"),
        "lifecycleHints": s.count_prefix("_internal:lifecycle_journal"),
        "records": s.total_records(),
        "collections": len(s.collections()),
        # damaged records skipped since start (each logged once as store.bad_record)
        "badRecords": len(s.bad_records),
    }
