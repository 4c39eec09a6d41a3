"""The retrieval-only metrics `make eval` prints beside its own (scripts/locomo_public.py)."""

from __future__ import annotations

import pytest

from scripts.confusion import Counts
from scripts.locomo_public import PublicScores, hits, render_public


def test_hits_any_all_and_sessions() -> None:
    ranked = ["D1:1", "D1:2", "D2:5", "D3:1", "D4:1", "D5:1", "D6:1", "D1:1", "D7:2", "D8:1"]
    got = hits(ranked, ["D2:5", "D8:1"])
    assert got["turn any@5"] == 1.0 and got["turn all@5"] == 0.0
    # the repeated D1:1 does not take a place: D8:1 is 10th of the distinct turns
    assert got["turn any@10"] == 1.0 and got["turn all@10"] == 1.0
    assert got["session any@5"] == 1.0  # D2 is among the first five distinct sessions
    far = hits(ranked, ["D7:2"])
    assert far["session any@5"] == 0.0 and far["turn any@5"] == 0.0 and far["turn any@10"] == 1.0


def test_adversarial_questions_count_only_in_the_1_to_5_columns() -> None:
    scores = PublicScores()
    scores.add("m", 1, ["D1:1"], ["D1:1"])
    scores.add("m", 5, ["D1:1"], ["D9:9"])
    assert scores.value("m", "turn any@5", adversarial=False) == (1.0, 1)
    assert scores.value("m", "turn any@5", adversarial=True) == (0.5, 2)
    table = render_public(scores, ["m"])
    assert "| turn any@5 | 1.000 | 0.500 |" in table and "| questions | 1 | 2 |" in table


def test_confusion_counts() -> None:
    k = Counts(tp=8, fp=2, fn=2, tn=8) + Counts(tp=0, fp=0, fn=0, tn=1)
    assert (k.precision, k.recall) == (0.8, 0.8) and k.f1 == pytest.approx(0.8) and k.tn == 9
    assert Counts().precision == 1.0 and Counts().f1 == 1.0


def test_the_in_process_query_vector_takes_the_daemons_speaker_focus() -> None:
    """``make eval --inprocess`` searches with the vector ``assemble`` uses: half of a
    named speaker's label taken out (sidecar.assembly.speaker_focus)."""
    import numpy as np

    from scripts.locomo_data import Conversation, EvalTurn, Question
    from scripts.locomo_pool import ConvData, query_vector
    from sidecar.assembly.selection import DEFAULT_ASSEMBLY
    from sidecar.assembly.speaker_focus import without_labels
    from sidecar.memory.core.lexical import BM25Index

    turn = EvalTurn("D1:1", "S1", 1, 1, "user", "Caroline", "Caroline: hi", 0)
    questions = [Question(0, "What did Caroline paint?", 4, ("D1:1",)), Question(1, "Who?", 4, ())]
    conv = Conversation("c", "Caroline", "Melanie", [turn], questions)
    q = np.array([[0.6, 0.8, 0.0], [0.0, 0.6, 0.8]], dtype=np.float32)
    labels = {"Caroline": np.array([1.0, 0.0, 0.0], dtype=np.float32)}
    data = ConvData(conv, q[:1], q, [3], BM25Index(), label_vecs=labels)
    expected = without_labels(q[0], [labels["Caroline"]], DEFAULT_ASSEMBLY.speaker_label_weight)
    assert np.allclose(query_vector(data, 0, DEFAULT_ASSEMBLY), expected)
    assert not np.allclose(expected, q[0])
    assert np.array_equal(query_vector(data, 1, DEFAULT_ASSEMBLY), q[1])  # names no one
