"""Implicit recall (issue 33): densities kept in step, the corrected scores, the channel's
share of the budget, and what a plan injects in each mode."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import numpy as np
import pytest

from sidecar.assembly.candidates import Candidate
from sidecar.assembly.density import MIN_NORM, TRUSTED_ROWS, TYPICAL_DENSITY, Density
from sidecar.assembly.duplicates import text_key
from sidecar.assembly.implicit import (
    DEFAULT_IMPLICIT,
    OFF,
    ImplicitPool,
    Shares,
    ramp,
    shares,
    top_rows,
)
from sidecar.assembly.plan import plan_assembly
from sidecar.assembly.selection import DEFAULT_ASSEMBLY
from sidecar.engines.int8scan import Int8Rows, Scan

DIMS = 24
# implicit recall leads whatever the random vectors' best plain cosine
LEADS = replace(DEFAULT_IMPLICIT, strong_cosine=1.1)


def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    m = rng.normal(size=(n, DIMS)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def labelled(
    rng: np.random.Generator, n: int
) -> tuple[np.ndarray, list[str], dict[str, np.ndarray]]:
    """Rows of two speakers, each row a mix of its speaker's label and its own content."""
    labels = {"Ana": unit_rows(rng, 1)[0], "Bo": unit_rows(rng, 1)[0]}
    who = ["Ana" if i % 3 else "Bo" for i in range(n)]
    mat = unit_rows(rng, n) + 0.8 * np.stack([labels[w] for w in who])
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    return mat.astype(np.float32), who, labels


def free_rows(mat: np.ndarray, who: list[str], labels: dict[str, np.ndarray]) -> np.ndarray:
    out = []
    for x, w in zip(mat, who, strict=True):
        e = labels[w] / np.linalg.norm(labels[w])
        v = x - (x @ e) * e
        out.append(v / np.linalg.norm(v))
    return np.stack(out)


def test_densities_are_the_mean_of_the_nearest_label_free_neighbours() -> None:
    rng = np.random.default_rng(1)
    mat, who, labels = labelled(rng, 60)
    dens = Density(k=4, reference=1000)
    dens.update(0, mat, lambda i: who[i], lambda i: True, labels)
    free = free_rows(mat, who, labels)
    sims = free @ free.T
    np.fill_diagonal(sims, -np.inf)
    want = np.sort(sims, axis=1)[:, -4:].mean(axis=1)
    assert np.allclose(dens.values, want, atol=1e-5)
    q = unit_rows(rng, 1)[0]
    got = dens.corrected(mat @ q, None, q)
    # densities are read against the history's median, placed at TYPICAL_DENSITY
    shift = TYPICAL_DENSITY - float(np.median(want))
    assert np.allclose(got, free @ q - (want + shift), atol=1e-5)


@pytest.mark.parametrize("reference", [16, 1000])
def test_incremental_densities_equal_a_rebuild(reference: int) -> None:
    """Rows appended in batches (the reference filling up, then full) and a rewritten row
    give the densities of computing everything at once."""
    rng = np.random.default_rng(2)
    mat, who, labels = labelled(rng, 50)
    whole = Density(k=3, reference=reference)
    whole.update(0, mat, lambda i: who[i], lambda i: i % 2 == 0, labels)
    step = Density(k=3, reference=reference)
    for hi in (5, 9, 30, 50):
        step.update(0, mat[:hi], lambda i: who[i], lambda i: i % 2 == 0, labels)
    assert np.allclose(step.values, whole.values, atol=1e-5)
    assert (step.eligible == whole.eligible).all()
    changed = mat.copy()
    changed[40] = unit_rows(rng, 1)[0]  # not a reference row when the reference is 16
    step.update(0, changed, lambda i: who[i], lambda i: i % 2 == 0, labels, changed=[40])
    again = Density(k=3, reference=reference)
    again.update(0, changed, lambda i: who[i], lambda i: i % 2 == 0, labels)
    if reference < 40:
        assert math.isclose(step.values[40], again.values[40], abs_tol=1e-5)
    else:  # the row is in the reference: only its own neighbours are recomputed
        assert math.isclose(step.values[40], again.values[40], abs_tol=1e-5)


def test_eligibility_read_many_rows_at_once_gives_the_same_densities() -> None:
    """``eligible_rows`` (what a view's sync passes, read from its arrays) and the
    per-row ``eligible_of`` give the same bits, appended in batches and rewritten."""
    rng = np.random.default_rng(12)
    mat, who, labels = labelled(rng, 9000)  # more than a CHUNK of rows
    ok = np.arange(mat.shape[0]) % 3 != 1
    one = Density(k=3, reference=64)
    many = Density(k=3, reference=64)
    for hi in (40, 5000, 9000):
        one.update(0, mat[:hi], lambda i: who[i], lambda i: bool(ok[i]), labels, [7])
        many.update(
            0,
            mat[:hi],
            lambda i: who[i],
            lambda i: False,
            labels,
            [7],
            eligible_rows=ok.__getitem__,
        )
    for name in ("values", "coef", "norm", "eligible", "top"):
        assert getattr(one, name).tobytes() == getattr(many, name).tobytes(), name


def test_duplicate_keys_without_the_regex_are_the_regexs() -> None:
    """ASCII texts are keyed without the regex; the key is the regex's, every ASCII
    character included (and a text with others still goes through it)."""
    rng = np.random.default_rng(13)
    chars = [chr(c) for c in range(128)]
    texts = ["".join(rng.choice(chars, size=int(rng.integers(0, 40)))) for _ in range(3000)]
    texts += ["Ana: Thanks -- see you  at 9!!", "  _x_  ", "Café, naïve ÉCOLE_ straße", ""]
    for t in texts:
        want = "user\x1f" + re.sub(r"[\W_]+", " ", t.casefold()).strip()
        assert text_key("user", t) == want, repr(t)


def test_a_new_layout_or_label_set_rebuilds() -> None:
    rng = np.random.default_rng(3)
    mat, who, labels = labelled(rng, 20)
    dens = Density(k=3)
    dens.update(0, mat, lambda i: who[i], lambda i: True, labels)
    first = dens.values.copy()
    dens.update(0, mat, lambda i: who[i], lambda i: True, {})  # labels left in
    assert not np.allclose(first, dens.values)
    dens.update(1, mat[:10], lambda i: who[i], lambda i: True, labels)  # removals: shorter
    assert dens.n == 10


def test_a_row_that_is_only_its_label_is_never_returned() -> None:
    rng = np.random.default_rng(4)
    mat, who, labels = labelled(rng, 20)
    mat[5] = labels[who[5]] / np.linalg.norm(labels[who[5]])
    dens = Density(k=3)
    dens.update(0, mat, lambda i: who[i], lambda i: True, labels)
    assert dens.norm[5] < MIN_NORM and not dens.eligible[5]
    q = mat[5]
    rows, _, _ = top_rows(dens, q, 20, scan=Scan(mat, q, None))
    assert 5 not in rows.tolist()


def test_the_int8_prefiltered_scan_gives_the_exact_top() -> None:
    rng = np.random.default_rng(5)
    mat, who, labels = labelled(rng, 400)
    dens = Density(k=5, reference=100)
    dens.update(0, mat, lambda i: who[i], lambda i: i % 3 != 1, labels)
    shadow = Int8Rows(DIMS)
    shadow.assign(mat)
    for _ in range(5):
        q = unit_rows(rng, 1)[0]
        exact = top_rows(dens, q, 12, scan=Scan(mat, q, None))
        approx_scan = Scan(mat, q, shadow)
        assert approx_scan.approx is not None  # the prefilter path
        approx = top_rows(dens, q, 12, scan=approx_scan)
        assert exact[0].tolist() == approx[0].tolist()
        assert np.allclose(exact[1], approx[1], atol=1e-5)
        assert math.isclose(exact[2], approx[2], abs_tol=1e-5)
        rows = np.arange(0, 400, 2, dtype=np.int64)  # a pool's rows only (an indexed view)
        sub = top_rows(dens, q, 12, rows=rows, matrix=mat)
        assert set(sub[0].tolist()) <= set(rows.tolist())


def test_trust_needs_a_reference() -> None:
    rng = np.random.default_rng(6)
    mat, who, labels = labelled(rng, TRUSTED_ROWS + 1)
    dens = Density()
    dens.update(0, mat[: TRUSTED_ROWS - 1], lambda i: who[i], lambda i: True, labels)
    assert not dens.trusted
    dens.update(0, mat, lambda i: who[i], lambda i: True, labels)
    assert dens.trusted


# ------------------------------------------------------------------------- shares


def test_shares_follow_what_stands_out_and_who_leads() -> None:
    cfg = DEFAULT_IMPLICIT
    total = 1000
    nothing = ImplicitPool(standout=cfg.trickle_low - 0.01)
    assert shares(cfg, nothing, 0.3, total) == shares(cfg, nothing, 0.3, total)
    assert shares(cfg, nothing, 0.3, total).implicit == 0
    assert shares(cfg, nothing, 0.3, total).main == 0  # a greeting recalls nothing
    full = ImplicitPool(standout=cfg.high)
    got = shares(cfg, full, 0.3, total)
    assert got.mode == "implicit" and got.implicit == int(cfg.share * total)
    half = ImplicitPool(standout=(cfg.low + cfg.high) / 2)
    assert math.isclose(ramp(half.standout, cfg), 0.5, abs_tol=1e-6)
    assert shares(cfg, half, 0.3, total).implicit == int(cfg.share * 0.5 * total)
    strong = shares(cfg, full, cfg.strong_cosine, total)
    assert strong.mode == "explicit" and strong.main is None
    named = shares(cfg, replace(nothing, names_speaker=True), 0.1, total)
    assert named.mode == "explicit" and named.main is None
    assert shares(OFF, full, 0.1, total).mode == "off"
    assert shares(cfg, None, 0.1, total) == shares(OFF, None, 0.1, total)
    assert ramp(-math.inf, cfg) == 0.0


def test_just_below_the_ramp_the_best_statement_alone_may_come_back() -> None:
    cfg = DEFAULT_IMPLICIT
    assert cfg.trickle_low < cfg.low and cfg.trickle_tokens > 0
    little = ImplicitPool(standout=(cfg.trickle_low + cfg.low) / 2)
    got = shares(cfg, little, 0.3, 1000)
    assert got == Shares(cfg.trickle_tokens, 0, "implicit")
    assert shares(cfg, little, 0.3, 20).implicit == 20  # never more than the budget
    off = replace(cfg, trickle_tokens=0)
    assert shares(off, little, 0.3, 1000).implicit == 0
    named = shares(cfg, replace(little, names_speaker=True), 0.1, 1000)
    assert named.mode == "explicit" and named.implicit == 0


# --------------------------------------------------------------------------- plans


def _turn(i: int, text: str, vec: np.ndarray, *, role: str = "user", ts: int = 0) -> Candidate:
    return Candidate(
        "turn", "turns:ns", f"t{i}", text, session_id=f"s{i}", role=role, seq=0, ts=ts or None,
        vector=vec.astype(np.float32),
    )  # fmt: skip


def _plan(
    query: str, qv: np.ndarray, cands: list[Candidate], pool: ImplicitPool | None, **kw: object
):  # type: ignore[no-untyped-def]
    return plan_assembly(
        query=query,
        query_vector=qv.astype(np.float32),
        token_budget=4000,
        session_id="fresh",
        candidates=cands,
        implicit=pool,
        config=replace(DEFAULT_ASSEMBLY, **kw),  # type: ignore[arg-type]
    )


def test_implicit_mode_injects_the_cue_below_the_floor_and_nothing_else() -> None:
    rng = np.random.default_rng(7)
    chatter = [_turn(i, f"chat line {i}", v) for i, v in enumerate(unit_rows(rng, 30))]
    qv = unit_rows(rng, 1)[0]
    cue_vec = qv * 0.1 + unit_rows(rng, 1)[0]
    cue = _turn(99, "I'm allergic to shellfish.", cue_vec / np.linalg.norm(cue_vec))
    pool = ImplicitPool((cue,), (-0.05,), standout=-0.05)
    plan = _plan("Plan me a paella night.", qv, [*chatter, cue], pool)
    assert [i.id for i in plan.selected] == ["t99"]
    assert plan.selected[0].reason.startswith("implicit:")
    assert float(cue.vector @ qv) < DEFAULT_ASSEMBLY.relevance_floor  # type: ignore[operator]
    greeting = _plan("hello", qv, [*chatter, cue], replace(pool, standout=-0.5))
    assert greeting.selected == ()  # nothing stands out: nothing at all


def test_explicit_mode_leaves_the_budget_to_the_ranking() -> None:
    rng = np.random.default_rng(8)
    qv = unit_rows(rng, 1)[0]
    close = _turn(1, "Caroline went to the support group on Tuesday.", qv)
    other = _turn(2, "I'm allergic to shellfish.", unit_rows(rng, 1)[0])
    pool = ImplicitPool((other,), (0.1,), standout=0.1, names_speaker=True)
    plan = _plan("When did Caroline go to the support group?", qv, [close, other], pool)
    assert [i.id for i in plan.selected] == ["t1"]
    without = _plan("When did Caroline go to the support group?", qv, [close, other], None)
    assert [i.id for i in without.selected] == ["t1"]


def test_identical_entries_collapse_to_the_newest_with_a_count() -> None:
    rng = np.random.default_rng(9)
    qv = unit_rows(rng, 1)[0]
    near = qv + 0.3 * unit_rows(rng, 1)[0]
    near /= np.linalg.norm(near)
    texts = [
        "What about the weather tomorrow?",
        "what about the weather  tomorrow",
        "WHAT ABOUT THE WEATHER TOMORROW!",
    ]
    copies = [_turn(i, texts[i % 3], near, ts=1_000_000 + i * 60_000) for i in range(16)]
    home = _turn(50, "I live in Lisbon, near the river.", qv)
    # unrelated turns, so the pool's min-max normalisation leaves the copies a score
    others = [_turn(60 + i, f"note {i}", v) for i, v in enumerate(unit_rows(rng, 12))]
    plan = _plan("Where do I live?", qv, [*copies, home, *others], None, render="compact")
    ids = [i.id for i in plan.selected]
    assert "t50" in ids
    weather = [i for i in plan.selected if "weather" in i.text.lower()]
    assert len(weather) == 1 and weather[0].id == "t15" and weather[0].repeats == 16
    assert "(said 16 times)" in plan.system_prompt_addition
    pool = ImplicitPool(tuple(copies), tuple([-0.01] * 16), standout=-0.01)
    implicit = _plan("Anything for tomorrow?", qv * -1, copies, pool)
    assert [(i.id, i.repeats) for i in implicit.selected] == [("t15", 16)]


def test_explain_says_why_an_implicit_candidate_was_left_out() -> None:
    rng = np.random.default_rng(10)
    qv = unit_rows(rng, 1)[0]
    cands = [_turn(i, f"statement number {i} " * 20, unit_rows(rng, 1)[0]) for i in range(40)]
    pool = ImplicitPool(tuple(cands), tuple(-0.01 - 0.001 * i for i in range(40)), standout=-0.01)
    plan = _plan("Plan a trip.", qv, cands, pool, explain=True, implicit=LEADS)
    whys = [c.why for c in plan.considered if c.why.startswith("implicit:")]
    assert whys and "share" in whys[0]
    quiet = _plan("hi", qv, cands, replace(pool, standout=-0.9), explain=True, implicit=LEADS)
    assert any("nothing stands out" in c.why for c in quiet.considered)
