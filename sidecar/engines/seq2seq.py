"""Seq2seq (T5-layout ONNX) summarizer.

Assets (``summarizer.json`` manifest, relative paths against its directory):

* ``encoder_model.onnx``: ``input_ids``, ``attention_mask`` -> ``last_hidden_state``;
* ``decoder_model.onnx``: ``input_ids``, ``encoder_hidden_states``, ``encoder_attention_mask``
  -> ``logits`` (and, in optimum exports, ``present.{i}.{decoder,encoder}.{key,value}``);
* optional ``decoder_with_past_model.onnx``: one new token plus
  ``past_key_values.{i}.{decoder,encoder}.{key,value}`` -> ``logits`` and the new
  ``present.{i}.decoder.*``. Used for KV-cache decoding when present and when the plain decoder
  exports the ``present.*`` outputs that seed the cache;
* ``tokenizer.json``.

Prompt: ``prefix`` (``summarize: ``) + the stripped non-empty turns joined by newlines, tokenized
with special tokens. If it exceeds ``maxContextTokens`` (512), the oldest turns are dropped until
it fits (the most recent turns are kept); if the newest turn alone is too long, its last tokens
are kept. Greedy decoding from the decoder start token (``<pad>`` for T5) until ``</s>`` (not
emitted) or ``max_new_tokens``; the cancellation event is checked before every step.
Confidence = exp(mean log-probability of the emitted tokens), 0 when nothing was emitted.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from sidecar.allocator import tuning_enabled
from sidecar.config import SummarizerSettings

from . import assets
from .assets import AssetRef
from .errors import (
    AssetError,
    AssetNotFoundError,
    CancelledError,
    EngineConfigError,
    EngineError,
    ManifestError,
    ModelLoadError,
)
from .lifecycle import ModelSlot
from .text import TextTokenizer, clean_text

MANIFEST_NAME = "summarizer.json"
DEFAULT_PROFILE = "t5-small"
DEFAULT_PREFIX = "summarize: "
BACKENDS = ("bundled", "onnx-local", "extractive", "ollama-local", "custom-local")


class SummarizerManifest(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    tokenizer: str
    backend: str = ""
    profile: str = ""
    family: str = ""
    model: str = ""  # informative model name
    encoder: str = "encoder_model.onnx"
    decoder: str = "decoder_model.onnx"
    decoder_with_past: str | None = None  # None: use decoder_with_past_model.onnx if present
    max_context_tokens: int = 512
    prefix: str = DEFAULT_PREFIX
    decoder_start_token_id: int | None = None
    eos_token_id: int | None = None
    sha256: dict[str, str] = msgspec.field(default_factory=dict)


@dataclass(frozen=True)
class Seq2SeqSpec:
    profile: str
    family: str
    manifest: Path
    encoder: AssetRef
    decoder: AssetRef
    decoder_with_past: AssetRef | None
    tokenizer: AssetRef
    max_context_tokens: int
    prefix: str
    decoder_start_token_id: int | None
    eos_token_id: int | None
    hashes: dict[str, str] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        ident = {"family": self.family, "prefix": self.prefix, "ctx": self.max_context_tokens}
        ident.update({k: self.hashes[k] for k in sorted(self.hashes)})
        blob = json.dumps(ident, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()

    def describe(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "family": self.family,
            "fingerprint": self.fingerprint,
            "manifest": str(self.manifest),
            "maxContextTokens": self.max_context_tokens,
            "kvCache": self.decoder_with_past is not None,
        }


def read_summarizer_manifest(path: Path) -> SummarizerManifest:
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise AssetNotFoundError(f"summarizer manifest not found: {path}", path=str(path)) from exc
    except OSError as exc:
        raise AssetError(f"cannot read summarizer manifest {path}: {exc}", path=str(path)) from exc
    try:
        return msgspec.json.decode(raw, type=SummarizerManifest)
    except msgspec.ValidationError as exc:
        names = ", ".join(f.encode_name for f in msgspec.structs.fields(SummarizerManifest))
        raise ManifestError(
            f"invalid summarizer manifest {path}: {exc}. Valid keys: {names}; 'tokenizer' is "
            "required",
            path=str(path),
        ) from exc
    except msgspec.DecodeError as exc:
        raise ManifestError(
            f"summarizer manifest {path} is not valid JSON: {exc}", path=str(path)
        ) from exc


def spec_from_manifest(path: Path, *, tokenizer_override: Path | None = None) -> Seq2SeqSpec:
    m = read_summarizer_manifest(path)
    base = path.parent

    def ref(value: str) -> AssetRef:
        p = Path(value).expanduser()
        return AssetRef(p if p.is_absolute() else base / p)

    encoder, decoder = ref(m.encoder), ref(m.decoder)
    tokenizer = AssetRef(tokenizer_override) if tokenizer_override else ref(m.tokenizer)
    past: AssetRef | None
    if m.decoder_with_past is None:
        cand = base / "decoder_with_past_model.onnx"
        past = AssetRef(cand) if cand.is_file() else None
    elif m.decoder_with_past == "":
        past = None
    else:
        past = ref(m.decoder_with_past)
    if m.max_context_tokens <= 8:
        raise ManifestError(
            f"{path}: maxContextTokens must be > 8, got {m.max_context_tokens}", path=str(path)
        )
    hashes: dict[str, str] = {}
    fix = f"restore the file or update the sha256 pins in {path}"
    named = [("encoder", m.encoder, encoder), ("decoder", m.decoder, decoder)]
    named.append(("tokenizer", m.tokenizer if not tokenizer_override else "", tokenizer))
    if past is not None:
        named.append(("decoderWithPast", m.decoder_with_past or past.path.name, past))
    for key, name, r in named:
        if not r.exists():
            raise AssetNotFoundError(
                f"summarizer {key} file {r} (named by {path}) does not exist; fix '{key}' in the "
                "manifest or put the file there",
                path=str(r),
            )
        hashes[key] = assets.verify_sha256(r, m.sha256.get(name, "") if name else "", fix=fix)
    return Seq2SeqSpec(
        profile=m.profile or base.name,
        family=m.family or m.profile or "t5",
        manifest=path,
        encoder=encoder,
        decoder=decoder,
        decoder_with_past=past,
        tokenizer=tokenizer,
        max_context_tokens=m.max_context_tokens,
        prefix=m.prefix,
        decoder_start_token_id=m.decoder_start_token_id,
        eos_token_id=m.eos_token_id,
        hashes=hashes,
    )


def resolve_summarizer(
    settings: SummarizerSettings | None = None, *, search_roots: Sequence[Path] = ()
) -> Seq2SeqSpec | None:
    """Resolve the ``[summarizer]`` settings (their defaults when ``None``) to a seq2seq
    spec; ``None`` means the extractive summarizer only.

    Raises for a configuration that asks for a model which cannot be found or is broken.
    """
    cfg = settings or SummarizerSettings()
    backend = (cfg.backend or "bundled").strip().lower()
    profile = (cfg.profile or "").strip() or DEFAULT_PROFILE
    tok = Path(cfg.tokenizer).expanduser() if cfg.tokenizer.strip() else None
    if backend == "extractive" or profile.lower() == "extractive":
        return None
    if backend in ("ollama-local", "custom-local"):
        raise EngineConfigError(
            f"summarizer backend {backend} is not implemented; use bundled, onnx-local or "
            "extractive (LIBRAVDB_SUMMARIZER_BACKEND / summarizer.backend)"
        )
    if backend not in BACKENDS:
        raise EngineConfigError(
            f"summarizer backend {backend!r} is not supported; use one of bundled, onnx-local, "
            "extractive (LIBRAVDB_SUMMARIZER_BACKEND / summarizer.backend)"
        )
    if cfg.model.strip():
        p = Path(cfg.model.strip()).expanduser().absolute()
        manifest = (
            p / MANIFEST_NAME
            if p.is_dir()
            else (p if p.suffix.lower() == ".json" else p.parent / MANIFEST_NAME)
        )
        if not manifest.is_file():
            raise AssetNotFoundError(
                f"no summarizer manifest at {manifest}; point LIBRAVDB_SUMMARIZER_MODEL_PATH / "
                "summarizer.model at a directory containing summarizer.json",
                path=str(manifest),
            )
        return spec_from_manifest(manifest, tokenizer_override=tok)
    if backend == "onnx-local":
        raise EngineConfigError(
            "summarizer backend onnx-local needs a model path: set "
            "LIBRAVDB_SUMMARIZER_MODEL_PATH / summarizer.model to a directory with summarizer.json"
        )
    found = assets.discover_model_dir(profile, MANIFEST_NAME, search_roots)
    if found is None:
        return None  # bundled without assets: extractive only (reported by the hub)
    return spec_from_manifest(found / MANIFEST_NAME, tokenizer_override=tok)


# --- runtime -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Prompt:
    ids: list[int]
    turns_used: int
    truncated: bool


@dataclass(frozen=True)
class Generation:
    ids: list[int]
    logprobs: list[float]
    stopped_by: str  # "eos" | "max"
    steps: int
    encode_seconds: float = 0.0  # the encoder pass (once per input)
    decode_seconds: float = 0.0  # all decoder steps

    @property
    def confidence(self) -> float:
        if not self.logprobs:
            return 0.0
        return math.exp(sum(self.logprobs) / len(self.logprobs))


def _log_softmax_at(logits: npt.NDArray[np.floating], index: int) -> float:
    x = logits.astype(np.float64, copy=False)
    mx = float(x.max())
    lse = mx + math.log(float(np.exp(x - mx).sum()))
    return float(x[index]) - lse


def _session(ref: AssetRef, threads: int) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.inter_op_num_threads = 1
    if threads > 0:
        so.intra_op_num_threads = threads
    so.log_severity_level = 3
    so.enable_cpu_mem_arena = not tuning_enabled()  # an arena keeps its peak (embedder.py)
    try:
        return ort.InferenceSession(str(ref.path), so, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise AssetError(
            f"cannot load ONNX model {ref}: {exc}. The file is corrupt or not an ONNX model; "
            "replace it (re-export the seq2seq model)",
            path=str(ref),
        ) from exc


class Seq2SeqModel:
    """Loaded sessions + tokenizer. Thread-safe for concurrent ``generate`` calls."""

    def __init__(self, spec: Seq2SeqSpec, *, threads: int = 1) -> None:
        self.spec = spec
        self.tokenizer = TextTokenizer(
            spec.tokenizer, add_special_tokens=True, fix=f"fix the tokenizer of {spec.manifest}"
        )
        self.encoder = _session(spec.encoder, threads)
        self.decoder = _session(spec.decoder, threads)
        self.decoder_past = (
            _session(spec.decoder_with_past, threads) if spec.decoder_with_past else None
        )
        tok = self.tokenizer
        self.start_id = spec.decoder_start_token_id
        if self.start_id is None:
            self.start_id = tok.token_id("<s>", "[CLS]")
        if self.start_id is None:
            self.start_id = tok.token_id("<pad>", "[PAD]")
        if self.start_id is None:
            self.start_id = 0
        self.eos_id = spec.eos_token_id
        if self.eos_id is None:
            self.eos_id = tok.token_id("</s>", "[SEP]", "<eos>")
        if self.eos_id is None:
            self.eos_id = 1
        self.enc_inputs = {i.name for i in self.encoder.get_inputs()}
        self.enc_output = self.encoder.get_outputs()[0].name
        self.dec_inputs = {i.name for i in self.decoder.get_inputs()}
        dec_outputs = [o.name for o in self.decoder.get_outputs()]
        if "input_ids" not in self.enc_inputs or "input_ids" not in self.dec_inputs:
            raise ModelLoadError(
                f"{spec.manifest}: encoder and decoder must take 'input_ids' (T5 layout, "
                "optimum export names)"
            )
        if "encoder_hidden_states" not in self.dec_inputs:
            raise ModelLoadError(
                f"{spec.decoder} has no 'encoder_hidden_states' input; expected a T5-layout "
                "decoder_model.onnx"
            )
        self.logits_name = "logits" if "logits" in dec_outputs else dec_outputs[0]
        self.presents = [n for n in dec_outputs if n.startswith("present.")]
        self.past_inputs: list[str] = []
        self.past_presents: list[str] = []
        self.kv_cache = False
        self.kv_reason = "no decoder_with_past_model.onnx"
        if self.decoder_past is not None:
            self.past_inputs = [
                i.name
                for i in self.decoder_past.get_inputs()
                if i.name.startswith("past_key_values.")
            ]
            outs = [o.name for o in self.decoder_past.get_outputs()]
            self.past_presents = [n for n in outs if n.startswith("present.")]
            self.past_logits = "logits" if "logits" in outs else outs[0]
            self.past_other_inputs = {i.name for i in self.decoder_past.get_inputs()} - set(
                self.past_inputs
            )
            available = {n.replace("present.", "past_key_values.", 1) for n in self.presents}
            missing = [n for n in self.past_inputs if n not in available]
            if missing:
                self.kv_reason = (
                    f"{spec.decoder} does not export the present.* outputs needed to seed the "
                    f"cache ({missing[:2]}...); decoding without KV cache"
                )
            else:
                self.kv_cache = True
                self.kv_reason = ""

    # -- prompt ----------------------------------------------------------------------------------
    def build_prompt(self, turns: Sequence[str]) -> Prompt:
        """Prefix + turns joined by newlines; keep the most recent turns that fit the context."""
        tok = self.tokenizer
        limit = self.spec.max_context_tokens
        prefix = self.spec.prefix

        def encode(kept: Sequence[str]) -> list[int]:
            return list(tok.encode(prefix + "\n".join(kept)).ids)

        ids = encode(turns)
        if len(ids) <= limit:
            return Prompt(ids, len(turns), False)
        # Estimate from per-turn token counts, then correct with exact encodes.
        base = len(encode([]))
        counts = [tok.count(t) for t in turns]
        start = len(turns) - 1
        total = base + counts[-1]
        while start > 0 and total + counts[start - 1] <= limit:
            start -= 1
            total += counts[start]
        while start < len(turns) - 1 and len(encode(turns[start:])) > limit:
            start += 1
        while start > 0 and len(encode(turns[start - 1 :])) <= limit:
            start -= 1
        ids = encode(turns[start:])
        if len(ids) <= limit:
            return Prompt(ids, len(turns) - start, True)
        # The newest turn alone is too long: keep its last tokens.
        enc = tok.encode(prefix + turns[-1])
        pieces = tok.split(enc)
        pre = list(tok.encode(prefix, special=False).ids) if prefix else []
        body = pieces.content[len(pre) :] if pieces.content[: len(pre)] == pre else pieces.content
        room = limit - len(pieces.lead) - len(pieces.trail) - len(pre)
        ids = pieces.lead + pre + body[-max(room, 1) :] + pieces.trail
        return Prompt(ids, 1, True)

    # -- decoding --------------------------------------------------------------------------------
    def generate(
        self,
        input_ids: Sequence[int],
        max_new_tokens: int,
        *,
        use_cache: bool | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        cache = self.kv_cache if use_cache is None else (use_cache and self.kv_cache)
        x = np.asarray([list(input_ids)], dtype=np.int64)
        mask = np.ones_like(x)
        enc_feed: dict[str, Any] = {"input_ids": x}
        if "attention_mask" in self.enc_inputs:
            enc_feed["attention_mask"] = mask
        started = time.perf_counter()
        hidden = self.encoder.run([self.enc_output], enc_feed)[0]
        encoded = time.perf_counter()
        assert self.start_id is not None and self.eos_id is not None
        seq = [self.start_id]
        out: list[int] = []
        logprobs: list[float] = []
        past: dict[str, Any] = {}
        stopped = "max"
        steps = 0
        for step in range(max(0, max_new_tokens)):
            if cancel is not None and cancel.is_set():
                raise CancelledError("summarization cancelled")
            steps += 1
            if cache and step > 0:
                assert self.decoder_past is not None
                feed: dict[str, Any] = {"input_ids": np.asarray([[seq[-1]]], dtype=np.int64)}
                if "encoder_attention_mask" in self.past_other_inputs:
                    feed["encoder_attention_mask"] = mask
                if "encoder_hidden_states" in self.past_other_inputs:
                    feed["encoder_hidden_states"] = hidden
                for name in self.past_inputs:
                    feed[name] = past[name]
                names = [self.past_logits, *self.past_presents]
                outs = self.decoder_past.run(names, feed)
            else:
                feed = {
                    "input_ids": np.asarray([seq], dtype=np.int64),
                    "encoder_hidden_states": hidden,
                }
                if "encoder_attention_mask" in self.dec_inputs:
                    feed["encoder_attention_mask"] = mask
                names = [self.logits_name, *(self.presents if cache else [])]
                outs = self.decoder.run(names, feed)
            for name, value in zip(names[1:], outs[1:], strict=True):
                past[name.replace("present.", "past_key_values.", 1)] = value
            logits = np.asarray(outs[0])[0, -1]
            nxt = int(np.argmax(logits))
            if nxt == self.eos_id:
                stopped = "eos"
                break
            out.append(nxt)
            logprobs.append(_log_softmax_at(logits, nxt))
            seq.append(nxt)
        done = time.perf_counter()
        return Generation(out, logprobs, stopped, steps, encoded - started, done - encoded)


@dataclass(frozen=True)
class Seq2SeqOutput:
    text: str
    confidence: float
    tokens: int
    turns_used: int
    truncated: bool
    stopped_by: str
    kv_cache: bool


class Seq2SeqSummarizer:
    """Lazy-loaded seq2seq summarizer (lifecycle in a :class:`ModelSlot`)."""

    def __init__(
        self,
        spec: Seq2SeqSpec,
        *,
        idle_unload_s: float = 300.0,
        threads: int = 1,
        retry_after_s: float = 30.0,
    ) -> None:
        self.spec = spec
        self.threads = threads
        self.slot: ModelSlot[Seq2SeqModel] = ModelSlot(
            f"summarizer:{spec.profile}",
            self._load,
            idle_unload_s=idle_unload_s,
            retry_after_s=retry_after_s,
        )

    def _load(self) -> Seq2SeqModel:
        for key, expected in self.spec.hashes.items():
            ref = {
                "encoder": self.spec.encoder,
                "decoder": self.spec.decoder,
                "tokenizer": self.spec.tokenizer,
                "decoderWithPast": self.spec.decoder_with_past,
            }[key]
            if ref is not None and assets.sha256_of(ref) != expected:
                raise AssetError(
                    f"summarizer {key} {ref} changed since the daemon started; restart the "
                    "daemon after changing model files",
                    path=str(ref),
                )
        return Seq2SeqModel(self.spec, threads=self.threads)

    def status(self) -> dict[str, Any]:
        snap = self.slot.snapshot()
        return {
            **self.spec.describe(),
            "state": snap["state"],
            "reason": snap["reason"],
            "lifecycle": snap,
        }

    def summarize(
        self,
        texts: Sequence[str],
        *,
        max_new_tokens: int = 64,
        cancel: threading.Event | None = None,
        use_cache: bool | None = None,
    ) -> Seq2SeqOutput:
        """Blocking; run it in a worker thread. Raises EngineError on any failure."""
        turns = [clean_text(t, i, allow_empty=True).strip() for i, t in enumerate(texts)]
        turns = [t for t in turns if t]
        if not turns:
            raise EngineError("nothing to summarize: every turn is empty")
        with self.slot.lease() as model:
            try:
                prompt = model.build_prompt(turns)
                gen = model.generate(prompt.ids, max_new_tokens, use_cache=use_cache, cancel=cancel)
                text = model.tokenizer.decode(gen.ids).strip()
            except EngineError:
                raise
            except Exception as exc:  # any runtime fault is the model's, so callers fall back
                raise ModelLoadError(
                    f"seq2seq model {self.spec.manifest} failed: {type(exc).__name__}: {exc}"
                ) from exc
            if not text:
                raise EngineError("seq2seq summarizer produced empty output")
            return Seq2SeqOutput(
                text=text,
                confidence=gen.confidence,
                tokens=len(gen.ids),
                turns_used=prompt.turns_used,
                truncated=prompt.truncated,
                stopped_by=gen.stopped_by,
                kv_cache=model.kv_cache
                if use_cache is None
                else bool(use_cache and model.kv_cache),
            )
