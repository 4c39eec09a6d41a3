#!/usr/bin/env python3
"""`make eval`: implicit recall. Does the memory a trigger assembles hold its cue?

    python scripts/eval_cues.py [DATA.json] [--split S ...] [--no-daemon] [--no-loco]
        [--endpoint E] [--overlap] [--no-write] [--no-cache] [--seed N] [--inside]

The set (``tests/memory/data/cue_pairs.json``, :mod:`scripts.cue_set`) holds cue /
trigger pairs written for this project: something the user said earlier, and a later
user message whose right answer it changes without asking for it ("I'm allergic to
shellfish" ... "Plan me a paella night"). Its overlap is printed first: how many triggers
share a content word with their cue (fewer than a quarter may).

Each split's pairs are stitched into the LoCoMo dev conversations (DATA, default
../shared/eval/locomo_dev.json, read at run time and never copied;
:mod:`scripts.cue_stitch`): every cue a short session at a seeded random moment of the
conversation, many cues per conversation, the trigger asked from a fresh session after
the conversation ends. A trigger is **covered** when the assembled memory (1,000 memory
tokens: ``tokenBudget`` 4,000 x the default fraction 0.25) holds a turn of its cue, by
turn id, as ``eval_locomo`` matches evidence. Methods, over the same vectors and budget:

* ``cosine``, ``bm25``, ``rrf`` (and ``bm25*``, ``rrf*`` with the project's analyzer):
  the plain baselines of ``eval_locomo`` (:mod:`scripts.locomo_pool`), the budget filled
  in rank order;
* ``inprocess``: ``plan_assembly`` in-process, as ``eval_locomo --inprocess`` runs it;
* ``loco``: the daemon's configuration in-process, with implicit recall's constants
  (:data:`LOCO_GRID`) chosen leave-one-conversation-out: on the split's two other
  conversations, the most triggers covered among the points whose no-memory prompts
  there stay under :data:`LOCO_NO_MEMORY_TOKENS` (as the dev constants were chosen),
  scored on the held-out conversation;
* ``assemble``: the real daemon (spawned over stdio with a temporary data directory, or
  ``--endpoint``): every session ingested in time order, then ``assemble`` per trigger.

The cue turns carry the speakers' labels as the LoCoMo turns do; the baselines and the
in-process figure are also given with bare cue turns, to show how much the form is worth.

The prompts no memory bears on (``tests/memory/data/no_memory_prompts.json``) are asked
the same way after the triggers; the memory tokens each one is given (``budget.used``)
are reported: the right amount is none.

Figures per split (dev, holdout; fresh once it is written) go to docs/benchmarks.md
between ``<!-- bench:cues -->`` markers.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.cue_report import CueScores, covered, render_cover, render_tokens  # noqa: E402
from scripts.cue_set import (  # noqa: E402
    SPLITS,
    CuePair,
    NoMemoryPrompt,
    load_pairs,
    load_prompts,
    problems,
    render_set,
    shared_examples,
)
from scripts.cue_stitch import SEED, Stitched, stitch  # noqa: E402
from scripts.doc_sections import write_section  # noqa: E402
from scripts.eval_locomo import TOKEN_BUDGET  # noqa: E402
from scripts.locomo_data import (  # noqa: E402
    DEFAULT_DATA,
    Conversation,
    EvalTurn,
    load_conversations,
)
from scripts.locomo_embed import CachedEmbedder, make_embedder  # noqa: E402
from scripts.locomo_pool import (  # noqa: E402
    MEMORY_FRACTION,
    ConvData,
    baseline_rankings,
    conversation_candidates,
    fill_budget,
    inprocess_plan,
    prepare,
)
from scripts.locomo_report import mean  # noqa: E402
from sidecar.assembly.selection import DEFAULT_ASSEMBLY, AssemblyConfig  # noqa: E402
from sidecar.assembly.service import DAEMON_ASSEMBLY  # noqa: E402

DOC = REPO / "docs" / "benchmarks.md"
BASELINES = ("cosine", "bm25", "rrf", "bm25*", "rrf*")


def conv_name(st: Stitched) -> str:
    return st.namespace.split(":", 1)[0]


# ---------------------------------------------------------------------------- in-process


def run_baselines(datas: Sequence[ConvData], sts: Sequence[Stitched], scores: CueScores) -> None:
    budget = int(TOKEN_BUDGET * MEMORY_FRACTION)
    for data, st in zip(datas, sts, strict=True):
        for qi, ask in enumerate(st.asks):
            for method, ranking in baseline_rankings(data, qi).items():
                chosen = fill_budget(ranking, data.costs, budget)
                if ask.pair is not None:
                    ids = [data.conv.turns[i].id for i in chosen]
                    cover = covered(ids, data.conv.questions[qi].evidence)
                    scores.add(st.split, method, conv_name(st), ask.kind, cover)
                elif method == "cosine":  # every baseline fills the budget; one says so
                    scores.spent(st.split, method, ask.kind, sum(data.costs[i] for i in chosen))


def run_inprocess(
    datas: Sequence[ConvData],
    sts: Sequence[Stitched],
    scores: CueScores,
    now_ms: int,
    *,
    config: AssemblyConfig = DEFAULT_ASSEMBLY,
    method: str = "inprocess",
) -> None:
    budget = int(TOKEN_BUDGET * MEMORY_FRACTION)
    for data, st in zip(datas, sts, strict=True):
        cands = conversation_candidates(data)
        for qi, ask in enumerate(st.asks):
            plan = inprocess_plan(data, cands, qi, budget, config=config, now_ms=now_ms)
            if ask.pair is not None:
                ids = [t for item in plan.selected for t in item.turn_ids]
                cover = covered(ids, data.conv.questions[qi].evidence)
                scores.add(st.split, method, conv_name(st), ask.kind, cover)
            else:
                b = plan.budget
                scores.spent(st.split, method, ask.kind, b.used, b.recovery)


def inside_sessions(st: Stitched, seed: int = SEED) -> Stitched:
    """``st`` with every cue said inside one of the conversation's own sessions instead of
    a session of its own: each cue (its user turn and reply, in order) goes between two
    turns of a seeded session and gap of that session, the session's later turns move
    down, and the cue's turns take the time of the turn before them. Turn ids are kept,
    so the cover is counted the same way. Its neighbours are now chatter about something
    else: the pessimistic case, where stitching gives the optimistic one (a cue alone in
    its session)."""
    cue_sids = set(st.cue_sessions)
    hosts: dict[str, list[EvalTurn]] = {}
    cues: dict[str, list[EvalTurn]] = {}
    for t in st.conv.turns:
        (cues if t.session_id in cue_sids else hosts).setdefault(t.session_id, []).append(t)
    for own in hosts.values():
        own.sort(key=lambda t: t.position)
    names = sorted(s for s, own in hosts.items() if len(own) >= 2)
    gaps: dict[tuple[str, int], list[str]] = {}  # (session, turns before) -> cue sessions
    for sid in sorted(cues):
        rng = random.Random(f"{seed}:{st.split}:inside:{sid}")
        host = rng.choice(names)
        gaps.setdefault((host, rng.randrange(1, len(hosts[host]))), []).append(sid)
    turns: list[EvalTurn] = []
    for host, own in hosts.items():
        out: list[EvalTurn] = []
        for i, t in enumerate(own):
            out.append(t)
            said = [c for sid in gaps.get((host, i + 1), []) for c in cues[sid]]
            n, ts = t.session_index, t.ts
            out += [replace(c, session_id=host, session_index=n, ts=ts) for c in said]
        turns += [replace(t, position=p) for p, t in enumerate(out)]
    turns.sort(key=lambda t: (t.ts, t.session_id, t.position))
    dates = {k: v for k, v in st.conv.session_dates.items() if k not in cue_sids}
    conv = replace(st.conv, turns=turns, session_dates=dates)
    return replace(st, conv=conv, cue_sessions={})


# Implicit recall's constants, around the chosen ones (docs/memory.md, "Implicit recall:
# the retrieval"): where the ramp starts, how far below it the trickle reaches, how much it
# may take, and the channel's share. A rotation picks the point with the most triggers
# covered on its two training conversations among those whose no-memory prompts there get
# a median of at most LOCO_NO_MEMORY_TOKENS (how the dev constants were chosen: 2/3 of the
# 60-token target).
LOCO_GRID: dict[str, tuple[float, ...]] = {
    "low": (-0.13, -0.11, -0.09),
    "trickle_low": (-0.17, -0.15, -0.13),
    "trickle_tokens": (0, 45),
    "share": (0.7, 0.9),
}
LOCO_NO_MEMORY_TOKENS = 40


@dataclass
class GridPoint:
    params: dict[str, float]
    cover: dict[str, list[float]]  # conversation -> per trigger
    spent: dict[str, list[int]]  # conversation -> memory tokens per no-memory prompt


def run_loco(
    datas: Sequence[ConvData], sts: Sequence[Stitched], scores: CueScores, now_ms: int
) -> str:
    """Leave-one-conversation-out over implicit recall's constants (:data:`LOCO_GRID`):
    the point chosen on the split's other conversations, scored on the held-out one."""
    budget = int(TOKEN_BUDGET * MEMORY_FRACTION)
    cands = [conversation_candidates(d) for d in datas]
    names = list(LOCO_GRID)
    results: list[GridPoint] = []
    for values in itertools.product(*LOCO_GRID.values()):
        params = dict(zip(names, values, strict=True))
        settings: dict[str, Any] = dict(params)
        implicit = replace(DAEMON_ASSEMBLY.implicit, **settings)
        config = replace(DAEMON_ASSEMBLY, implicit=implicit)
        point = GridPoint(params, {}, {})
        for data, cs, st in zip(datas, cands, sts, strict=True):
            cover = point.cover.setdefault(conv_name(st), [])
            spent = point.spent.setdefault(conv_name(st), [])
            for qi, ask in enumerate(st.asks):
                plan = inprocess_plan(data, cs, qi, budget, config=config, now_ms=now_ms)
                if ask.pair is None:
                    spent.append(plan.budget.used)
                    continue
                ids = [t for it in plan.selected for t in it.turn_ids]
                cover.append(covered(ids, data.conv.questions[qi].evidence))
        results.append(point)
    split = sts[0].split
    lines = [
        "| held out | chosen on the others | held-out cover | held-out no-memory p50 | "
        "the constants' cover | best possible |",
        "|---|---|---|---|---|---|",
    ]
    for st in sts:
        held = conv_name(st)
        point = max(results, key=functools.partial(_train_score, held=held))
        for qi, value in zip(st.triggers, point.cover[held], strict=True):
            scores.add(split, "loco", held, st.asks[qi].kind, value)
        default = next((p.cover[held] for p in results if _is_default(p.params)), point.cover[held])
        best = max(mean(p.cover[held]) for p in results)
        chosen = ", ".join(f"{k}={v:g}" for k, v in point.params.items())
        lines.append(
            f"| {split} {held} | {chosen} | {mean(point.cover[held]):.3f} | "
            f"{statistics.median(point.spent[held]) if point.spent[held] else 0:g} | "
            f"{mean(default):.3f} | {best:.3f} |"
        )
    chosen_cover = next(
        (mean([x for v in p.cover.values() for x in v]) for p in results if _is_default(p.params)),
        float("nan"),
    )
    lines.append(
        f"| **{split} overall** | grid of {len(results)} | "
        f"**{mean(scores.overall(split, 'loco')):.3f}** | | {chosen_cover:.3f} | |"
    )
    return "\n".join(lines)


def _is_default(params: dict[str, float]) -> bool:
    return all(getattr(DAEMON_ASSEMBLY.implicit, k) == v for k, v in params.items())


def _train_score(point: GridPoint, held: str) -> tuple[bool, float]:
    """Within the no-memory limit first, then the most triggers covered (training
    conversations only)."""
    spent = [x for k, v in point.spent.items() if k != held for x in v]
    quiet = not spent or statistics.median(spent) <= LOCO_NO_MEMORY_TOKENS
    return quiet, sum(sum(v) for k, v in point.cover.items() if k != held)


# ---------------------------------------------------------------------------- the daemon


def _sessions(st: Stitched) -> list[list[EvalTurn]]:
    """The conversation's sessions in the order they happened (a history grows in time)."""
    by: dict[str, list[EvalTurn]] = {}
    for t in st.conv.turns:
        by.setdefault(t.session_id, []).append(t)
    return sorted(by.values(), key=lambda ts: ts[0].ts)


def run_assemble(stitched: Sequence[Stitched], scores: CueScores, endpoint: str | None) -> str:
    """Through the daemon; returns a note instead of scores when it cannot run."""
    sys.path.insert(0, str(REPO / "host_clients" / "python"))
    from libravdb_client import Client, LibravdbError

    tmp: tempfile.TemporaryDirectory[str] | None = None
    try:
        if endpoint:
            client = Client(endpoint, timeout=600)
        else:
            tmp = tempfile.TemporaryDirectory(prefix="libravdbd-cues-")
            client = Client.spawn(
                data_dir=Path(tmp.name) / "data",
                env={"HOME": tmp.name},
                stderr=subprocess.DEVNULL,
                timeout=600,
            )
        with client:
            for st in stitched:
                started = time.perf_counter()
                for turns in _sessions(st):
                    messages = [
                        {"id": t.id, "role": t.role, "content": t.content, "ts": t.ts}
                        for t in turns
                    ]
                    client.call(
                        "ingest",
                        {
                            "sessionId": turns[0].session_id,
                            "namespace": st.namespace,
                            "messages": messages,
                        },
                    )
                for qi, ask in enumerate(st.asks):
                    result = client.call(
                        "assemble",
                        {
                            "sessionId": ask.session_id,
                            "namespace": st.namespace,
                            "prompt": st.conv.questions[qi].text,
                            "tokenBudget": TOKEN_BUDGET,
                        },
                    )
                    selected = result.get("selected", [])
                    if ask.pair is not None:
                        ids = [t for item in selected for t in item.get("turnIds", [])]
                        cover = covered(ids, st.conv.questions[qi].evidence)
                        scores.add(st.split, "assemble", conv_name(st), ask.kind, cover)
                    else:
                        parts = result.get("budget", {})
                        used, rec = int(parts.get("used", 0)), int(parts.get("recovery", 0))
                        scores.spent(st.split, "assemble", ask.kind, used, rec)
                print(
                    f"assemble: {st.namespace} done in {time.perf_counter() - started:.0f}s",
                    flush=True,
                )
    except (LibravdbError, OSError) as exc:
        return f"assemble: daemon unavailable ({type(exc).__name__}: {exc}); not scored"
    finally:
        if tmp is not None:
            tmp.cleanup()
    return ""


# ---------------------------------------------------------------------------------- main


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA), help="LoCoMo JSON")
    parser.add_argument("--split", action="append", choices=SPLITS, help="default: all")
    parser.add_argument("--no-daemon", action="store_true", help="in-process figures only")
    parser.add_argument("--no-loco", action="store_true", help="skip leave-one-out (slow)")
    parser.add_argument("--endpoint", default=None, help="a running daemon's endpoint")
    parser.add_argument("--overlap", action="store_true", help="print each pair's shared terms")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--no-cache", action="store_true", help="do not cache embeddings")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--inside",
        action="store_true",
        help="also print in-process figures with the cues said inside the sessions",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    path = Path(args.data)
    if not path.is_file():
        print(f"error: no data at {path}", file=sys.stderr)
        return 2
    pairs, prompts = load_pairs(), load_prompts()
    bad = problems(pairs, prompts)
    if bad:
        print("error: the cue set is invalid:\n" + "\n".join(bad), file=sys.stderr)
        return 2
    set_table = render_set(pairs, prompts)
    print(set_table, flush=True)
    if args.overlap:
        print(shared_examples(pairs))
    splits = [s for s in (args.split or SPLITS) if any(p.split == s for p in pairs)]
    convs = load_conversations(path)
    stitched = {s: stitch(convs, pairs, prompts, s, args.seed) for s in splits}
    embedder = CachedEmbedder(make_embedder(), enabled=not args.no_cache)
    now = int(time.time() * 1000)
    scores = CueScores()
    loco: list[str] = []
    for split in splits:
        sts = stitched[split]
        datas = [prepare(st.conv, embedder) for st in sts]
        run_baselines(datas, sts, scores)
        run_inprocess(datas, sts, scores, now)
        if not args.no_loco:
            loco.append(run_loco(datas, sts, scores, now))
        print(f"{split}: in-process figures done", flush=True)
    bare = bare_cues(convs, pairs, prompts, splits, args.seed, embedder, now, scores)
    inside = (
        inside_table([st for s in splits for st in stitched[s]], splits, args.seed, embedder, now)
        if args.inside
        else ""
    )
    note = ""
    if not args.no_daemon:
        note = run_assemble([st for s in splits for st in stitched[s]], scores, args.endpoint)
    methods = [*BASELINES, "inprocess", *(["loco"] if loco else [])]
    methods += ["assemble"] if not args.no_daemon and not note else []
    tables = [render_cover(scores, s, methods) for s in splits]
    token_methods = [m for m in ("assemble", "inprocess", "cosine") if m in methods]
    tokens = render_tokens(scores, splits, token_methods)
    for text in (*tables, *loco, bare, inside, tokens, note):
        if text:
            print(f"\n{text}")
    if not args.no_write:
        blocks = [set_table, *tables]
        if loco:
            blocks += ["Leave-one-conversation-out over implicit recall's constants:", *loco]
        blocks += [BARE_NOTE, bare, TOKENS_NOTE, tokens]
        body = _doc_body(path, embedder.name, args, stitched, blocks)
        write_section(DOC, "cues", body, "Implicit recall: cue triggers (`make eval`)")
        print(f"wrote {DOC.relative_to(REPO)}")
    if note:
        print(f"error: {note}", file=sys.stderr)
        return 1
    return 0


BARE_NOTE = (
    "The same cues without their speaker label (a host that ingests bare user and assistant "
    "turns next to a labelled transcript), baselines and in-process, beside the labelled "
    "figures above: how much the cover owes to the cue turns' form rather than their content."
)
TOKENS_NOTE = (
    "Memory tokens injected for prompts no memory bears on "
    "(`tests/memory/data/no_memory_prompts.json`, asked after the triggers in the same "
    "namespaces; `budget.used`; every baseline fills the budget whatever the prompt, "
    "`cosine` stands for them):"
)


def bare_cues(
    convs: Sequence[Conversation],
    pairs: Sequence[CuePair],
    prompts: Sequence[NoMemoryPrompt],
    splits: Sequence[str],
    seed: int,
    embedder: CachedEmbedder,
    now_ms: int,
    labelled: CueScores,
) -> str:
    """Overall cover per split with the cue turns stitched without their speaker label,
    beside the labelled run's figures."""
    methods = ["cosine", "bm25", "rrf", "rrf*", "inprocess"]
    scores = CueScores()
    for split in splits:
        sts = stitch(convs, pairs, prompts, split, seed, labels=False)
        datas = [prepare(st.conv, embedder) for st in sts]
        run_baselines(datas, sts, scores)
        run_inprocess(datas, sts, scores, now_ms)
    lines = ["| split | cue turns | " + " | ".join(methods) + " |", "|---|---|" + "---|" * 5]
    for split in splits:
        for name, got in (("labelled", labelled), ("bare", scores)):
            cells = " | ".join(f"{mean(got.overall(split, m)):.3f}" for m in methods)
            lines.append(f"| {split} | {name} | {cells} |")
    return "\n".join(lines)


INSIDE_METHODS = ("own session", "inside a session")


def inside_table(
    stitched: Sequence[Stitched],
    splits: Sequence[str],
    seed: int,
    embedder: CachedEmbedder,
    now_ms: int,
) -> str:
    """The daemon's configuration in-process with the cues as stitched (each a session of
    its own) and said inside the conversation's sessions (:func:`inside_sessions`), per
    split: cover per kind and the no-memory prompts' tokens."""
    scores = CueScores()
    for st in stitched:
        for method, version in zip(INSIDE_METHODS, (st, inside_sessions(st, seed)), strict=True):
            data = prepare(version.conv, embedder)
            run_inprocess([data], [version], scores, now_ms, config=DAEMON_ASSEMBLY, method=method)
    blocks = ["The daemon's configuration in-process, cues in a session of their own and inside:"]
    blocks += [render_cover(scores, s, INSIDE_METHODS) for s in splits]
    blocks.append(render_tokens(scores, splits, INSIDE_METHODS))
    return "\n\n".join(blocks)


def _doc_body(
    path: Path,
    embedder: str,
    args: argparse.Namespace,
    stitched: dict[str, list[Stitched]],
    blocks: Sequence[str],
) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    flags = " --no-daemon" if args.no_daemon else ""
    flags += " --no-loco" if args.no_loco else ""
    cues = {s: [len(st.cue_sessions) for st in sts] for s, sts in stitched.items()}
    spread = "; ".join(f"{s}: {'/'.join(map(str, n))}" for s, n in cues.items())
    head = [
        f"Cue recall (share of triggers whose assembled memory holds a turn of their cue) at "
        f"a {int(TOKEN_BUDGET * MEMORY_FRACTION)}-token memory budget ({TOKEN_BUDGET} x "
        f"{MEMORY_FRACTION}), cues stitched into `{path.name}` ({stamp}, embedder "
        f"`{embedder}`, seed {args.seed}, `python scripts/eval_cues.py{flags}`).",
        "",
        "* The set: `tests/memory/data/cue_pairs.json`, pairs written for this project; a "
        "trigger shares a content word with its cue when the project's analyzer gives "
        "them a common term (prefix-5 links: terms of 5+ letters that start alike, "
        "which the light stemmer keeps apart).",
        "* Stitching (`scripts/cue_stitch.py`): one namespace per conversation and split; "
        "every cue a session of its own at a seeded random moment of the conversation, its "
        "turns labelled with the speakers' names as the LoCoMo turns are; cues per "
        f"conversation {spread}; each trigger asked from a fresh session after the "
        "conversation, without being ingested.",
        "* Methods: `cosine`, `bm25`, `rrf` (`bm25*`, `rrf*`: the project's analyzer) "
        "are eval_locomo's baselines over the same vectors and budget; `inprocess` "
        "is `plan_assembly` in-process; `loco` chooses implicit recall's constants on the "
        "split's other two conversations (the most triggers covered with a no-memory "
        f"median of at most {LOCO_NO_MEMORY_TOKENS} tokens, as on dev) and scores the "
        "third; `assemble` is the daemon.",
    ]
    return "\n".join([*head, *(x for b in blocks for x in ("", b))])


if __name__ == "__main__":
    sys.exit(main())
