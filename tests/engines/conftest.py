from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.config import EmbeddingSettings
from sidecar.engines import Embedder, resolve_embedding
from sidecar.engines.embedding_spec import EmbeddingSpec

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
TINY_T5 = FIXTURES / "tiny_t5"
TINY_EMBED = FIXTURES / "tiny_embed"
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def minilm_spec() -> EmbeddingSpec:
    return resolve_embedding()


@pytest.fixture(scope="session")
def minilm(minilm_spec: EmbeddingSpec) -> Iterator[Embedder]:
    emb = Embedder(minilm_spec)
    yield emb
    emb.close()


@pytest.fixture(scope="session")
def nomic_like() -> Iterator[Embedder]:
    emb = Embedder(
        resolve_embedding(EmbeddingSettings(backend="onnx-local", model=str(TINY_EMBED)))
    )
    yield emb
    emb.close()


@pytest.fixture(scope="session")
def t5_expected() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((TINY_T5 / "expected_outputs.json").read_text())
    return data


@pytest.fixture
def tiny_embed_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "tiny_embed"
    shutil.copytree(TINY_EMBED, dst)
    return dst


@pytest.fixture
def tiny_t5_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "tiny_t5"
    shutil.copytree(TINY_T5, dst)
    return dst


def edit_manifest(path: Path, **changes: Any) -> None:
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))
