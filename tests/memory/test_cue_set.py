"""The implicit-recall set and its stitching (scripts/cue_set.py, scripts/cue_stitch.py):
valid, balanced, mostly without shared words, and stitched the same way every time. No
daemon and no LoCoMo data: the conversations here are made up."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest

from scripts.cue_report import covered
from scripts.cue_set import (
    CUE_DATA,
    KINDS,
    MAX_SHARED_SHARE,
    NO_MEMORY_DATA,
    PROMPT_KINDS,
    CuePair,
    is_question,
    load_pairs,
    load_prompts,
    prefix_links,
    problems,
    shared_share,
    shared_terms,
)
from scripts.cue_stitch import MIN_GAP_MS, cue_turn_ids, stitch
from scripts.locomo_data import Conversation, EvalTurn

DAY = 24 * 3600 * 1000


def test_the_set_is_valid_and_balanced_across_kinds_and_splits() -> None:
    pairs, prompts = load_pairs(), load_prompts()
    assert problems(pairs, prompts) == []
    per = Counter((p.kind, p.split) for p in pairs)
    assert sum(per[(k, s)] for k in KINDS for s in ("dev", "holdout")) >= 240
    for kind in KINDS:
        assert per[(kind, "dev")] >= 20 and per[(kind, "holdout")] >= 20, kind
    # the fresh part, written after the constants were fixed: every kind has its share
    for path in (CUE_DATA, NO_MEMORY_DATA):
        assert "fresh" in json.loads(path.read_text())["splits"]
    for kind in KINDS:
        assert per[(kind, "fresh")] >= 10, kind
    fresh_prompts = Counter(p.kind for p in prompts if p.split == "fresh")
    assert all(fresh_prompts[k] >= 8 for k in PROMPT_KINDS), fresh_prompts


def test_fewer_than_a_quarter_of_the_pairs_share_a_content_word() -> None:
    pairs = load_pairs()
    for split in ("dev", "holdout", "fresh"):
        assert shared_share([p for p in pairs if p.split == split]) < MAX_SHARED_SHARE
    # most triggers are statements and requests, some are questions
    asked = sum(1 for p in pairs if is_question(p.trigger))
    assert 0 < asked < len(pairs) / 2


def test_shared_terms_use_the_projects_analyzer() -> None:
    pair = CuePair("x", "preference", "dev", "I'm allergic to shellfish.", None, "Plan a paella.")
    assert shared_terms(pair) == set()
    both = replace(pair, assistant="Noted, no shellfish.", trigger="Any shellfish at Marco's?")
    assert shared_terms(both) == {"shellfish"}
    # the light stemmer keeps "allergic" and "allergy" apart; the prefix view links them
    loose = replace(pair, trigger="Is there an allergy menu?")
    assert shared_terms(loose) == set() and prefix_links(loose) == {"allergi"}


def test_the_no_memory_prompts_cover_every_kind() -> None:
    prompts = load_prompts()
    assert len([p for p in prompts if p.split in ("dev", "holdout")]) >= 60
    per = Counter((p.kind, p.split) for p in prompts)
    assert all(per[(k, s)] > 0 for k in PROMPT_KINDS for s in ("dev", "holdout"))


def _conversation(name: str, sessions: int, start: int) -> Conversation:
    turns: list[EvalTurn] = []
    dates: dict[str, int] = {}
    for n in range(1, sessions + 1):
        sid, base = f"{name}:session_{n}", start + n * 9 * DAY
        dates[sid] = base
        for i in range(4):
            role = "user" if i % 2 == 0 else "assistant"
            speaker = "Ada" if role == "user" else "Bo"
            content = f"{speaker}: turn {i} of session {n}"
            turns.append(EvalTurn(f"D{n}:{i + 1}", sid, n, i, role, speaker, content, base + i))
    return Conversation(name, "Ada", "Bo", turns, [], dates)


@pytest.fixture(scope="module")
def convs() -> list[Conversation]:
    return [_conversation(f"conv-{i}", 12 + 3 * i, 1_680_000_000_000 + i * DAY) for i in range(3)]


def test_stitching_is_deterministic_and_seeded(convs: list[Conversation]) -> None:
    pairs, prompts = load_pairs(), load_prompts()
    first = stitch(convs, pairs, prompts, "dev")
    again = stitch(convs, pairs, prompts, "dev")
    assert [s.conv for s in first] == [s.conv for s in again]
    assert [s.asks for s in first] == [s.asks for s in again]
    other = stitch(convs, pairs, prompts, "dev", seed=34)
    assert [s.cue_sessions for s in other] != [s.cue_sessions for s in first]
    # a pair keeps its moment when another pair of its conversation is left out
    st = first[0]
    mine = [a.pair for a in st.asks if a.pair is not None]
    from scripts.cue_stitch import stitch_one

    fewer = stitch_one(convs[0], mine[1:], [], "dev")
    kept = f"{st.namespace}:cue-{mine[-1].id}"
    assert fewer.cue_sessions[kept] == st.cue_sessions[kept]


def test_every_cue_is_a_short_session_inside_the_timeline(convs: list[Conversation]) -> None:
    pairs, prompts = load_pairs(), load_prompts()
    for split in ("dev", "holdout"):
        stitched = stitch(convs, pairs, prompts, split)
        dealt = [a.pair.id for s in stitched for a in s.asks if a.pair is not None]
        assert sorted(dealt) == sorted(p.id for p in pairs if p.split == split)
        asked = [a.prompt.id for s in stitched for a in s.asks if a.prompt is not None]
        assert sorted(asked) == sorted(p.id for p in prompts if p.split == split)
        for conv, st in zip(convs, stitched, strict=True):
            assert st.namespace == f"{conv.sample_id}:cues-{split}"
            # many cues per conversation, of every kind
            assert len(st.cue_sessions) >= 30
            assert {a.kind for a in st.asks if a.pair is not None} == set(KINDS)
            starts = sorted(conv.session_dates.values())
            times = sorted(st.cue_sessions.values())
            assert starts[0] <= times[0] and times[-1] <= starts[-1]
            for t in times:
                others = [s for s in (*starts, *times) if s != t]
                assert min(abs(t - s) for s in others) >= MIN_GAP_MS
            turns = st.conv.turns
            assert [t.ts for t in turns] == sorted(t.ts for t in turns)
            assert len({t.id for t in turns}) == len(turns)
            assert all(t.session_id.startswith(st.namespace + ":") for t in turns)
            end = turns[-1].ts
            for q, ask in zip(st.conv.questions, st.asks, strict=True):
                assert ask.ts > end and ask.session_id not in st.conv.session_dates
                if ask.pair is not None:
                    assert q.text == ask.pair.trigger
                    assert q.evidence == cue_turn_ids(ask.pair)
                    cue = [t for t in turns if t.id in q.evidence]
                    assert [t.role for t in cue] == ["user", "assistant"][: len(cue)]
                    # labelled like the history's own turns
                    assert cue[0].content == f"{conv.speaker_a}: {ask.pair.user}"
                    assert len({t.session_id for t in cue}) == 1
                else:
                    assert q.evidence == ()


def test_bare_stitching_leaves_the_cue_text_as_written(convs: list[Conversation]) -> None:
    pairs = load_pairs()
    st = stitch(convs, pairs, [], "holdout", labels=False)[1]
    pair = next(a.pair for a in st.asks if a.pair is not None)
    turn = next(t for t in st.conv.turns if t.id == cue_turn_ids(pair)[0])
    assert turn.content == pair.user and turn.speaker == convs[1].speaker_a


def test_cues_said_inside_the_sessions(convs: list[Conversation]) -> None:
    """eval_cues --inside: every cue moved into one of the conversation's own sessions,
    between two of its turns, in order, the same way every time."""
    from scripts.eval_cues import inside_sessions

    pairs, prompts = load_pairs(), load_prompts()
    for st in stitch(convs, pairs, prompts, "dev"):
        inside = inside_sessions(st)
        assert inside_sessions(st).conv == inside.conv
        assert inside.asks == st.asks and inside.cue_sessions == {}
        turns = inside.conv.turns
        assert sorted(t.id for t in turns) == sorted(t.id for t in st.conv.turns)
        assert [t.ts for t in turns] == sorted(t.ts for t in turns)
        assert set(inside.conv.session_dates) == {t.session_id for t in turns}
        by_session: dict[str, list[EvalTurn]] = {}
        for t in turns:
            by_session.setdefault(t.session_id, []).append(t)
        for own in by_session.values():
            assert [t.position for t in own] == list(range(len(own)))
            assert own[0].id.startswith("D") and own[-1].id.startswith("D")
        for ask in inside.asks:
            if ask.pair is None:
                continue
            ids = cue_turn_ids(ask.pair)
            host = by_session[next(t.session_id for t in turns if t.id == ids[0])]
            at = [t.id for t in host].index(ids[0])
            assert [t.id for t in host[at : at + len(ids)]] == list(ids)


def test_cover_is_any_turn_of_the_cue() -> None:
    assert covered(["D1:1", "goal-01:a"], ("goal-01:u", "goal-01:a")) == 1.0
    assert covered(["D1:1"], ("goal-01:u",)) == 0.0
