"""Summary drafts: the extractive and seq2seq summarizer steps and the escalation ladder
that runs them until a draft makes strict progress."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sidecar.memory.compaction import continuity as K
from sidecar.memory.compaction import quality as Q

if TYPE_CHECKING:
    from sidecar.engines import EngineHub

F32 = np.ndarray[Any, Any]
SUMMARY_JOINER = "\n"


def extractive_step(views: Sequence[str], vectors: F32 | None) -> K.StepSummarizer:
    def run(texts: Sequence[str], step: K.LadderStep, prior: str) -> K.Draft:
        if vectors is not None and len(vectors) == len(texts):
            picked, conf = Q.extractive_select(vectors, step.target_density, texts=texts)
        else:
            picked, conf = list(range(len(texts)))[:1], 0.0
        text = SUMMARY_JOINER.join(texts[i] for i in picked)
        return K.Draft(text, conf, "extractive")

    return run


def seq2seq_step(hub: EngineHub | None) -> K.StepSummarizer | None:
    if hub is None or hub.summarizer.seq2seq is None:
        return None
    summarizer = hub.summarizer

    def run(texts: Sequence[str], step: K.LadderStep, prior: str) -> K.Draft:
        inputs = ([prior] if prior else []) + list(texts)
        res = summarizer.summarize_sync(
            inputs,
            max_tokens=step.max_output_tokens,
            method="seq2seq",
            density=step.target_density,
        )
        if res.method != "seq2seq":
            raise RuntimeError(res.fallback_reason or "seq2seq unavailable")
        return K.Draft(res.summary, res.confidence, Q.ABSTRACTIVE_METHOD)

    return run


@dataclass(slots=True)
class SummaryDraft:
    text: str
    method: str
    raw_confidence: float
    step: K.LadderStep | None
    support_ids: tuple[str, ...] = ()
    support_tokens: int = 0


def run_draft_ladder(
    replaced: Sequence[str],
    views: Sequence[str],
    vectors: F32 | None,
    primary: K.StepSummarizer | None,
    max_output_tokens: int,
    prior: K.PriorContext | None,
) -> SummaryDraft | None:
    extractive = extractive_step(views, vectors)
    abstractive = primary is not None
    ladder = K.escalation_ladder(
        primary_is_abstractive=abstractive, max_output_tokens=max_output_tokens
    )
    outcome = K.run_ladder(
        replaced,
        views,
        primary=primary or extractive,
        extractive=extractive,
        ladder=ladder,
        prior=prior.prompt if prior is not None else "",
    )
    if outcome.draft is None or outcome.step is None:
        return None
    d = outcome.draft
    uses_prior = outcome.step.uses_prior_context and prior is not None and bool(prior.ids)
    return SummaryDraft(
        d.text,
        d.method,
        d.confidence,
        outcome.step,
        prior.ids if uses_prior and prior is not None else (),
        prior.tokens if uses_prior and prior is not None else 0,
    )
