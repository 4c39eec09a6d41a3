"""Opt-in tests with real model assets that cannot be installed here.

Set ``LIBRAVDB_REAL_ASSETS=/path`` where ``/path`` holds model directories named after their
profiles, each with its manifest, for example::

    /path/nomic-embed-text-v1.5/{embedding.json, model.onnx, tokenizer.json}
    /path/t5-small/{summarizer.json, encoder_model.onnx, decoder_model.onnx,
                    decoder_with_past_model.onnx, tokenizer.json}

(docs/engines.md shows the manifests.) Missing directories skip their tests.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from sidecar.config import EmbeddingSettings, SummarizerSettings
from sidecar.engines import Embedder, Seq2SeqSummarizer, resolve_embedding, resolve_summarizer

pytestmark = pytest.mark.real_assets

ROOT = os.environ.get("LIBRAVDB_REAL_ASSETS", "")


def _dir(name: str) -> Path:
    if not ROOT:
        pytest.skip("set LIBRAVDB_REAL_ASSETS to run tests with real model assets")
    path = Path(ROOT).expanduser() / name
    if not path.is_dir():
        pytest.skip(f"no {name} directory under LIBRAVDB_REAL_ASSETS")
    return path


def test_nomic_profile_and_matryoshka_fidelity() -> None:
    spec = resolve_embedding(
        EmbeddingSettings(profile="nomic-embed-text-v1.5"),
        search_roots=[_dir("nomic-embed-text-v1.5").parent],
    )
    assert spec.dimensions == 768 and spec.matryoshka_dims == (64, 256, 768)
    emb = Embedder(spec)
    try:
        docs = [
            "The deployment is scheduled for Friday afternoon.",
            "We plan to ship the release on Friday after lunch.",
            "My grandmother grows tomatoes in her back garden.",
        ]
        v = emb.embed_sync(docs, "document").vectors
        q = emb.embed_sync(["when is the release?"], "query").vectors[0]
        assert float(q @ v[0]) > float(q @ v[2])
        # Tier/full similarity ratios (reference: >= 0.90 for 256 d, >= 0.70 for 64 d).
        full = float(v[0] @ v[1])
        for dims, floor in ((256, 0.90), (64, 0.70)):
            a, b = emb.tier(v[0], dims), emb.tier(v[1], dims)
            assert float(a @ b) / full >= floor
        long_doc = " ".join(["the memory daemon stores raw turns"] * 200)
        res = emb.embed_sync([long_doc], "document")
        assert res.windows[0] >= 2
        assert abs(float(np.linalg.norm(res.vectors[0])) - 1.0) < 1e-5
    finally:
        emb.close()


def test_t5_small_summarizes() -> None:
    spec = resolve_summarizer(SummarizerSettings(model=str(_dir("t5-small"))))
    assert spec is not None
    summ = Seq2SeqSummarizer(spec)
    turns = [
        "We decided to retry failed requests three times with exponential backoff.",
        "The backoff starts at one second and doubles each time.",
        "After the third failure the request is reported to the user.",
    ]
    with_cache = summ.summarize(turns, max_new_tokens=32)
    without = summ.summarize(turns, max_new_tokens=32, use_cache=False)
    assert with_cache.text and with_cache.text == without.text
    assert 0 < with_cache.confidence <= 1
