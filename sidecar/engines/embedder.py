"""The ONNX embedding engine.

* ``await embedder.embed(texts, kind=...)`` from the event loop: requests are micro-batched
  (see :mod:`.batching`) and run in the embedder's worker thread.
* ``embedder.embed_sync(texts, kind=...)`` from worker threads (for example a store re-embed):
  runs in the calling thread, sharing the same loaded model.

Both return an :class:`EmbedResult` with float32 vectors [n, dims] and a per-text
``truncated`` flag. Inference: tokenize with the tokenizer.json (its own truncation and padding
are disabled; truncation happens here and is reported), run the ONNX model on length-sorted
sub-batches padded per sub-batch, pool (masked mean / CLS / model output as is), L2-normalize.

Long documents of a windowed profile (Nomic: 512-token windows, stride 256) are embedded window by
window; every window carries the special tokens and the task prefix; the window vectors are
averaged and the mean is re-normalized. Documents are capped at ``maxContextTokens`` content
tokens (8192 for Nomic), queries at one window; anything beyond is dropped and reported.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
import structlog

from sidecar.allocator import tuning_enabled

from . import assets, int8_matmul
from .batching import MicroBatcher
from .embedding_spec import SUPPORTED_INPUTS, EmbeddingSpec
from .errors import (
    AssetError,
    EngineError,
    InvalidInputError,
    ManifestError,
    ModelLoadError,
)
from .lifecycle import ModelSlot
from .text import Pieces, TextTokenizer, clean_text
from .vectors import F32, l2_normalize, masked_mean, tier_vector

Kind = Literal["query", "document"]
KINDS: tuple[str, ...] = ("query", "document")
PROBE_TEXT = "dimension probe"
# The probe text measured 0.99985 against the float path (the worst of 1,948 LoCoMo texts:
# 0.9985, a two-word turn); a kernel that does worse on the probe is broken.
INT8_MIN_COSINE = 0.999

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class EmbedResult:
    vectors: F32  # float32 [n, dims]
    truncated: list[bool]
    windows: list[int]  # model passes per text (> 1 only for windowed long documents)
    model: str  # profile name
    dims: int

    def __len__(self) -> int:
        return len(self.truncated)


@dataclass(frozen=True)
class _Item:
    text: str
    kind: str


@dataclass(frozen=True)
class _ItemOut:
    vector: F32
    truncated: bool
    windows: int


@dataclass
class _Loaded:
    session: ort.InferenceSession
    # Single-threaded session for batches that run beside another one (None with one lane).
    lane_session: ort.InferenceSession | None
    tokenizer: TextTokenizer
    feeds: list[tuple[str, Any]]  # (input name, numpy dtype)
    output: str
    prefix_ids: dict[str, list[int]]


@dataclass(frozen=True)
class _Seq:
    owner: int
    ids: list[int]
    types: list[int]


_OPT_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def default_lanes() -> int:
    """One lane per core, at most four: beyond that, batches are the better use of cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(4, cores or 1))


def _session_options(
    threads: int, optimization: str = "basic", *, spin: bool = False
) -> ort.SessionOptions:
    # "basic" (constant folding, redundant-node removal) measured fastest for the int8 MiniLM
    # export on x86 (the extended fusions cost ~7 % on batches); see docs/engines.md.
    so = ort.SessionOptions()
    so.graph_optimization_level = _OPT_LEVELS.get(
        optimization, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    )
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.inter_op_num_threads = 1
    if threads > 0:
        so.intra_op_num_threads = threads
    so.log_severity_level = 3
    # The arena keeps each lane's peak activation memory for good: one ingest of 200 long
    # messages held +900 MB with two lanes. Without it the buffers go back to malloc
    # (sidecar/allocator.py makes them go back to the OS); docs/benchmarks.md § resident.
    so.enable_cpu_mem_arena = not tuning_enabled()
    if not spin:
        # onnxruntime's pool threads otherwise busy-wait for tens of milliseconds after each
        # run: on a small machine that takes a core from whatever the daemon does next
        # (assemble p50 35 -> 21 ms with it off, same embedding latency; docs/engines.md).
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return so


def _float_products(reason: str) -> dict[str, Any]:
    return {"matmul": "float32", "reason": reason}


_ORT_INT_TYPES: dict[str, Any] = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}


class Embedder:
    def __init__(  # noqa: PLR0913 - keyword-only tuning options
        self,
        spec: EmbeddingSpec,
        *,
        max_batch: int = 32,
        max_wait_ms: float = 2.0,
        idle_unload_s: float = 0.0,
        threads: int = 0,
        lanes: int = 0,
        spin: bool = False,
        int8_matmul: bool = True,
        max_batch_tokens: int = 8192,
        retry_after_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self.max_batch = max(1, int(max_batch))
        self.max_batch_tokens = max(512, int(max_batch_tokens))
        self.threads = int(threads)
        self.spin = bool(spin)
        self.int8_matmul = bool(int8_matmul)
        # How the loaded model computes its products (status); set by each load.
        self.compute: dict[str, Any] = {}
        self.lanes = int(lanes) if lanes > 0 else default_lanes()
        self.slot: ModelSlot[_Loaded] = ModelSlot(
            f"embedder:{spec.profile}",
            self._load,
            idle_unload_s=idle_unload_s,
            retry_after_s=retry_after_s,
            clock=clock,
        )
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.lanes, thread_name_prefix="embedder"
        )
        self.batcher: MicroBatcher[_Item, _ItemOut | EngineError] = MicroBatcher(
            self._run_batch,
            executor=self._executor,
            max_batch=self.max_batch,
            max_wait_ms=max_wait_ms,
            lanes=self.lanes,
        )
        self._closed = False
        self._lock = threading.Lock()

    # -- identity --------------------------------------------------------------------------------
    @property
    def dims(self) -> int:
        return self.spec.dimensions

    @property
    def fingerprint(self) -> str:
        return self.spec.fingerprint

    @property
    def profile(self) -> str:
        return self.spec.profile

    @property
    def family(self) -> str:
        return self.spec.family

    @property
    def matryoshka_dims(self) -> tuple[int, ...]:
        return self.spec.matryoshka_dims

    @property
    def supports_matryoshka(self) -> bool:
        return self.spec.supports_matryoshka

    def identity(self) -> dict[str, Any]:
        return self.spec.identity()

    def tier(self, vec: npt.NDArray[np.floating], dims: int) -> F32:
        return tier_vector(vec, dims)

    def tiers(self, vec: npt.NDArray[np.floating]) -> dict[int, F32]:
        return {d: tier_vector(vec, d) for d in self.spec.matryoshka_dims}

    def status(self) -> dict[str, Any]:
        snap = self.slot.snapshot()
        return {
            "profile": self.spec.profile,
            "family": self.spec.family,
            "dims": self.spec.dimensions,
            "fingerprint": self.spec.fingerprint,
            "state": snap["state"],
            "reason": snap["reason"],
            "lifecycle": snap,
            "model": self.spec.describe(),
            "compute": dict(self.compute),
            "batching": {
                "maxBatch": self.max_batch,
                "maxWaitMs": self.batcher.max_wait_s * 1000.0,
                "lanes": self.lanes,
                "spin": self.spin,
                **self.batcher.stats.as_dict(),
            },
        }

    # -- public API ------------------------------------------------------------------------------
    def _prepare(self, texts: Sequence[str], kind: str) -> list[_Item]:
        if kind not in KINDS:
            raise InvalidInputError(f"kind must be 'query' or 'document', got {kind!r}")
        if isinstance(texts, str):
            raise InvalidInputError("texts must be a list of strings, not a single string")
        return [_Item(clean_text(t, i), kind) for i, t in enumerate(texts)]

    def _result(self, outs: Sequence[_ItemOut | EngineError]) -> EmbedResult:
        for out in outs:
            if isinstance(out, EngineError):
                raise out
        good = [o for o in outs if isinstance(o, _ItemOut)]
        vecs = (
            np.stack([o.vector for o in good]).astype(np.float32, copy=False)
            if good
            else np.zeros((0, self.dims), dtype=np.float32)
        )
        return EmbedResult(
            vectors=vecs,
            truncated=[o.truncated for o in good],
            windows=[o.windows for o in good],
            model=self.spec.profile,
            dims=self.dims,
        )

    async def embed(self, texts: Sequence[str], kind: Kind | str = "document") -> EmbedResult:
        """Embed texts from the event loop (micro-batched, runs in the worker thread)."""
        items = self._prepare(texts, kind)
        if self._closed:
            raise EngineError("the embedder is closed")
        return self._result(await self.batcher.submit(items))

    async def embed_one(self, text: str, kind: Kind | str = "query") -> F32:
        vec: F32 = (await self.embed([text], kind)).vectors[0]
        return vec

    def embed_sync(self, texts: Sequence[str], kind: Kind | str = "document") -> EmbedResult:
        """Embed texts in the calling thread (never call this on the event loop thread)."""
        items = self._prepare(texts, kind)
        return self._result(self._run_batch(items, False))

    def preload(self) -> None:
        """Start loading in the background (errors show in status)."""
        self.slot.preload_in_background()

    async def ensure_ready(self) -> None:
        """Load now (in a worker thread) and raise the load error if any."""
        await asyncio.get_running_loop().run_in_executor(None, self.slot.ensure_loaded)

    def close(self) -> None:
        self._closed = True
        self._executor.shutdown(wait=True, cancel_futures=True)
        self.slot.close()

    # -- loading ---------------------------------------------------------------------------------
    def _load(self) -> _Loaded:
        spec = self.spec
        # Re-check the hashes (cached by stat): a file replaced since start is caught here.
        for ref, expected, kind in (
            (spec.model, spec.model_sha256, "model"),
            (spec.tokenizer, spec.tokenizer_sha256, "tokenizer"),
        ):
            actual = assets.sha256_of(ref)
            if actual != expected:
                raise AssetError(
                    f"embedding {kind} {ref} changed since the daemon started (sha256 {actual}, "
                    f"expected {expected}); restart the daemon after changing model files",
                    path=str(ref),
                )
        tok = TextTokenizer(
            spec.tokenizer, add_special_tokens=spec.add_special_tokens, fix=spec.fix_hint
        )
        try:
            session = self._session(str(spec.model.path), self.threads)
        except Exception as exc:
            raise AssetError(
                f"cannot load ONNX model {spec.model}: {exc}. The file is corrupt or not an ONNX "
                f"model; {spec.fix_hint}",
                path=str(spec.model),
            ) from exc
        inputs = {i.name: i.type for i in session.get_inputs()}
        unsupported = [n for n in inputs if n not in SUPPORTED_INPUTS]
        if unsupported:
            raise ModelLoadError(
                f"ONNX model {spec.model} needs inputs {unsupported} that the embedder cannot "
                f"provide (supported: {', '.join(SUPPORTED_INPUTS)}); use a standard "
                "sentence-transformers export"
            )
        listed_missing = [n for n in spec.input_names if n not in inputs]
        if listed_missing and spec.manifest is not None:
            raise ManifestError(
                f"{spec.manifest}: inputNames lists {listed_missing} but {spec.model} has inputs "
                f"{sorted(inputs)}; fix inputNames",
                path=str(spec.manifest),
            )
        feeds: list[tuple[str, Any]] = []
        for name in inputs:
            dtype = _ORT_INT_TYPES.get(inputs[name])
            if dtype is None:
                raise ModelLoadError(
                    f"ONNX model {spec.model} input {name} has type {inputs[name]}; expected "
                    "int64 or int32"
                )
            feeds.append((name, dtype))
        outputs = [o.name for o in session.get_outputs()]
        if spec.output_name not in outputs:
            raise ManifestError(
                f"{spec.source}: outputName {spec.output_name!r} is not an output of "
                f"{spec.model} (outputs: {outputs}); fix outputName",
                path=str(spec.manifest or spec.model),
            )
        prefix_ids = {
            "document": tok.encode(spec.document_prefix, special=False).ids
            if spec.document_prefix
            else [],
            "query": tok.encode(spec.query_prefix, special=False).ids if spec.query_prefix else [],
        }
        loaded = _Loaded(session, None, tok, feeds, spec.output_name, prefix_ids)
        # Dimension probe: the model must produce what the spec says.
        probe = self._compute(loaded, [_Item(PROBE_TEXT, "document")])[0]
        if isinstance(probe, EngineError):
            raise probe
        if self.int8_matmul:
            int8, self.compute = self._int8_sessions(loaded, probe.vector)
            if int8 is not None:
                return int8
        else:
            self.compute = _float_products("disabled by embedding.int8_matmul")
        if self.lanes > 1:
            loaded.lane_session = self._session(str(spec.model.path), 1)
        return loaded

    def _session(self, source: str | bytes, threads: int) -> ort.InferenceSession:
        return ort.InferenceSession(
            source, _session_options(threads, spin=self.spin), providers=["CPUExecutionProvider"]
        )

    def _int8_sessions(self, loaded: _Loaded, probe: F32) -> tuple[_Loaded | None, dict[str, Any]]:
        """The model with its int8-weight products computed in int8 (:mod:`.int8_matmul`), once
        it reproduces the float path's probe vector, and the status record of the products
        (without sessions: the float path stays, and the record says why)."""
        model = self.spec.model
        if model.member is not None:
            return None, _float_products("the model is read from an archive")
        try:
            rewritten = int8_matmul.rewrite_int8_matmuls(model.path)
            if rewritten is None:
                return None, _float_products("the model has no int8-weight products")
            session = self._session(rewritten.model, self.threads)
            lane = self._session(rewritten.model, 1) if self.lanes > 1 else None
            candidate = replace(loaded, session=session, lane_session=lane)
            out = self._compute(candidate, [_Item(PROBE_TEXT, "document")])[0]
            if isinstance(out, EngineError):
                raise out
            cosine = float(np.dot(out.vector, probe))
        except Exception as exc:  # any failure leaves the float path, which already works
            reason = f"int8 products unavailable: {type(exc).__name__}: {exc}"
            log.warning("embedder.int8_matmul_unavailable", error=reason)
            return None, _float_products(reason)
        if cosine < INT8_MIN_COSINE:
            log.warning("embedder.int8_matmul_rejected", cosine=cosine)
            return None, _float_products(
                f"int8 products disagree with the float path (probe cosine {cosine:.5f} < "
                f"{INT8_MIN_COSINE})"
            )
        return candidate, {
            "matmul": "int8",
            "matmuls": rewritten.matmuls,
            "blockSize": rewritten.block_size,
            "probeCosine": round(cosine, 6),
        }

    # -- inference -------------------------------------------------------------------------------
    def _run_batch(self, items: list[_Item], parallel: bool) -> list[_ItemOut | EngineError]:
        try:
            with self.slot.lease() as loaded:
                return self._compute(loaded, items, parallel)
        except EngineError as exc:
            return [exc] * len(items)
        except Exception as exc:  # never let an unexpected runtime error escape untyped
            return [EngineError(f"embedding failed: {type(exc).__name__}: {exc}")] * len(items)

    def _plan(self, loaded: _Loaded, items: Sequence[_Item]) -> tuple[list[_Seq], list[bool]]:
        spec = self.spec
        tok = loaded.tokenizer
        texts: list[str] = []
        for it in items:
            prefix = spec.document_prefix if it.kind == "document" else spec.query_prefix
            texts.append(prefix + it.text)
        windowed = [spec.window_tokens > 0 and it.kind == "document" for it in items]
        seqs: list[_Seq] = []
        truncated = [False] * len(items)
        # Content budget used for the cheap pre-cut of huge texts.
        win_budget = spec.max_context_tokens
        flat_budget = spec.window_tokens if spec.window_tokens > 0 else spec.max_context_tokens
        groups: dict[int, list[int]] = {}
        for i, w in enumerate(windowed):
            groups.setdefault(win_budget if w else flat_budget, []).append(i)
        pieces: dict[int, Pieces] = {}
        for budget, idxs in groups.items():
            for i, p in zip(idxs, tok.pieces_batch([texts[i] for i in idxs], budget), strict=True):
                pieces[i] = p
        for i in range(len(items)):
            p = pieces[i]
            specials = len(p.lead) + len(p.trail)
            if not windowed[i]:
                room = flat_budget - specials
                if room <= 0:
                    raise ManifestError(
                        f"{spec.source}: maxContextTokens {flat_budget} leaves no room for text"
                    )
                content, ctypes = p.content, p.content_types
                if len(content) > room:
                    truncated[i] = True
                    content, ctypes = content[:room], ctypes[:room]
                seqs.append(
                    _Seq(i, p.lead + content + p.trail, p.lead_types + ctypes + p.trail_types)
                )
                continue
            # Windowed document: [lead] + task prefix + body chunk + [trail] per window.
            task: list[int] = loaded.prefix_ids[items[i].kind]
            k = len(task)
            if k and p.content[:k] == task:
                body = p.content[k:]
            else:
                body, task, k = p.content, [], 0
            cap = spec.max_context_tokens - specials - k
            if len(body) > cap:
                truncated[i] = True
                body = body[: max(cap, 0)]
            chunk = spec.window_tokens - specials - k
            if chunk <= 0:
                raise ManifestError(
                    f"{spec.source}: windowTokens {spec.window_tokens} leaves no room for text "
                    "after the special tokens and the prefix"
                )
            stride = max(1, min(spec.window_stride, chunk))
            start = 0
            while True:
                part = body[start : start + chunk]
                ids = p.lead + task + part + p.trail
                seqs.append(_Seq(i, ids, [0] * len(ids)))
                if start + chunk >= len(body):
                    break
                start += stride
        return seqs, truncated

    def _buckets(self, seqs: Sequence[_Seq]) -> list[list[int]]:
        order = sorted(range(len(seqs)), key=lambda j: (-len(seqs[j].ids), j))
        buckets: list[list[int]] = []
        cur: list[int] = []
        longest = 0
        for j in order:
            n = len(seqs[j].ids)
            if cur and (
                len(cur) >= self.max_batch
                or (len(cur) + 1) * longest > self.max_batch_tokens
                or (2 * n < longest and len(cur) * longest >= 256)
            ):
                buckets.append(cur)
                cur = []
            if not cur:
                longest = n
            cur.append(j)
        if cur:
            buckets.append(cur)
        return buckets

    def _run_bucket(
        self, loaded: _Loaded, seqs: Sequence[_Seq], idx: list[int], parallel: bool
    ) -> F32:
        longest = max(len(seqs[j].ids) for j in idx)
        ids = np.zeros((len(idx), longest), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for r, j in enumerate(idx):
            n = len(seqs[j].ids)
            ids[r, :n] = seqs[j].ids
            mask[r, :n] = 1
            types[r, :n] = seqs[j].types
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        feed = {name: arrays[name].astype(dtype, copy=False) for name, dtype in loaded.feeds}
        session = loaded.lane_session if parallel and loaded.lane_session else loaded.session
        try:
            out = session.run([loaded.output], feed)[0]
        except Exception as exc:
            raise ModelLoadError(f"embedding model {self.spec.model} failed to run: {exc}") from exc
        out = np.asarray(out)
        if out.ndim == 3:
            if self.spec.pooling == "cls":
                pooled = out[:, 0, :].astype(np.float32)
            elif self.spec.pooling == "mean":
                pooled = masked_mean(out, mask)
            else:
                raise ManifestError(
                    f"{self.spec.source}: output {loaded.output} is per-token "
                    f"{list(out.shape)} but pooling is 'none'; set pooling to 'mean' or 'cls'"
                )
        elif out.ndim == 2:
            pooled = out.astype(np.float32)
        else:
            raise ModelLoadError(
                f"embedding model {self.spec.model} output {loaded.output} has shape "
                f"{list(out.shape)}; expected [batch, dims] or [batch, seq, dims]"
            )
        if pooled.shape[1] != self.spec.dimensions:
            raise ManifestError(
                f"{self.spec.model} produces {pooled.shape[1]}-dimensional vectors but "
                f"{self.spec.source} says {self.spec.dimensions}; fix 'dimensions' (or the "
                "LIBRAVDB_EMBEDDING_DIMENSIONS setting)",
                path=str(self.spec.manifest or self.spec.model),
            )
        return l2_normalize(pooled) if self.spec.normalize else pooled

    def _compute(
        self, loaded: _Loaded, items: Sequence[_Item], parallel: bool = False
    ) -> list[_ItemOut | EngineError]:
        try:
            seqs, truncated = self._plan(loaded, items)
            vecs = np.zeros((len(seqs), self.spec.dimensions), dtype=np.float32)
            for idx in self._buckets(seqs):
                vecs[idx] = self._run_bucket(loaded, seqs, idx, parallel)
        except EngineError as exc:
            return [exc] * len(items)
        owners = np.array([s.owner for s in seqs], dtype=np.int64)
        out: list[_ItemOut | EngineError] = []
        for i in range(len(items)):
            rows = vecs[owners == i]
            if rows.shape[0] == 1:
                vec = rows[0]
            else:
                vec = rows.mean(axis=0)
                if self.spec.normalize:
                    vec = l2_normalize(vec)
            out.append(_ItemOut(vec.astype(np.float32, copy=False), truncated[i], rows.shape[0]))
        return out
