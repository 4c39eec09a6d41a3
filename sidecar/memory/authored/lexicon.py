"""The rule classifier's word lists: imperative verbs, role nouns, modal contexts and the
idioms that look like rules but are not. Kept apart from the rules that read them."""

from __future__ import annotations


def words_of(text: str) -> list[str]:
    return text.split()


IMPERATIVE_VERBS = frozenset(
    words_of(
        """
        act add adhere adopt align annotate answer append apply archive ask assert attach audit
        back benchmark bind block break build bump cache call cap capture catch check cite
        clarify clean clear close collapse collect commit compare compile compress configure
        confirm consider consult contact convert copy correct count create cross-check cut debug
        declare decline default defer define delete deploy deprecate describe design detect
        disable discard document double-check download drain drop dump edit embed emit enable
        greet remind
        encode enforce ensure escalate escape estimate evaluate exclude execute explain export
        expose extract favor favour fetch file fill filter find fix flag flush focus follow
        forget format freeze gate give ground group guard handle hash highlight hold honor
        honour identify ignore implement import include index inform initialize insert inspect
        install invalidate investigate isolate keep label leave limit link lint list load lock
        log look maintain make map mark mask measure mention merge migrate minimize mirror mock
        modify monitor move name normalize notify observe open optimize order pass pause persist
        pick pin place plan poll post prefer prepare prepend preserve print prioritise
        prioritize probe profile prompt protect prove provide prune publish pull push put quote
        raise rank re-run read rebase rebuild recheck record redact reduce refactor refer
        reference refresh register reject release reload remember remove rename render reorder
        repeat replace reply report reproduce request rerun reserve reset resolve respect
        respond restart restore restrict retain retry return reuse review revert rewrite
        rollback rotate route run sanitise sanitize save say scan search select send separate
        serialize serve set share ship show shut sign simplify skip sort specify split squash
        start state stay stick store stream strip structure submit suggest summarise summarize
        supply support switch sync tag take talk tell test throttle time-box track translate
        treat trim trust try turn unify unlock update upgrade upload use validate verify version
        wait warn watch wrap write
        """
    )
)

# Finite verbs that reveal a sentence-initial "verb" to be a noun ("Use cases are ...").
FINITE_AFTER_NOUN = frozenset(
    words_of(
        """
        is are was were has have had will would can could should may might must shall do does
        did seem seems vary varies differ differs depend depends remain remains indicate
        indicates show shows look looks take takes include includes mean means become becomes
        goes reduce reduces increase increases happen happens cause causes matter matters appear
        appears contain contains describe describes live lives lives tend tends went
        """
    )
)

ROLE_NOUNS = frozenset(
    words_of(
        """
        you user users contributor contributors maintainer maintainers agent agents assistant
        assistants developer developers engineer engineers employee employees staff member
        members guest guests visitor visitors reviewer reviewers author authors client clients
        admin admins administrator administrators operator operators player players student
        students team teams everyone anyone people customer customers caller callers plugin
        plugins extension extensions bot bots model models participant participants
        """
    )
)

EPISTEMIC_PRONOUNS = frozenset(
    words_of(
        """
        he she they him her them it this that there which who something someone somebody
        everything nothing
        """
    )
)

EPISTEMIC_STATES = frozenset(
    words_of(
        """
        tired exhausted joking kidding hungry thirsty sleepy new mistaken confused crazy lonely
        proud happy sad busy relieved thrilled frustrated frustrating nice lovely hard difficult
        tough fun exciting excited wonderful great amazing awful terrible painful annoying
        worried upset bored boring glad wrong right cold freezing hot exhausting a an the some
        so really very
        """
    )
)

IRREGULAR_PARTICIPLES = frozenset(
    words_of(
        """
        been done made kept written run built set put sent given taken shown known held left
        read found paid said told thought had got gotten forgotten seen gone begun drawn driven
        eaten fallen felt fed hidden hit hurt laid led lent let lit lost meant met quit rung
        shut sold split spent spread stood struck sworn swept thrown torn understood undone
        woken worn won withdrawn rewritten rebuilt rerun reset upset
        """
    )
)

INFORMATIONAL_AFTER_CAN = frozenset(
    words_of(
        """
        see find tell imagine expect notice hear guess learn spot recognize recognise probably
        also still
        """
    )
)

REPORTING_VERBS = frozenset(
    words_of(
        """
        said says say told decreed declared insisted claimed thought believed knew wrote
        announced swore promised warned ordered argued explained mentioned whispered shouted
        replied admitted agreed felt feared hoped realized realised
        think thinks believe believes reckon reckons suggested suggests
        """
    )
)

SUBORDINATORS = frozenset(
    words_of(
        """
        if when whenever before after unless once while until to in for during as since where
        wherever because although though from starting going
        """
    )
)

DISCOURSE_ADVERBS = frozenset(
    words_of(
        """
        also and so then finally additionally generally ideally instead otherwise however but
        now first second third next lastly again likewise similarly therefore thus hence
        """
    )
)

SUBJECT_SKIP_ADVERBS = frozenset(
    words_of(
        """
        also always never really still then just only absolutely probably definitely certainly
        generally usually ideally all both each
        """
    )
)

NO_INTERJECTIONS = frozenset(
    words_of(
        """
        worries worry problem problems prob thanks thank idea way doubt matter one body longer
        more less kidding wonder offense offence rush sweat clue comment big two three four
        single other such sir joke chance pressure biggie biggy longer dice comment luck
        """
    )
)

NO_PREPOSITIONS = frozenset(
    words_of(
        """
        in on at to for from into inside outside without before after during until unless within
        across near past under over with onto beyond
        """
    )
)

DONT_IDIOMS = frozenset(
    words_of(
        """
        worry mention panic fret
        """
    )
)
NEGATIVE_SUBJECTS = frozenset(
    words_of(
        """
        nobody none noone
        """
    )
)
NARRATIVE_FRAMES = frozenset(
    words_of(
        """
        story tale book legend novel film movie game dream myth poem song play show episode
        chapter fable saga
        """
    )
)
DETERMINERS = frozenset(
    words_of(
        """
        the a an this that these those every each all any some no your my our their his her its
        """
    )
)
KNOWLEDGE_VERBS = frozenset(
    words_of(
        """
        know understand remember mind care get think want like see
        """
    )
)
METATEXT_NOUNS = frozenset(
    words_of(
        """
        goal goals purpose aim aims intent intention idea point objective objectives plan
        motivation rationale premise thesis question problem
        """
    )
)
TASK_MARKERS = frozenset(
    words_of(
        """
        todo fixme xxx hack
        """
    )
)

CONTRACTIONS: dict[str, tuple[str, ...]] = {
    "can't": ("can", "not"),
    "cannot": ("can", "not"),
    "won't": ("will", "not"),
    "shan't": ("shall", "not"),
    "let's": ("let", "us"),
    "it's": ("it", "is"),
    "that's": ("that", "is"),
    "there's": ("there", "is"),
    "what's": ("what", "is"),
    "he's": ("he", "is"),
    "she's": ("she", "is"),
    "here's": ("here", "is"),
    "i'm": ("i", "am"),
    "ain't": ("is", "not"),
}


PLAN_TIMES = frozenset(words_of("sometime someday soon again tonight tomorrow"))
PLAN_PERIODS = frozenset(words_of("summer winter spring autumn weekend week month year time day"))


INTENSIFIERS = frozenset(
    {"please", "kindly", "always", "strictly", "only", "absolutely", "just", "simply", "also"}
)
# After "never": words that make it a statement about the past or a habit, not a rule.
NEVER_STATEMENT = frozenset(
    {
        "mind",
        "before",
        "again",
        "have",
        "has",
        "had",
        "did",
        "was",
        "were",
        "is",
        "are",
        "will",
        "would",
        "could",
        "can",
        "once",
    }
)
