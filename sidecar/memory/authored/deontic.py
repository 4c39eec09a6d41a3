"""Rule classifier: does a sentence state an obligation, a prohibition or a permission?

Used by the authored-markdown tiering (a promoted paragraph is a soft rule) and by the
compaction guidance-shard protection. The masks keep the reference bit values
(obligation 2, prohibition 4, permission 8, none 0) so stored ``modality_mask`` values
stay wire-compatible; the rules are a rewrite, not a port.

How a sentence is read:

* Words are Unicode word runs; hyphenated compounds (``keep-alive``, ``must-have``) are
  one word; contractions are expanded (``don't`` → ``do not``, ``let's`` → ``let us``).
* Questions (ending in ``?``) and task markers (``TODO``, ``FIXME``, ``XXX``, ``HACK``)
  are never rules. A code-comment marker (``//``, ``#``, ``/*``, ``--``) is stripped;
  inside a comment a bare imperative is *not* a rule (comments describe code in the
  imperative mood: "increment the counter"), but explicit modals still are
  ("callers must hold the lock", "do not call this from the UI thread").
* The sentence is split into clauses at ``:``, ``;``, ``, then``, ``but``. A clause after
  a metatextual lead-in ("The design goal is: ...", "The idea is: ...") is not a rule.
  A clause containing a reporting verb ("she said we must ...", "legends say ..."), or
  following one ("The fox said: never ..."), is reported speech and not a rule; so is a
  clause framed as fiction ("In the story, the children must ...").
* A leading subordinate clause ending in a comma ("If the build fails, ...", "To get
  started, ...", "When in doubt, ...") is skipped and the main clause after it is read
  as a sentence start. Modals in a trailing conditional ("No worries if you can't make
  it") state no rule and are ignored.
* Sentence start: ``do not`` / ``never`` / ``avoid`` / ``refrain from`` / ``stop <-ing>``
  + verb is a prohibition (not "never mind", "don't worry"); ``no`` is a prohibition
  only when followed by a gerund ("No smoking"), by ``allowed``/``permitted``, or by a
  noun phrase and a preposition without a finite verb ("No secrets in logs") — never an
  interjection ("No worries", "No idea", "No, ...", "No one"); ``please``, ``always``,
  ``strictly``, ``only`` introduce an imperative; ``make sure``, ``ensure``, ``remember
  to``, ``don't forget to``, ``let's``, ``be <adj>`` are obligations; ``feel free to``
  and ``don't hesitate to`` are permissions; an imperative verb (about 300 base forms)
  is an obligation unless the next two words show it is a noun ("Use cases are ...",
  "Run times vary ...", "Store owners complained ...").
* Modals in the main clause, judged by their subject (the word before the modal, skipping adverbs):
  ``I`` is personal, never a rule; ``he/she/they/it/this/that/there`` make ``must`` and
  ``should`` epistemic ("That must be frustrating", "It should work now") unless
  followed by ``be`` + participle ("It must be signed"); ``must/shall/should/ought to/need
  to/have to`` are obligations, and prohibitions when negated ("should not" is a
  prohibition, unlike the reference); ``may``/``can`` are permissions (prohibitions
  when negated) only for ``you`` and role nouns (users, contributors, agents, ...) or in
  ``<noun> can be <participle>``; ``can see/find/tell ...`` is informational;
  ``need not``, ``do not have to``, ``not required``, ``there is no need to`` are
  permissions; ``must have <participle>``, ``should have <participle>``, ``may have`` are
  counterfactual or epistemic;
  ``must be tired/joking/...`` is epistemic.
* Impersonal forms: ``is/are prohibited/forbidden/banned/not allowed`` are prohibitions,
  ``is/are required/mandatory``, ``expected to`` obligations, ``is/are allowed/permitted/
  optional/acceptable``, ``free to``, ``welcome to``, ``it is fine/ok to`` permissions — but
  the same words after ``was/were`` describe the past and are not rules.
* A negative lead ("Under no circumstances ...", "At no time ...", "Nobody ...", "No one
  ...") turns whatever the clause states into a prohibition.
* ``You are ...`` is not by itself an obligation (the reference made every "You are ..."
  one); only ``you are required/expected/to ...`` and the forms above count.

The label of a result is the strongest class present: prohibition, then obligation, then
permission.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.memory.authored.lexicon import (
    CONTRACTIONS,
    DETERMINERS,
    DISCOURSE_ADVERBS,
    DONT_IDIOMS,
    EPISTEMIC_PRONOUNS,
    EPISTEMIC_STATES,
    FINITE_AFTER_NOUN,
    IMPERATIVE_VERBS,
    INFORMATIONAL_AFTER_CAN,
    INTENSIFIERS,
    IRREGULAR_PARTICIPLES,
    KNOWLEDGE_VERBS,
    METATEXT_NOUNS,
    NARRATIVE_FRAMES,
    NEGATIVE_SUBJECTS,
    NEVER_STATEMENT,
    NO_INTERJECTIONS,
    NO_PREPOSITIONS,
    PLAN_PERIODS,
    PLAN_TIMES,
    REPORTING_VERBS,
    ROLE_NOUNS,
    SUBJECT_SKIP_ADVERBS,
    SUBORDINATORS,
    TASK_MARKERS,
)


class Modality(enum.IntFlag):
    """Modality bits, with the reference's values."""

    NONE = 0
    OBLIGATION = 2
    PROHIBITION = 4
    PERMISSION = 8


class DeonticClass(enum.StrEnum):
    OBLIGATION = "obligation"
    PROHIBITION = "prohibition"
    PERMISSION = "permission"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class DeonticResult:
    mask: Modality
    cues: tuple[str, ...] = ()

    @property
    def promoted(self) -> bool:
        return self.mask != Modality.NONE

    @property
    def label(self) -> DeonticClass:
        return label_for_mask(self.mask)


def label_for_mask(mask: int) -> DeonticClass:
    if mask & Modality.PROHIBITION:
        return DeonticClass.PROHIBITION
    if mask & Modality.OBLIGATION:
        return DeonticClass.OBLIGATION
    if mask & Modality.PERMISSION:
        return DeonticClass.PERMISSION
    return DeonticClass.NONE


# ------------------------------------------------------------------------------ lexicon


_TOKEN_RE = re.compile(r"[^\W_]+(?:['\-][^\W_]+)*|->|[,;:!?.]")
_COMMENT_RE = re.compile(r"^\s*(?://+|#+(?=\s|$)|/\*+|--+(?=\s))\s*")
_COMMENT_END_RE = re.compile(r"\s*\*+/\s*$")
_BULLET_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_EMPHASIS_RE = re.compile(r"\*\*|__|`")
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[^a-z\s])|\n+")


def _expand(word: str) -> list[str]:
    if word in CONTRACTIONS:
        return list(CONTRACTIONS[word])
    if word.endswith("n't"):
        return [word[:-3], "not"]
    for suffix, full in (
        ("'re", "are"),
        ("'ll", "will"),
        ("'ve", "have"),
        ("'d", "would"),
        ("'m", "am"),
    ):
        if word.endswith(suffix):
            return [word[: -len(suffix)], full]
    if word.endswith("'s"):
        return [word[:-2]]
    return [word]


def tokenize(text: str) -> list[str]:
    """Lowercased words and clause punctuation, contractions expanded."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").lower()
    out: list[str] = []
    for m in _TOKEN_RE.finditer(text):
        out.extend(_expand(m.group(0)))
    return out


def _is_participle(word: str) -> bool:
    return word in IRREGULAR_PARTICIPLES or (len(word) > 3 and word.endswith(("ed", "en")))


def _is_word(tok: str) -> bool:
    return tok not in {",", ";", ":", ".", "!", "?", "->"}


def _split_clauses(tokens: Sequence[str]) -> list[list[str]]:
    clauses: list[list[str]] = [[]]
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in {";", ":", ".", "!"}:
            clauses.append([])
        elif tok == "," and i + 1 < len(tokens) and tokens[i + 1] in {"then", "but"}:
            clauses.append([])
            i += 1
        elif tok == "but" and clauses[-1]:
            clauses.append([])
        else:
            clauses[-1].append(tok)
        i += 1
    return [c for c in clauses if c]


def _is_metatextual(clause: Sequence[str]) -> bool:
    words = [t for t in clause if _is_word(t)]
    if not words or words[-1] not in {"is", "are", "was", "were"}:
        return False
    return any(w in METATEXT_NOUNS for w in words[:-1])


def _strip_leading(clause: list[str]) -> list[str]:
    """Drop leading discourse adverbs and one leading subordinate clause ending in a comma."""
    changed = True
    while changed and clause:
        changed = False
        while clause and (clause[0] in DISCOURSE_ADVERBS or clause[0] == ","):
            clause = clause[1:]
            changed = True
        if clause and clause[0] in SUBORDINATORS and "," in clause:
            clause = clause[clause.index(",") + 1 :]
            changed = True
    return clause


# When a plan is for: "We should grab coffee sometime", "... go camping this summer".
def _is_plan(rest: Sequence[str]) -> bool:
    """A suggestion about a future occasion rather than a standing rule."""
    if rest[:1] in (["always"], ["never"], ["not"]):
        return False
    for i, w in enumerate(rest):
        if w in PLAN_TIMES:
            return True
        if w in {"this", "next", "one"} and i + 1 < len(rest) and rest[i + 1] in PLAN_PERIODS:
            return True
    return False


def _drop_protasis(words: list[str]) -> list[str]:
    """Cut a trailing conditional ("... if you can't make it"): modals there state no rule."""
    for i, w in enumerate(words):
        if i > 0 and w in {"if", "unless"}:
            return words[:i]
    return words


def _noun_use(words: Sequence[str], start: int) -> bool:
    """True when ``words[start]`` looks like a noun rather than an imperative verb."""
    nxt = words[start + 1 : start + 3]
    if not nxt:
        return False
    if nxt[0] in {"of", "for", "is", "are", "was", "were"}:
        return True
    # "Order 4411 shipped ...", "Invoice 223 was paid": a numbered item, then its verb.
    if (
        len(nxt) == 2
        and any(ch.isdigit() for ch in nxt[0])
        and (nxt[1] in {"is", "was", "has", "had"} or (len(nxt[1]) > 4 and nxt[1].endswith("ed")))
    ):
        return True
    if any(w in FINITE_AFTER_NOUN for w in nxt):
        return True
    # "Store owners complained ...": noun, plural noun, past-tense verb.
    return (
        len(nxt) == 2
        and nxt[0] not in DETERMINERS
        and nxt[0].endswith("s")
        and not nxt[0].endswith("ss")
        and len(nxt[1]) > 4
        and nxt[1].endswith("ed")
    )


class _Scan:
    def __init__(self, comment: bool) -> None:
        self.mask = Modality.NONE
        self.cues: list[str] = []
        self.comment = comment

    def add(self, bit: Modality, cue: str) -> None:
        self.mask |= bit
        self.cues.append(cue)


def _start_rules(words: list[str], scan: _Scan) -> None:
    """Rules that apply at the start of a (main) clause."""
    intensified = False
    while words and words[0] in INTENSIFIERS:
        words = words[1:]
        intensified = True
    if not words:
        return
    w0 = words[0]
    w1 = words[1] if len(words) > 1 else ""
    if w0 == "do" and w1 == "not":
        _dont_rule(words, scan)
    elif w0 == "never":
        if w1 == "ever" or (w1 and w1 not in NEVER_STATEMENT):
            scan.add(Modality.PROHIBITION, "never")
    elif w0 == "no":
        _no_rule(words, scan)
    elif (cue := _fixed_start(w0, w1)) is not None:
        scan.add(*cue)
    elif not scan.comment and w0 in IMPERATIVE_VERBS and (intensified or not _noun_use(words, 0)):
        scan.add(Modality.OBLIGATION, f"imperative:{w0}")


def _dont_rule(words: list[str], scan: _Scan) -> None:
    """A clause starting "do not": a prohibition, unless an idiom or a softener follows."""
    w2 = words[2] if len(words) > 2 else ""
    if w2 == "forget":
        scan.add(Modality.OBLIGATION, "don't forget")
    elif w2 == "hesitate":
        scan.add(Modality.PERMISSION, "don't hesitate")
    elif w2 in {"have", "need"} and (len(words) > 3 and words[3] == "to"):
        scan.add(Modality.PERMISSION, "do not have to")
    elif w2 and w2 not in DONT_IDIOMS:
        scan.add(Modality.PROHIBITION, "do not")


def _fixed_start(w0: str, w1: str) -> tuple[Modality, str] | None:
    """Fixed clause openings: "avoid", "feel free", "make sure", "let us", "be <adj>"..."""
    if w0 == "avoid" or (w0 == "refrain" and w1 == "from"):
        return Modality.PROHIBITION, w0
    if w0 == "stop" and w1.endswith("ing"):
        return Modality.PROHIBITION, "stop -ing"
    if w0 == "feel" and w1 == "free":
        return Modality.PERMISSION, "feel free"
    if (w0 in {"make", "be"} and w1 == "sure") or w0 == "ensure":
        return Modality.OBLIGATION, "make sure"
    if w0 == "remember" and w1 == "to":
        return Modality.OBLIGATION, "remember to"
    if w0 == "let" and w1 == "us":
        return Modality.OBLIGATION, "let's"
    if w0 == "be" and w1 and w1 not in {"it", "that", "this"}:
        return Modality.OBLIGATION, "be <adj>"
    return None


def _no_rule(words: list[str], scan: _Scan) -> None:
    rest = words[1:]
    if not rest or rest[0] in NO_INTERJECTIONS:
        return
    if rest[0] == "need" and len(rest) > 1 and rest[1] == "to":
        scan.add(Modality.PERMISSION, "no need to")
        return
    if rest[0].endswith("ing") and rest[0] not in {"thing", "nothing", "something", "king"}:
        scan.add(Modality.PROHIBITION, "no <gerund>")
        return
    window = rest[:6]
    if any(w in {"allowed", "permitted", "tolerated", "accepted"} for w in window):
        scan.add(Modality.PROHIBITION, "no ... allowed")
        return
    if any(w in FINITE_AFTER_NOUN for w in rest):
        return
    if any(w in NO_PREPOSITIONS for w in rest[:5]):
        scan.add(Modality.PROHIBITION, "no <noun> <prep>")


def _subject(words: Sequence[str], i: int) -> str:
    j = i - 1
    while j >= 0 and words[j] in SUBJECT_SKIP_ADVERBS:
        j -= 1
    return words[j] if j >= 0 else ""


@dataclass(frozen=True, slots=True)
class _At:
    """A word of a clause with its neighbours ("" past either end)."""

    words: list[str]
    i: int

    def word(self, offset: int) -> str:
        j = self.i + offset
        return self.words[j] if 0 <= j < len(self.words) else ""

    @property
    def w(self) -> str:
        return self.words[self.i]


_BE = {"is", "are", "be"}


def _impersonal_rule(at: _At, scan: _Scan) -> bool:
    """Impersonal and passive forms, independent of the subject. True when the word was
    read as one (the caller moves on to the next word)."""
    w, prev, prev2, nxt = at.w, at.word(-1), at.word(-2), at.word(1)
    if w in {"prohibited", "forbidden", "banned", "disallowed"} and prev in {*_BE, "strictly"}:
        scan.add(Modality.PROHIBITION, f"is {w}")
    elif w in {"allowed", "permitted", "tolerated"} and prev == "not" and prev2 in _BE:
        scan.add(Modality.PROHIBITION, f"not {w}")
    elif w in {"allowed", "permitted", "optional", "acceptable"} and prev in _BE:
        scan.add(Modality.PERMISSION, f"is {w}")
    elif w in {"free", "welcome"} and prev in _BE and nxt == "to":
        scan.add(Modality.PERMISSION, f"{w} to")
    elif w in {"fine", "ok", "okay"} and prev == "is" and nxt == "to" and prev2 == "it":
        scan.add(Modality.PERMISSION, f"it is {w} to")
    elif (
        w in {"required", "mandatory", "compulsory", "obligatory", "necessary"}
        and prev == "not"
        and prev2 in _BE
    ):
        scan.add(Modality.PERMISSION, f"not {w}")
    elif (
        w in {"required", "mandatory", "compulsory", "obligatory", "expected", "obliged"}
        and prev in _BE
    ):
        if w != "expected" or nxt == "to":
            scan.add(Modality.OBLIGATION, f"is {w}")
    elif w == "are" and prev in {"you", "we"} and nxt == "to" and at.word(2) not in {"", "be"}:
        scan.add(Modality.OBLIGATION, "you are to")
    else:
        return False
    return True


def _strong_modal_rule(at: _At, subj: str, scan: _Scan) -> bool:
    """must / shall / should / ought (to)."""
    w = at.w
    if w not in {"must", "shall", "should", "ought"}:
        return False
    rest = at.words[at.i + 1 :]
    if w == "ought" and rest[:1] == ["to"]:
        rest = rest[1:]
    if rest[:1] == ["have"] and len(rest) > 1 and _is_participle(rest[1]):
        return True  # counterfactual / epistemic past: "should have known"
    negated = rest[:1] in (["not"], ["never"])
    if subj in EPISTEMIC_PRONOUNS:
        core = rest[1:] if negated else rest
        if not (core[:1] == ["be"] and len(core) > 1 and _is_participle(core[1])):
            return True
    if rest[:1] == ["be"] and len(rest) > 1 and rest[1] in EPISTEMIC_STATES:
        return True
    if subj in {"we", "us"} and w == "should" and _is_plan(rest):
        return True  # "We should grab coffee sometime": a plan, not a rule
    if negated:
        scan.add(Modality.PROHIBITION, f"{w} not")
    else:
        scan.add(Modality.OBLIGATION, w)
    return True


def _need_have_rule(at: _At, subj: str, scan: _Scan) -> bool:
    """need to / needs to / need not / have to / has to, and their negations."""
    w, prev, nxt = at.w, at.word(-1), at.word(1)
    real_subject = subj not in EPISTEMIC_PRONOUNS
    if w == "need" and nxt == "to" and prev == "no":
        if at.i > 1:  # "there is no need to ..."; a leading "No need to" is a start rule
            scan.add(Modality.PERMISSION, "no need to")
    elif w in {"need", "needs"} and nxt == "to" and real_subject:
        if prev == "not":
            scan.add(Modality.PERMISSION, "not need to")
        else:
            scan.add(Modality.OBLIGATION, "need to")
    elif w == "need" and nxt == "not" and real_subject and subj:
        scan.add(Modality.PERMISSION, "need not")
    elif w in {"have", "has"} and nxt == "to" and subj and real_subject:
        if prev == "not":
            scan.add(Modality.PERMISSION, "not have to")
        else:
            scan.add(Modality.OBLIGATION, "have to")
    else:
        return False
    return True


def _weak_modal_rule(at: _At, subj: str, scan: _Scan) -> bool:
    """may / can: a permission (or, negated, a prohibition) addressed to someone."""
    w, nxt, nxt2 = at.w, at.word(1), at.word(2)
    if w not in {"may", "can"}:
        return False
    negated = nxt in {"not", "never"}
    verb = nxt2 if negated else nxt
    if verb == "have":
        return True
    if subj in ROLE_NOUNS or subj in {"we", "us", "your"}:
        if verb in INFORMATIONAL_AFTER_CAN:
            return True  # "you can see ...", "users can't see ...": information
        if negated:
            scan.add(Modality.PROHIBITION, f"{w} not")
        elif subj not in {"we", "us"}:
            scan.add(Modality.PERMISSION, w)
    elif (
        subj
        and subj not in EPISTEMIC_PRONOUNS
        and not negated
        and nxt == "be"
        and _is_participle(nxt2)
        and at.word(3) != "by"
    ):
        scan.add(Modality.PERMISSION, f"{w} be <participle>")
    return True


def _addressed_rule(at: _At, subj: str, scan: _Scan) -> bool:
    """never / do not / always said to "you" or "we" inside a clause."""
    w, nxt, nxt2 = at.w, at.word(1), at.word(2)
    if subj not in {"you", "we"}:
        return False
    if w == "never" and nxt and nxt not in {"know", "mind"}:
        scan.add(Modality.PROHIBITION, "never")
        return True
    if w == "do" and nxt == "not" and at.i > 0:
        # "have"/"need" are read by the have-to / need-to rule
        if nxt2 and nxt2 not in {"have", "need"} | KNOWLEDGE_VERBS | DONT_IDIOMS:
            scan.add(Modality.PROHIBITION, "do not")
        return True
    if w == "always" and nxt in IMPERATIVE_VERBS:
        scan.add(Modality.OBLIGATION, "always")
    return False


_SUBJECT_RULES = (_strong_modal_rule, _need_have_rule, _weak_modal_rule, _addressed_rule)


def _modal_rules(words: list[str], scan: _Scan) -> None:
    for i in range(len(words)):
        at = _At(words, i)
        if _impersonal_rule(at, scan):
            continue
        subj = _subject(words, i)
        if subj == "i":
            continue
        for rule in _SUBJECT_RULES:
            if rule(at, subj, scan):
                break


def _clean(sentence: str) -> tuple[str, bool]:
    """Strip bullets, emphasis and a code-comment marker; report whether it was a comment."""
    s = _BULLET_RE.sub("", sentence.strip())
    comment = False
    m = _COMMENT_RE.match(s)
    if m is not None and m.group(0).strip():
        comment = True
        s = _COMMENT_END_RE.sub("", s[m.end() :])
    s = _EMPHASIS_RE.sub("", s)
    return s.strip(), comment


def classify_sentence(sentence: str) -> DeonticResult:
    """Classify one sentence (see the module doc)."""
    text, comment = _clean(sentence)
    if not text:
        return DeonticResult(Modality.NONE)
    if text.rstrip("\"')]} ").endswith("?"):
        return DeonticResult(Modality.NONE, ("question",))
    tokens = tokenize(text)
    words0 = [t for t in tokens if _is_word(t)]
    if words0 and words0[0] in TASK_MARKERS:
        return DeonticResult(Modality.NONE, ("task marker",))
    mask = Modality.NONE
    cues: list[str] = []
    previous: list[str] = []
    tokens = _without_label(tokens)
    for clause in _split_clauses(tokens):
        after = previous
        previous = clause
        if after and (_is_metatextual(after) or after[-1] in REPORTING_VERBS):
            continue  # "The design goal is: ...", "The fox said: ..."
        words_all = [t for t in clause if _is_word(t) or t == ","]
        if _narrative_frame(words_all):
            continue  # "In the story, the children must ..."
        main = _strip_leading(words_all)
        if any(w in REPORTING_VERBS for w in main[1:]):
            continue  # reported speech: "she said we must ...", "legends say ..."
        main_words = [t for t in main if t != ","]
        scan = _Scan(comment)
        _start_rules(main_words, scan)
        _modal_rules(_drop_protasis(main_words), scan)
        clause_mask = scan.mask
        if clause_mask and _negative_lead(main_words):
            # "Under no circumstances should you ...", "Nobody is allowed to ...".
            clause_mask = Modality.PROHIBITION
            scan.cues.append("negative lead")
        mask |= clause_mask
        cues.extend(scan.cues)
    return DeonticResult(mask, tuple(cues))


def _without_label(tokens: list[str]) -> list[str]:
    """Drop a short label before a colon ("Update:", "Call log:", "Note:"): a heading
    for what follows, not an imperative ("Update: the deploy finished at 5pm." reports a
    status). What follows the colon is read as a sentence of its own."""
    if ":" not in tokens:
        return tokens
    cut = tokens.index(":")
    label = [t for t in tokens[:cut] if _is_word(t)]
    rest = [t for t in tokens[cut + 1 :] if _is_word(t)]
    if (
        1 <= len(label) <= 3
        and rest
        and label[0] not in DETERMINERS  # "The fox said: ..." is a sentence, not a label
        and not any(w in FINITE_AFTER_NOUN or w in REPORTING_VERBS for w in label)
    ):
        return tokens[cut + 1 :]
    return tokens


def _narrative_frame(words: Sequence[str]) -> bool:
    return (
        len(words) >= 3
        and words[0] == "in"
        and words[1] in DETERMINERS
        and words[2] in NARRATIVE_FRAMES
    )


def _negative_lead(words: Sequence[str]) -> bool:
    if not words:
        return False
    if words[0] in NEGATIVE_SUBJECTS or words[:2] == ["no", "one"]:
        return True
    head = " ".join(words[:3])
    return head.startswith(
        ("under no circumstance", "at no time", "in no case", "in no event", "on no account")
    )


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences (line breaks, and ``.!?`` followed by a non-lowercase)."""
    return [s.strip() for s in _SENTENCE_SPLIT_RE.split(text) if s and s.strip()]


def evaluate_text(text: str) -> DeonticResult:
    """OR of :func:`classify_sentence` over the sentences of ``text``."""
    mask = Modality.NONE
    cues: list[str] = []
    for sentence in split_sentences(text):
        r = classify_sentence(sentence)
        mask |= r.mask
        cues.extend(r.cues)
    return DeonticResult(mask, tuple(cues))
