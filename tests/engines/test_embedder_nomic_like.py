"""The Nomic code path (prefixes, windows, Matryoshka) on the tiny fixture model.

tests/fixtures/tiny_embed is built by scripts/build_tiny_embedder.py; its embedding.json declares
the nomic-embed-text-v1.5 profile (768 d, search_document:/search_query: prefixes, 512-token
windows with stride 256, Matryoshka 64/256/768).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from tokenizers import Tokenizer

from sidecar.config import EmbeddingSettings
from sidecar.engines import Embedder, EngineError, resolve_embedding

from .conftest import TINY_EMBED, edit_manifest


def _raw_embed(ids_list: list[list[int]]) -> np.ndarray:
    """Independent reference: raw onnxruntime + masked mean + L2, one sequence at a time."""
    sess = ort.InferenceSession(str(TINY_EMBED / "model.onnx"), providers=["CPUExecutionProvider"])
    out = []
    for ids in ids_list:
        x = np.array([ids], dtype=np.int64)
        h = sess.run(
            ["last_hidden_state"],
            {"input_ids": x, "attention_mask": np.ones_like(x), "token_type_ids": np.zeros_like(x)},
        )[0][0]
        v = h.mean(axis=0)
        out.append(v / np.linalg.norm(v))
    return np.stack(out)


def _tok() -> Tokenizer:
    return Tokenizer.from_file(str(TINY_EMBED / "tokenizer.json"))


def test_profile_from_manifest(nomic_like: Embedder) -> None:
    spec = nomic_like.spec
    assert spec.dimensions == 768
    assert spec.family == "tiny-nomic-like-test"
    assert spec.document_prefix == "search_document: "
    assert spec.query_prefix == "search_query: "
    assert (spec.window_tokens, spec.window_stride) == (512, 256)
    assert spec.matryoshka_dims == (64, 256, 768)
    assert nomic_like.supports_matryoshka


def test_prefixes_are_applied(nomic_like: Embedder) -> None:
    tok = _tok()
    text = "the cat sat on the mat"
    q = nomic_like.embed_sync([text], "query").vectors[0]
    d = nomic_like.embed_sync([text], "document").vectors[0]
    assert not np.allclose(q, d)
    ref_q = _raw_embed([tok.encode("search_query: " + text).ids])[0]
    ref_d = _raw_embed([tok.encode("search_document: " + text).ids])[0]
    assert np.allclose(q, ref_q, atol=1e-5)
    assert np.allclose(d, ref_d, atol=1e-5)


def _doc_with_content_tokens(n: int) -> str:
    # "a" is one token in the tiny vocabulary.
    return " ".join(["a"] * n)


def test_513_token_document_uses_at_least_two_windows(nomic_like: Embedder) -> None:
    res = nomic_like.embed_sync([_doc_with_content_tokens(513)], "document")
    assert res.windows[0] >= 2
    assert res.truncated == [False]
    short = nomic_like.embed_sync([_doc_with_content_tokens(100)], "document")
    assert short.windows == [1]


def test_window_mean_is_renormalized_and_matches_reference(nomic_like: Embedder) -> None:
    tok = _tok()
    words = [f"{chr(97 + i % 26)}" for i in range(900)]
    text = " ".join(words)
    res = nomic_like.embed_sync([text], "document")
    vec = res.vectors[0]
    assert abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5

    prefix = tok.encode("search_document: ", add_special_tokens=False).ids
    body = tok.encode(text, add_special_tokens=False).ids
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    assert cls is not None and sep is not None
    chunk = 512 - 2 - len(prefix)
    windows = []
    start = 0
    while True:
        windows.append([cls, *prefix, *body[start : start + chunk], sep])
        if start + chunk >= len(body):
            break
        start += 256
    assert res.windows[0] == len(windows) == 3
    ref = _raw_embed(windows).mean(axis=0)
    ref /= np.linalg.norm(ref)
    assert np.allclose(vec, ref, atol=1e-5)


def test_documents_are_capped_at_max_context_and_reported(nomic_like: Embedder) -> None:
    res = nomic_like.embed_sync([_doc_with_content_tokens(9000)], "document")
    assert res.truncated == [True]
    assert res.windows[0] == 31  # ceil((8186 - 506) / 256) + 1
    ok = nomic_like.embed_sync([_doc_with_content_tokens(8000)], "document")
    assert ok.truncated == [False]


def test_queries_are_never_windowed_but_truncated_at_one_window(nomic_like: Embedder) -> None:
    res = nomic_like.embed_sync([_doc_with_content_tokens(600)], "query")
    assert res.windows == [1]
    assert res.truncated == [True]


def test_matryoshka_tiers(nomic_like: Embedder) -> None:
    vec = nomic_like.embed_sync(["tiers of a vector"], "document").vectors[0]
    tiers = nomic_like.tiers(vec)
    assert sorted(tiers) == [64, 256, 768]
    for dims, tv in tiers.items():
        assert tv.shape == (dims,)
        assert abs(float(np.linalg.norm(tv)) - 1.0) < 1e-5
    assert np.allclose(tiers[768], vec, atol=1e-6)
    assert np.allclose(nomic_like.tier(vec, 64), tiers[64])


def test_fingerprint_differs_from_default(nomic_like: Embedder, minilm: Embedder) -> None:
    assert nomic_like.fingerprint != minilm.fingerprint


async def test_async_windowed_batch(nomic_like: Embedder) -> None:
    texts = [_doc_with_content_tokens(n) for n in (10, 700, 1500)]
    res = await nomic_like.embed(texts, "document")
    assert res.windows[0] == 1 and res.windows[1] >= 2 and res.windows[2] > res.windows[1]
    sync = nomic_like.embed_sync(texts, "document")
    assert np.allclose(res.vectors, sync.vectors, atol=1e-5)


@pytest.mark.parametrize("kind", ["query", "document"])
def test_long_single_word_document(nomic_like: Embedder, kind: str) -> None:
    res = nomic_like.embed_sync(["z" * 5000], kind)
    assert res.vectors.shape == (1, 768)


def _hidden(ids: list[int]) -> np.ndarray:
    sess = ort.InferenceSession(str(TINY_EMBED / "model.onnx"), providers=["CPUExecutionProvider"])
    x = np.array([ids], dtype=np.int64)
    feed = {"input_ids": x, "attention_mask": np.ones_like(x), "token_type_ids": np.zeros_like(x)}
    out: np.ndarray = sess.run(["last_hidden_state"], feed)[0][0]
    return out


def _query_ids(text: str) -> list[int]:
    tok = _tok()
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    prefix = tok.encode("search_query: ", add_special_tokens=False).ids
    return [cls, *prefix, *tok.encode(text, add_special_tokens=False).ids, sep]


def _embedder(root: Path, **manifest: object) -> Embedder:
    edit_manifest(root / "embedding.json", **manifest)
    return Embedder(resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(root))))


def test_cls_pooling_takes_the_first_token(tiny_embed_copy: Path) -> None:
    emb = _embedder(tiny_embed_copy, pooling="cls")
    try:
        vec = emb.embed_sync(["the garden needs water"], "query").vectors[0]
        ref = _hidden(_query_ids("the garden needs water"))[0]
        assert np.allclose(vec, ref / np.linalg.norm(ref), atol=1e-5)
    finally:
        emb.close()


def test_normalize_false_keeps_the_raw_mean(tiny_embed_copy: Path) -> None:
    emb = _embedder(tiny_embed_copy, normalize=False)
    try:
        vec = emb.embed_sync(["the garden needs water"], "query").vectors[0]
        ref = _hidden(_query_ids("the garden needs water")).mean(axis=0)
        assert np.allclose(vec, ref, atol=1e-5)
        assert abs(float(np.linalg.norm(vec)) - 1.0) > 1e-3
    finally:
        emb.close()


def test_pooling_none_on_a_per_token_output_names_the_fix(tiny_embed_copy: Path) -> None:
    emb = _embedder(tiny_embed_copy, pooling="none")
    try:
        with pytest.raises(EngineError) as info:
            emb.embed_sync(["the garden needs water"], "query")
        assert "pooling is 'none'" in str(info.value) and "'mean' or 'cls'" in str(info.value)
    finally:
        emb.close()
