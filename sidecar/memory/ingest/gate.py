"""Durable-admission gating scalar, with its flaws fixed.

``G = (1 - T) * Gconv + T * Gtech`` where ``Gconv = w1c*H + w2c*R + w3c*D`` and
``Gtech = w1t*P + w2t*A + w3t*Dtech``. A turn is admitted to durable memory when
``G >= threshold`` (0.35 in the reference). The default model ("conversation") scores
``D`` by what the turn states about someone, the user in the first person or anyone in
the third (:func:`content`), and counts ``H`` and ``R`` in proportion to it, so neither a
first "Hi!" nor a fourth "Thanks!" is kept; its threshold (0.21) was chosen on labelled
turns (docs/memory.md, "The admission gate").

Inputs are *scores*, not a store: ``turn_scores`` are the cosine similarities of the
new turn to its nearest raw turns of the namespace, ``memory_scores`` to its nearest
durable memories. **Both must be computed before the new turn is inserted anywhere**
(the reference host inserted into ``turns:`` first, so every turn was its own nearest
neighbour with score 1 and ``inputFreq`` was never below 0.2). :func:`neighbour_scores`
also drops hits whose id is the turn's own id, as a second guard.

Deliberate differences from the reference patterns (all regexes are ASCII, like RE2):

* error codes are case-sensitive (``ERR_*``, a list of errno names such as ``ENOENT``,
  rustc ``E0425``, TypeScript ``TS2345``); the reference's ``(?i)E[A-Z0-9_]{2,}`` matched
  every English word starting with "e". A 400-599 number counts only in an HTTP/status
  context (``HTTP 404``, ``status 503``, ``returned 500``, ``502 Bad Gateway``,
  ``500 error``);
* a path needs an anchor (``/``, ``./``, ``../``, ``~/``), two slashes, or a file
  extension, and starts at a token boundary, so ``and/or``, ``client/server`` and dates
  are not paths; the endpoint pattern likewise needs a leading ``/`` at a token boundary;
* the human-name pattern is case-sensitive (``Dr Smith``, ``my manager Alice``);
* a call needs the parenthesis right after the identifier (``foo(`` not ``word (``) and
  ``file(s)`` is not a call; ``def``/``func``/``fn``/``function``/``class`` count only
  when followed by a name;
* shell needs a prompt (``$ cmd``) or a tool with a sub-command (``git rebase``,
  ``npm install``, ``go test``, ``make build``), not the English words "go" or "make";
* a hash needs both a digit and a letter ``a-f``; a git ref is a hash, ``HEAD``,
  ``origin/...`` or ``main``/``master`` in a git context (``merged into main``), not
  the English word "main";
* ``at <location>:<line>`` needs a non-numeric location (``at 10:30`` is a time).

``GatingCentroidK`` (``gating.centroid_k``, default 10), unused in the reference, is the
size of the raw-turn neighbourhood: only the ``centroid_k`` highest ``turn_scores``
count (the integration should search ``turns:`` with ``k = centroid_k``). ``memory_k``
(default 5) does the same for ``memory_scores``.

With these fixes the two worked examples of the reference daemon keep their values
(the error-code and path changes do not change their clamped ``P``); see the tests.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from sidecar.config import GatingSettings
from sidecar.memory.core.tokens import estimate_tokens

_A = re.ASCII

# --- technical share T ---------------------------------------------------------------
CODE_FENCE = re.compile(r"```.+?```", re.S | _A)
FILE_PATH = re.compile(
    r"(?<![\w/.~-])(?:"
    r"(?:~|\.{1,2})?/[\w.-]*[A-Za-z_][\w.-]*(?:/[\w.-]+)*"  # anchored: /a, ./a, ../a, ~/a
    r"|[A-Za-z_.][\w.-]*(?:/[\w.-]+){2,}"  # relative, two or more slashes
    r"|[A-Za-z_.][\w.-]*(?:/[\w.-]+)*/[\w-][\w.-]*\.[A-Za-z0-9]{1,8}\b"  # relative, extension
    r")",
    _A,
)
FUNC_DEF = re.compile(
    r"\b(?:func|def|fn|function)\s+[A-Za-z_$][\w$]*|\bclass\s+[A-Z]\w*|\bfunc\s*\("
    r"|\b[A-Za-z_]\w*\((?!s\))",
    _A,
)
SHELL = re.compile(
    r"(?m)^\s*\$\s+\S"
    r"|\b(?:git|npm|npx|pnpm|yarn|docker|kubectl|pip|pip3|cargo|brew|apt|apt-get|uv)"
    r"\s+-{0,2}[a-z][\w-]*"
    r"|\b(?:go|make)\s+(?:build|test|run|install|get|mod|vet|fmt|generate|lint|bench|clean"
    r"|setup|all|check|tidy)\b",
    _A,
)
URL_OR_ENDPOINT = re.compile(
    r"https?://\S+|(?<![\w/.~:-])/[A-Za-z0-9._~-]*[A-Za-z][A-Za-z0-9._~/-]*", _A
)
STACK_TRACE = re.compile(
    r"(?i)\bpanic:|\bgoroutine \d+\b|\bstack ?trace\b|\btraceback\b|\b\w*exception:"
    r"|\bat [^:\s]*[A-Za-z_][^:\s]*:\d+\b",
    _A,
)
HEX_OR_HASH = re.compile(
    r"\b(?=[a-f0-9]*\d)(?=[a-f0-9]*[a-f])[a-f0-9]{7,40}\b|\b0x[0-9a-fA-F]+\b", _A
)

# --- natural-language structure D --------------------------------------------------------
DATE = re.compile(r"\b(?:\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4})\b", _A)
QUANTITY = re.compile(r"\b\d+(?:\.\d+)?\b", _A)
HUMAN_NAME = re.compile(
    r"\b(?:Mr|Mrs|Ms|Dr|Prof)\.?\s+[A-Z][a-z]+\b"
    r"|\b[Mm]y (?:manager|teammate|friend|colleague|boss|wife|husband|partner|sister|brother)"
    r"\s+[A-Z][a-z]+\b",
    _A,
)
PREFERENCE = re.compile(r"(?i)\b(?:i prefer|i like|i love|my favou?rite|i enjoy)\b", _A)
FACT_ASSERTION = re.compile(r"(?i)\b(?:i work at|my [a-z]+ is|i live in|i am|i have)\b", _A)

# --- conversational content (model "conversation", module doc) ---------------------------
# A standing instruction or a constraint: what the user wants always or never.
CONSTRAINT = re.compile(
    r"(?i)\b(?:never|always|don'?t|do not|doesn'?t|does not|avoid|no more|must not|mustn'?t"
    r"|can'?t (?:eat|take|have|drink|stand|do)|cannot (?:eat|take|have|drink)|allergic"
    r"|intoleran[ct]\w*|vegetarian|vegan|gluten|halal|kosher|from now on|not comfortable"
    r"|(?:please|only) (?:keep|use|write|answer|reply|show|give|speak)|i only|remind me)\b",
    _A,
)
LIKES = re.compile(
    r"(?i)\b(?:i|we) (?:(?:prefer|like|love|enjoy|hate|dislike|adore)(?! (?:that|this|it)\b)"
    r"|learn best|can'?t stand"
    r"|(?:don'?t|do not) (?:like|want|eat|drink|enjoy))\b|\bmy favou?rites?\b"
    r"|\bi'?d rather\b|\b(?:i'?m|i am) (?:not )?(?:a )?(?:big )?fan of\b",
    _A,
)
# The user stating something about themselves, their people, places or things.
SELF_STATEMENT = re.compile(
    r"(?i)(?:^|[.!;,]\s*|\b(?:and|but|so)\s+)(?:i|we)(?:'m|'re|'ve|'ll| am| are| have| has| had"
    r"| was| were| will| just| usually| always| often| still| also| only| [a-z]+(?:ed|s)?\b)"
    r"|\b(?:my|our) (?:[a-z]+ )?[a-z]+(?:'s)? (?:is|are|was|were|has|have|meets|works|lives"
    r"|expires|starts|ends|owns|prefers|needs|wants|shares|gets|costs|comes|goes)\b"
    r"|(?:^|[.!]\s*)(?:she|he|they|it)(?:'s| is| are| has| was)\b",
    _A,
)
# Someone else, or the user as a model writes about them: a pronoun, "the user", a
# capitalised name (one or two words, "Bob", "Grandma Jean", "Anna and Bob") that is not a
# function word. Only at the start of a sentence or clause, where a subject stands (the
# first-person patterns above are anchored alike); names are matched with the times taken
# out ("Monday works for me" names no one).
_NOT_NAMES = (
    "It|This|That|These|Those|There|Here|What|Which|Who|Whom|Whose|Where|When|Why|How"
    "|Everything|Everyone|Everybody|Nothing|Nobody|Something|Someone|Somebody|Anything"
    "|Anyone|Anybody|All|Both|Each|Either|Neither|None|One|Some|Any|Another|Such|If|And"
    "|But|So|Or|Yes|No|Not|Maybe|Please|Just|Also|Then|Now|Well|Oh|Ah"
)
_NAME = rf"(?!(?:{_NOT_NAMES})\b)[A-Z][a-z]+(?: [A-Z][a-z]+)?"
_PERSON = rf"(?:[Tt]he [Uu]ser|[Uu]ser|[Hh]e|[Ss]he|[Tt]hey|{_NAME}(?: and {_NAME})?)"
_CLAUSE = r"(?:^|[.!;]\s*|,\s*(?:and |but |so )?|\b(?:and|but|so)\s+)"
# A stated fact takes a present, perfect or future verb. Past tense and the verbs of the
# conversation itself ("User asked for a joke.", "The user thanked me", "He says hi")
# are a log of what was said, not a fact to keep.
_SPEECH = "says|asks|thanks|replies|requests|greets|acknowledges|was"
_VERB_S = rf"(?!(?:{_SPEECH})\b)[a-z]{{2,}}s\b"
_FACT_VERB = (
    r"(?:is|are|has|have|'s|'re|'ve|will|'ll|does not|doesn'?t|do not|don'?t|can'?t|cannot"
    rf"|never|always|usually|often|only|also|still|really)\b|{_VERB_S}"
)
OTHER_STATEMENT = re.compile(
    rf"{_CLAUSE}{_PERSON} (?:{_FACT_VERB})"
    # a person's or the user's things: "Bob's birthday is ...", "the user's partner, Alex,"
    rf"|\b(?:[Hh]is|[Hh]er|[Tt]heir|(?:[Tt]he )?[Uu]ser's|{_NAME}'s) (?:[a-z]+ ){{0,2}}"
    rf"[a-z]+,? (?:is|are|has|have|{_VERB_S})",
    _A,
)
# A model's note leaves the subject out: "Prefers low-carb breakfasts.", "Lives alone
# with two cats." Not the verbs of a reaction, whose subject is an implied "it" ("Looks
# good.", "Makes sense.", "Sounds lovely.", "Works for me.").
NOTE_STATEMENT = re.compile(
    r"^\W*(?!(?:Looks|Sounds|Seems|Feels|Makes|Thanks|Cheers|Works (?:for|now|fine|well"
    rf"|great|perfectly)|{_NOT_NAMES}|{_SPEECH.title()})\b)[A-Z][a-z]*[a-rt-z]s\b",
    _A,
)
OTHER_LIKES = re.compile(
    rf"{_CLAUSE}{_PERSON} (?:also |really |still |much )?"
    r"(?:prefers|likes|loves|enjoys|hates|dislikes|adores|(?:doesn'?t|does not) (?:like|want"
    r"|eat|drink|enjoy))\b|^\W*(?:Prefers|Likes|Loves|Enjoys|Hates|Dislikes)\b",
    _A,
)
WHEN = re.compile(
    r"(?i)\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|monday|tuesday|wednesday"
    r"|thursday|friday|saturday|sunday|weekends?|mornings?|evenings?|tonight|tomorrow"
    r"|next (?:week|month|year|spring|summer|autumn|winter)|every (?:day|week|month|year)"
    r"|\d{1,2}(?::\d{2})?\s?(?:am|pm))\b",
    _A,
)
PROPER_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}\b|\bcalled [A-Z][a-z]+\b", _A)
# A request for something now (not a standing instruction, which CONSTRAINT finds).
REQUEST = re.compile(
    r"(?i)^\W*(?:please )?(?:(?:can|could|would|will) you|write|show|make|give|tell|explain"
    r"|summari[sz]e|check|try|list|draft|translate|compare|help|find|suggest|recommend)\b",
    _A,
)
GREETING = re.compile(
    r"(?i)^\W*(?:hi|hello|hey|hiya|morning|good (?:morning|evening|night|afternoon)|thanks?"
    r"|thank you|cheers|ok(?:ay)?|cool|great|nice|sure|yes|no|yep|nope|lol|haha|ha|hmm|aww"
    r"|wow|oh|ah|bye|see you|later|talk soon|got it|perfect|awesome|alright|right|fine"
    r"|interesting|makes sense|sounds (?:good|lovely|great))\b",
    _A,
)

# --- specificity P -------------------------------------------------------------------
FUNC_REF = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?\((?!s\))", _A)
_ERRNO = (
    "ACCES|ADDRINUSE|ADDRNOTAVAIL|AGAIN|AI_AGAIN|ALREADY|BADF|BUSY|CANCELED|CHILD|CONNABORTED"
    "|CONNREFUSED|CONNRESET|DEADLK|DESTADDRREQ|DOM|DQUOT|EXIST|FAULT|FBIG|HOSTDOWN|HOSTUNREACH"
    "|INPROGRESS|INTR|INVAL|IO|ISCONN|ISDIR|LOOP|MFILE|MLINK|MSGSIZE|NAMETOOLONG|NETDOWN"
    "|NETRESET|NETUNREACH|NFILE|NOBUFS|NODEV|NOENT|NOEXEC|NOLCK|NOMEM|NOSPC|NOSYS|NOTCONN"
    "|NOTDIR|NOTEMPTY|NOTFOUND|NOTSOCK|NOTSUP|NOTTY|NXIO|OPNOTSUPP|OVERFLOW|PERM|PIPE|PROTO"
    "|RANGE|ROFS|SPIPE|SRCH|TIMEDOUT|TXTBSY|WOULDBLOCK|XDEV"
)
ERROR_CODE = re.compile(
    r"\bERR_[A-Z0-9_]+\b"
    rf"|\bE(?:{_ERRNO})\b"
    r"|\bE\d{4}\b|\bTS\d{4,5}\b"
    r"|(?i:\b(?:https?(?:/\d(?:\.\d)?)?|status(?:\s+code)?|code|error|returned|returns"
    r"|returning|response|responded(?:\s+with)?|got(?:\s+an?)?)\s*[:=]?\s*)[45]\d{2}\b"
    r"|\b[45]\d{2}\s+(?i:errors?|response|status)\b"
    r"|\b[45]\d{2}\s+(?:Bad|Not|Internal|Service|Too|Unauthorized|Forbidden|Gateway|Conflict"
    r"|Payment|Method|Request|Precondition|Unprocessable|Unavailable)\b",
    _A,
)
GIT_REF = re.compile(
    r"\b(?=[a-f0-9]*\d)(?=[a-f0-9]*[a-f])[a-f0-9]{7,40}\b"
    r"|\bHEAD\b(?:[~^]\d*)*"
    r"|\borigin/[A-Za-z0-9._/-]+"
    r"|(?i:\b(?:branch|checkout|merge[ds]?|rebase[ds]?|into|onto|push(?:ed)?|pull(?:ed)?"
    r"|switch(?:ed)?)\s+(?:to\s+)?)(?:main|master)\b"
    r"|\b(?:main|master)\s+branch\b",
    _A,
)

# --- actionability A -------------------------------------------------------------------
ARCH_DECISION = re.compile(
    r"(?i)\b(?:switched to|use .+ instead|migrated to|replaced with|decided to"
    r"|standardi[sz]e on)\b",
    _A,
)
RESOLUTION = re.compile(r"(?i)\b(?:fixed|resolved|patched|corrected|unblocked)\b", _A)
MILESTONE = re.compile(r"(?i)\b(?:deployed|merged|released|shipped|rolled out)\b", _A)
CONFIG_CHANGE = re.compile(
    r"(?i)\b(?:set [A-Za-z0-9_]+ to|configured|configuration changed|env(?:ironment)? var)\b", _A
)

# --- technical density Dtech -------------------------------------------------------------
DATA_STRUCTURE = re.compile(r"(?i)\b(?:struct|interface|type|enum)\b|\bmap\[", _A)
DEPENDENCY = re.compile(
    r"(?i)\b(?:import|require|go\.mod|package\.json|dependency|depends on)\b", _A
)
TEST_CASE = re.compile(r"(?i)\bfunc Test\w+|\b(?:it|describe|test)\(", _A)
DOC_COMMENT = re.compile(r"(?m)^\s*//|/\*\*|///", _A)

QUESTION_FACTOR = 0.25  # a question or request asks; it rarely states something to keep
CONTENT_REF = 0.3  # novelty counts in full from this much content on

DEFAULT_TECH_NORM = GatingSettings().tech_norm


# Weights and thresholds: the ``[gating]`` settings, one declaration. The threshold was
# chosen on the dev conversations of tests/memory/data/gate_turns.json (best F1;
# scripts/eval_gate.py); the reference's 0.35 kept half the durable turns out. ``model``
# "conversation" (default): content-aware structure, novelty counted only for turns with
# content; "reference": the reference daemon's formula, as v1 gating_scalar.
GatingConfig = GatingSettings


DEFAULT_CONFIG = GatingConfig()
# The reference daemon's gate, as v1 ``gating_scalar`` computes it and for comparisons.
REFERENCE_CONFIG = GatingConfig(model="reference", threshold=0.35)


@dataclass(frozen=True, slots=True)
class GatingSignals:
    """Every signal of the gating scalar, the threshold used and the decision."""

    g: float
    t: float
    h: float
    r: float
    d: float
    input_freq: float
    mem_saturation: float
    p: float
    a: float
    dtech: float
    gconv: float
    gtech: float
    threshold: float
    admitted: bool

    def to_metadata(self) -> dict[str, float | bool]:
        """Record metadata: ``gating_score`` plus ``gating_<signal>`` for every signal."""
        out: dict[str, float | bool] = {"gating_score": self.g}
        for key, value in asdict(self).items():
            if key != "g":
                out[f"gating_{key}"] = value
        return out


def _clamp01(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


def _clean_scores(scores: Iterable[float], k: int) -> list[float]:
    vals = [max(-1.0, min(1.0, float(s))) for s in scores if not math.isnan(float(s))]
    vals.sort(reverse=True)
    return vals[:k] if k > 0 else vals


def neighbour_scores(
    hits: Iterable[tuple[str, float]], *, exclude_ids: Iterable[str] = ()
) -> list[float]:
    """Scores of ``(id, score)`` hits, without hits whose id is in ``exclude_ids``."""
    excluded = set(exclude_ids)
    return [score for hit_id, score in hits if hit_id not in excluded]


def _has(pattern: re.Pattern[str], text: str) -> bool:
    return pattern.search(text) is not None


def _count(pattern: re.Pattern[str], text: str) -> int:
    return sum(1 for _ in pattern.finditer(text))


def _weighted(text: str, weights: Sequence[tuple[re.Pattern[str], float]]) -> float:
    """The weights of the patterns ``text`` matches, summed and capped at 1."""
    text = text.strip()
    if not text:
        return 0.0
    return min(sum(weight for pattern, weight in weights if _has(pattern, text)), 1.0)


def technical_share(text: str, tech_norm: float = DEFAULT_TECH_NORM) -> float:
    """``T``: weights of the technical patterns present, over ``tech_norm``, capped at 1."""
    text = text.strip()
    if not text:
        return 0.0
    norm = tech_norm if tech_norm > 0 else DEFAULT_TECH_NORM
    score = 0.0
    score += 0.5 if _has(CODE_FENCE, text) else 0.0
    score += 0.4 if _has(FILE_PATH, text) else 0.0
    score += 0.4 if _has(FUNC_DEF, text) else 0.0
    score += 0.4 if _has(SHELL, text) else 0.0
    score += 0.3 if _has(URL_OR_ENDPOINT, text) else 0.0
    score += 0.5 if _has(STACK_TRACE, text) else 0.0
    score += 0.3 if _has(HEX_OR_HASH, text) else 0.0
    return min(score / norm, 1.0)


def novelty(memory_scores: Sequence[float]) -> float:
    """``H``: 1 with no memory neighbours, else ``1 - mean(max(score, 0))``."""
    if not memory_scores:
        return 1.0
    return _clamp01(1.0 - sum(max(s, 0.0) for s in memory_scores) / len(memory_scores))


_STRUCTURE_WEIGHTS = (
    (DATE, 0.3),
    (QUANTITY, 0.2),
    (HUMAN_NAME, 0.3),
    (PREFERENCE, 0.4),
    (FACT_ASSERTION, 0.3),
)
_ACTION_WEIGHTS = ((ARCH_DECISION, 0.5), (RESOLUTION, 0.4), (MILESTONE, 0.3), (CONFIG_CHANGE, 0.4))
_TECH_WEIGHTS = (
    (FUNC_DEF, 0.4),
    (DATA_STRUCTURE, 0.3),
    (DEPENDENCY, 0.3),
    (TEST_CASE, 0.2),
    (DOC_COMMENT, 0.2),
)


def structure(text: str) -> float:
    """``D``: natural-language structure (date, quantity, name, preference, fact)."""
    return _weighted(text, _STRUCTURE_WEIGHTS)


def content(text: str) -> float:
    """``D`` of the conversation model: how much a user turn states something durable
    (a constraint or standing instruction, a like or dislike, a statement about the user
    and theirs, when, how much, who). Questions and one-off reactions state little."""
    text = text.strip()
    if not text:
        return 0.0
    score = 0.0
    score += 0.5 if _has(CONSTRAINT, text) else 0.0
    score += 0.4 if _has(LIKES, text) or _has(OTHER_LIKES, text) else 0.0
    score += 0.3 if _has(SELF_STATEMENT, text) or _states_about_others(text) else 0.0
    score += 0.2 if _has(WHEN, text) or _has(DATE, text) else 0.0
    score += 0.2 if _has(QUANTITY, text) else 0.0
    score += 0.2 if _has(PROPER_NAME, WHEN.sub("", text)) or _has(HUMAN_NAME, text) else 0.0
    if len(text.split()) <= 4 and _has(GREETING, text) and score < CONTENT_REF:
        return 0.0  # "Thanks!", "Ok, sounds good.", "Hi there" (but "Hi! I'm Dana.")
    if text.endswith("?") or (_has(REQUEST, text) and not _has(CONSTRAINT, text)):
        score *= QUESTION_FACTOR
    return min(score, 1.0)


def _states_about_others(text: str) -> bool:
    """A statement about someone other than the speaker, or about the user in the third
    person, as a model writes it ("Bob likes jazz.", "The user's daughter is called Mia",
    "Prefers low-carb breakfasts.")."""
    # an opening interjection is no subject: "Ok will do." names no one called Ok
    rest = GREETING.sub("", text, count=1)
    return _has(OTHER_STATEMENT, WHEN.sub("", rest)) or _has(NOTE_STATEMENT, rest)


def specificity(text: str) -> float:
    """``P``: weighted *counts* of specific references per 100 estimated tokens (min 1)."""
    text = text.strip()
    if not text:
        return 0.0
    norm = max(estimate_tokens(text) / 100.0, 1.0)
    score = (
        0.4 * _count(FILE_PATH, text)
        + 0.3 * _count(FUNC_REF, text)
        + 0.5 * _count(ERROR_CODE, text)
        + 0.4 * _count(GIT_REF, text)
        + 0.3 * _count(URL_OR_ENDPOINT, text)
    )
    return min(score / norm, 1.0)


def actionability(text: str) -> float:
    """``A``: architecture decision, resolution, milestone, configuration change."""
    return _weighted(text, _ACTION_WEIGHTS)


def tech_density(text: str) -> float:
    """``Dtech``: definitions, data structures, dependencies, tests, doc comments."""
    return _weighted(text, _TECH_WEIGHTS)


def compute_gating(
    text: str,
    turn_scores: Iterable[float] = (),
    memory_scores: Iterable[float] = (),
    config: GatingConfig = DEFAULT_CONFIG,
) -> GatingSignals:
    """All gating signals for ``text`` and the admission decision.

    ``turn_scores``/``memory_scores``: cosine scores of the nearest raw turns and durable
    memories of the namespace, computed *before* the turn is inserted (module doc).
    """
    turns = _clean_scores(turn_scores, config.centroid_k)
    mems = _clean_scores(memory_scores, config.memory_k)

    t = technical_share(text, config.tech_norm)
    h = novelty(mems)
    freq_cap = max(config.input_freq_cap, 1)
    sat_cap = max(config.mem_saturation_cap, 1)
    input_freq = min(sum(1 for s in turns if s >= config.input_freq_threshold) / freq_cap, 1.0)
    mem_sat = min(sum(1 for s in mems if s >= config.mem_saturation_threshold) / sat_cap, 1.0)
    r = input_freq * (1.0 - mem_sat)
    p = specificity(text)
    a = actionability(text)
    dtech = tech_density(text)
    if config.model == "reference":
        d = structure(text)
        gconv = config.w1c * h + config.w2c * r + config.w3c * d
    else:
        # Novelty alone admitted every first "Hi!" of a namespace, and repetition alone
        # every "Thanks!" said four times: both count in proportion to what the turn states.
        d = content(text)
        share = min(1.0, d / CONTENT_REF)
        gconv = config.w1c * h * share + config.w2c * r * share + config.w3c * d
    gtech = config.w1t * p + config.w2t * a + config.w3t * dtech
    g = (1.0 - t) * gconv + t * gtech
    return GatingSignals(
        g=g,
        t=t,
        h=h,
        r=r,
        d=d,
        input_freq=input_freq,
        mem_saturation=mem_sat,
        p=p,
        a=a,
        dtech=dtech,
        gconv=gconv,
        gtech=gtech,
        threshold=config.threshold,
        admitted=g >= config.threshold,
    )
