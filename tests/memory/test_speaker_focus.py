"""A query that names a speaker: part of the speaker label's direction is taken out of
the query vector (``sidecar.assembly.speaker_focus``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from sidecar.assembly.speaker_focus import (
    MAX_SPEAKERS,
    LabelVectors,
    named_in,
    speaker_label,
    without_labels,
)
from sidecar.engines import Embedder, resolve_embedding


def _unit(v: Sequence[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    out: np.ndarray = a / np.linalg.norm(a)
    return out


def test_the_given_share_of_the_label_component_is_removed() -> None:
    rng = np.random.default_rng(3)
    q, e = _unit(rng.normal(size=16)), _unit(rng.normal(size=16))
    out = without_labels(q, [e], 0.5)
    assert out.dtype == np.float32
    assert np.linalg.norm(out) == pytest.approx(1.0, abs=1e-6)
    raw = q - 0.5 * float(q @ e) * e
    assert np.allclose(out, raw / np.linalg.norm(raw), atol=1e-6)
    # the label's share falls by half before the rescaling
    assert float(raw @ e) == pytest.approx(0.5 * float(q @ e), abs=1e-6)


def test_labels_that_are_not_unit_length_count_as_their_direction() -> None:
    rng = np.random.default_rng(4)
    q, e = _unit(rng.normal(size=8)), _unit(rng.normal(size=8))
    assert np.allclose(without_labels(q, [3.0 * e], 0.5), without_labels(q, [e], 0.5))


def test_nothing_named_or_weight_zero_leaves_the_vector_as_embedded() -> None:
    q = _unit([1.0, 2.0, 3.0])
    assert without_labels(q, [], 0.5) is q
    assert without_labels(q, [_unit([1.0, 0.0, 0.0])], 0.0) is q
    assert np.allclose(without_labels(q, [np.zeros(3, dtype=np.float32)], 0.5), q)


def test_a_query_that_is_only_the_label_is_not_zeroed() -> None:
    e = _unit([0.0, 1.0, 0.0])
    assert np.allclose(without_labels(e, [e], 1.0), e)  # would vanish: kept as embedded
    assert np.allclose(without_labels(e, [e], 0.5), e)  # half of itself: same direction


def test_two_named_speakers_are_both_taken_out() -> None:
    q = _unit([1.0, 1.0, 1.0])
    a, b = _unit([1.0, 0.0, 0.0]), _unit([0.0, 1.0, 0.0])
    out = without_labels(q, [a, b], 0.5)
    assert float(out @ a) < float(q @ a) and float(out @ b) < float(q @ b)
    assert float(out @ _unit([0.0, 0.0, 1.0])) > float(q @ _unit([0.0, 0.0, 1.0]))


def test_the_label_is_the_transcript_prefix() -> None:
    assert speaker_label("Caroline") == "Caroline:"


# --------------------------------------------------------------------- real embedder


@pytest.fixture(scope="module")
def minilm() -> Iterator[Embedder]:
    emb = Embedder(resolve_embedding())
    yield emb
    emb.close()


SMALL_TALK = [
    "Caroline: Hi Melanie! How are you?",
    "Caroline: Thanks, you too!",
    "Caroline: Haha, yes totally.",
    "Caroline: That sounds great!",
    "Caroline: See you soon, take care!",
    "Caroline: Oh wow, really?",
    "Caroline: I know, right?",
    "Caroline: Good morning!",
    "Caroline: Same here, honestly.",
    "Caroline: Talk to you later!",
]
ANSWER = "Caroline: Painting by the lake on Sundays calms me down."


def _vectors(emb: Embedder, texts: Sequence[str], kind: str) -> np.ndarray:
    v = np.asarray(emb.embed_sync(texts, kind).vectors, dtype=np.float32)
    out: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


@pytest.mark.parametrize(
    "question", ["What does Caroline do to relax?", "How does Caroline unwind?"]
)
def test_with_the_label_taken_out_the_topic_outranks_the_speakers_small_talk(
    minilm: Embedder, question: str
) -> None:
    """all-MiniLM-L6-v2: the name alone gives every short turn of the speaker a cosine
    near 0.6, above the turn that answers; taking half the label out ranks the answer
    higher (the regression this module exists for)."""
    docs = _vectors(minilm, [*SMALL_TALK, ANSWER], "document")
    q = _vectors(minilm, [question], "query")[0]
    label = _vectors(minilm, [speaker_label("Caroline")], "document")[0]

    def answer_rank(vec: np.ndarray) -> int:
        sims = docs @ vec
        return int(np.sum(sims[:-1] > sims[-1]))

    before, after = answer_rank(q), answer_rank(without_labels(q, [label], 0.5))
    assert before >= 3  # the name, not the topic, decided
    assert after < before


def test_label_vectors_are_embedded_once_per_name(minilm: Embedder) -> None:
    calls: list[list[str]] = []

    async def embed(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return _vectors(minilm, texts, "document")

    labels = LabelVectors(embed, limit=3)

    async def scenario() -> None:
        first = await labels.get(["Caroline", "Melanie"])
        again = await labels.get(["Melanie", "Caroline"])
        assert np.array_equal(first[0], again[1]) and np.array_equal(first[1], again[0])
        assert calls == [["Caroline:", "Melanie:"]]
        await labels.get(["Jon", "Gina"])  # past the limit: the cache starts over
        assert calls[-1] == ["Jon:", "Gina:"]
        await labels.get(["Jon"])
        assert len(calls) == 2
        q = _vectors(minilm, ["What did Jon bake?"], "query")[0]
        assert await labels.focus(q, [], 0.5) is q
        assert await labels.focus(None, ["Jon"], 0.5) is None
        focused = await labels.focus(q, ["Jon"], 0.5)
        assert focused is not None and not np.allclose(focused, q)

    asyncio.run(scenario())


def test_named_speakers_are_looked_for_only_when_the_focus_is_on() -> None:
    asked: list[int] = []

    def speakers(limit: int) -> list[str]:
        asked.append(limit)
        return ["Caroline", "Melanie"]

    assert named_in("What did Caroline paint?", speakers, 0.5) == ["Caroline"]
    assert asked == [MAX_SPEAKERS]
    # off (a profile whose vectors the name does not dominate): the view is not counted
    assert named_in("What did Caroline paint?", speakers, 0.0) == []
    assert asked == [MAX_SPEAKERS]
