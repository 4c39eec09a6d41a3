from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from sidecar.memory.authored.deontic import (
    DeonticClass,
    Modality,
    classify_sentence,
    evaluate_text,
    split_sentences,
    tokenize,
)

CORPUS = json.loads((Path(__file__).parent / "data" / "deontic_corpus.json").read_text("utf-8"))
LABELS = {c.value for c in DeonticClass}


def _rates(rows: list[dict[str, str]]) -> tuple[float, float, dict[str, float]]:
    fp = sum(1 for r in rows if r["label"] == "none" and classify_sentence(r["text"]).promoted)
    fn = sum(1 for r in rows if r["label"] != "none" and not classify_sentence(r["text"]).promoted)
    non_rules = sum(1 for r in rows if r["label"] == "none")
    rules = len(rows) - non_rules
    per_class: dict[str, float] = {}
    for label in LABELS:
        members = [r for r in rows if r["label"] == label]
        hits = sum(1 for r in members if classify_sentence(r["text"]).label.value == label)
        per_class[label] = hits / len(members)
    return fp / non_rules, fn / rules, per_class


def test_corpus_shape() -> None:
    assert len(CORPUS) >= 150
    texts = [r["text"] for r in CORPUS]
    assert len(set(texts)) == len(texts)
    counts = Counter(r["label"] for r in CORPUS)
    assert set(counts) == LABELS
    assert min(counts.values()) >= 20
    assert {r["split"] for r in CORPUS} == {"dev", "holdout", "stress"}


def test_corpus_fp_fn_rates() -> None:
    fp, fn, per_class = _rates(CORPUS)
    # FP = a non-rule classified as any rule; FN = a rule classified as none.
    assert fp <= 0.10, fp
    assert fn <= 0.20, fn
    for label, accuracy in per_class.items():
        assert accuracy >= 0.80, (label, accuracy)


@pytest.mark.parametrize("split", ["dev", "holdout", "stress"])
def test_each_split_within_targets(split: str) -> None:
    fp, fn, _ = _rates([r for r in CORPUS if r["split"] == split])
    assert fp <= 0.10 and fn <= 0.20, (split, fp, fn)


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("No worries.", "none"),
        ("No smoking.", "prohibition"),
        ("You should not do that in production.", "prohibition"),
        ("You are a helpful assistant.", "none"),
        ("You are to respond in JSON.", "obligation"),
        ("The design goal is: preserve the raw turns.", "none"),
        ("Never use mutexes in the hot path.", "prohibition"),
        ("Évitez les abréviations: always use full words.", "obligation"),
        ("Vous devez toujours répondre en français.", "none"),
        ("You may not redistribute the weights.", "prohibition"),
        ("You may redistribute the weights.", "permission"),
    ],
)
def test_reference_quirks_fixed(text: str, label: str) -> None:
    assert classify_sentence(text).label.value == label


def test_masks_keep_reference_bits() -> None:
    assert int(Modality.OBLIGATION) == 2
    assert int(Modality.PROHIBITION) == 4
    assert int(Modality.PERMISSION) == 8
    r = evaluate_text("Always run the tests. Never push to main. You may skip docs.")
    assert r.mask == Modality.OBLIGATION | Modality.PROHIBITION | Modality.PERMISSION
    assert r.label == DeonticClass.PROHIBITION
    assert r.promoted


def test_tokenize_and_split() -> None:
    assert tokenize("Don't use keep-alive; let's go") == [
        "do", "not", "use", "keep-alive", ";", "let", "us", "go"
    ]  # fmt: skip
    assert tokenize("Naïve façade") == ["naïve", "façade"]
    assert split_sentences("First rule. Second rule!\nThird, e.g. this one.") == [
        "First rule.",
        "Second rule!",
        "Third, e.g. this one.",
    ]


def test_empty_and_questions() -> None:
    assert not classify_sentence("").promoted
    assert not classify_sentence("Must we always run the tests?").promoted
    assert not evaluate_text("").promoted
