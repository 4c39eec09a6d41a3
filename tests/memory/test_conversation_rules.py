"""What compaction promotes to elevated guidance from conversation must be rules.

Regressions: "Update: the deploy finished at 5pm." and "Call log: Mum rang twice today."
were obligations, so ordinary turns were promoted into <elevated_guidance> (which tells
the model to prefer them over recalled memory).
"""

from __future__ import annotations

import pytest

from scripts.eval_rules import classifier, load_rows, promotion_predictor, score
from sidecar.memory.authored.deontic import evaluate_text


@pytest.mark.parametrize(
    "text",
    [
        "Update: the deploy finished at 5pm.",
        "Call log: Mum rang twice today.",
        "Order #4411 shipped this morning.",
        "We should grab coffee sometime.",
        "My boss thinks we should hire another designer.",
    ],
)
def test_reports_and_plans_are_not_rules(text: str) -> None:
    assert not evaluate_text(text).promoted, evaluate_text(text)


@pytest.mark.parametrize(
    "text",
    [
        "Reminder: always copy Dana on invoices.",
        "From now on, call me Alex.",
        "We should never store passwords in plain text.",
        "Note: do not deploy on Fridays.",
    ],
)
def test_rules_behind_a_label_or_lead_are_rules(text: str) -> None:
    assert evaluate_text(text).promoted


def test_promotion_precision_on_the_labelled_conversation_turns() -> None:
    rows = load_rows()
    assert len(rows) >= 200 and sum(r.rule for r in rows) * 2 == len(rows)
    promote = promotion_predictor()
    for split in ("dev", "holdout"):
        part = [r for r in rows if r.split == split]
        result, false_rules, _missed = score(part, promote)
        assert result.precision >= 0.95, (split, [r.text for r in false_rules])
        assert result.recall >= 0.9, split
    overall, _fp, _fn = score(rows, classifier)
    assert overall.precision >= 0.95
