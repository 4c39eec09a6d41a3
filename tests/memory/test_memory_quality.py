from __future__ import annotations

import math

import numpy as np
import pytest

from sidecar.memory.compaction.quality import (
    Preservation,
    centroid,
    cosine,
    extractive_select,
    finalize_confidence,
    preservation_metrics,
)


def test_preservation_metrics_reference() -> None:
    p = preservation_metrics(np.array([1.0, 0.0]), [np.array([1.0, 0.0]), np.array([0.0, 1.0])])
    assert p.align == pytest.approx(math.sqrt(0.5))
    assert p.cover == pytest.approx(0.5)


def test_hybrid_and_gate() -> None:
    perfect = Preservation(1.0, 1.0)
    d = finalize_confidence("onnx-t5", perfect, 0.9)
    assert d.confidence == pytest.approx(0.98)
    assert (d.confidence_nomic, d.confidence_t5, d.replace_with_extractive) == (1.0, 0.9, False)
    assert finalize_confidence("onnx-t5", Preservation(0.649, 1.0), 0.95).replace_with_extractive
    assert not finalize_confidence(
        "onnx-t5", Preservation(0.65 + 1e-4, 0.65), 0.95
    ).replace_with_extractive
    hybrid = finalize_confidence("onnx-t5", Preservation(0.8, 0.8), 0.9)
    assert hybrid.confidence == pytest.approx(0.8 * 0.8 + 0.2 * 0.9)
    ext = finalize_confidence("extractive", Preservation(0.8, 0.8))
    assert ext.confidence == pytest.approx(0.8) and 1 - ext.confidence == pytest.approx(0.2)


def test_extractive_selection_reference() -> None:
    assert extractive_select([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]], 1 / 3)[0] == [1]
    picked, conf = extractive_select([[1, 0], [1, 0], [0, 1]], 2 / 3)
    assert picked == [0, 1]
    assert conf == pytest.approx(2 / math.sqrt(5))
    assert extractive_select([[1, 0], [0, 1]], 5.0)[0] == [0]  # density → 0.4, ceil(0.8) = 1
    assert extractive_select(np.zeros((0, 2))) == ([], 0.0)


def test_vector_helpers() -> None:
    assert cosine(np.zeros(3), np.ones(3)) == 0.0
    assert centroid([[1, 2], [3, 4]]).tolist() == [2.0, 3.0]
    with pytest.raises(ValueError):
        centroid(np.zeros((0, 2)))
