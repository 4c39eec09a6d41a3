"""Collection names, record ids and metadata conventions shared by all memory code.

Every module that reads or writes memory records builds names and ids through these
helpers, so the layout lives in one place.

Layout (``<sid>`` = session id, ``<ns>`` = durable namespace):

=============================  ==========================================================
``session:<sid>``              v1 host's active view (``insert_session_turn``); v2 ingest
                               does not write it
``session_raw:<sid>``          immutable raw history of the session, every role
``session_summary:<sid>``      summaries (turn-level and condensed)
``session_edge:<sid>``         coverage edges summary -> child (vectorless)
``session_state:<sid>``        one record ``__session_state__`` (vectorless)
``turns:<ns>``                 the namespace's raw history across sessions, **both roles**
                               (metadata ``role``, ``sessionId``); gating's turn neighbours
                               are its ``role == "user"`` records
``user:<ns>``                  durable memories (gated admission of user turns)
``elevated:user:<ns>``         verbatim guidance shards of user-attributed turns
``elevated:session:<sid>``     guidance shards of turns without a user
``dream:<ns>``                 promoted dream-diary entries
``authored:hard|soft|variant`` authored markdown tiers (global)
``global``                     global memory (host-managed)
``_internal:lifecycle_journal`` lifecycle hints
=============================  ==========================================================

Namespaces are opaque strings. The default namespace of a session without ``userId`` is
``session:<sid>`` (so ``turns:session:<sid>`` etc.).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable

from sidecar.memory.core.errors import MemoryInputError
from sidecar.store.names import MAX_NAME_PART_BYTES, validate_name_part

# ---- fixed names ------------------------------------------------------------------------

AUTHORED_HARD = "authored:hard"
AUTHORED_SOFT = "authored:soft"
AUTHORED_VARIANT = "authored:variant"
AUTHORED_COLLECTIONS = (AUTHORED_HARD, AUTHORED_SOFT, AUTHORED_VARIANT)
AUTHORED_TIERS = {"hard": AUTHORED_HARD, "soft": AUTHORED_SOFT, "variant": AUTHORED_VARIANT}
GLOBAL = "global"
LIFECYCLE_JOURNAL = "_internal:lifecycle_journal"
SESSION_STATE_ID = "__session_state__"
# The v2 ingest state record in session_state:<sid> (position counter, namespace).
INGEST_STATE_ID = "__ingest_state__"
# Commit markers of accepted host turns (ingest with an advancementKey) share the
# session's state collection, so forgetting the session forgets them too.
COMMIT_MARKER_PREFIX = "__commit__:"

# ---- prefixes ---------------------------------------------------------------------------

SESSION_PREFIX = "session:"
SESSION_RAW_PREFIX = "session_raw:"
SESSION_SUMMARY_PREFIX = "session_summary:"
SESSION_EDGE_PREFIX = "session_edge:"
SESSION_STATE_PREFIX = "session_state:"
SESSION_RECALL_PREFIX = "session_recall:"
TURNS_PREFIX = "turns:"
USER_PREFIX = "user:"
ELEVATED_USER_PREFIX = "elevated:user:"
ELEVATED_SESSION_PREFIX = "elevated:session:"
DREAM_PREFIX = "dream:"

# ---- metadata values --------------------------------------------------------------------

TYPE_TURN = "turn"
TYPE_SUMMARY = "summary"
TYPE_EDGE = "coverage_edge"
TYPE_GUIDANCE = "guidance_shard"
TYPE_SESSION_STATE = "session_state"
TYPE_COMMIT_MARKER = "commit_marker"
PROVENANCE_SESSION_TURN = "session_turn"
PROVENANCE_TURN_INDEX = "turn_index"
PROVENANCE_DURABLE = "durable_user_memory"
# A fact replaced by a later one (memory.update, or a turn saying it changed): the id of
# what replaced it, and when. Ranking lowers such records for present-tense questions.
SUPERSEDED_BY = "superseded_by"
SUPERSEDED_AT = "superseded_at"


# A default namespace is ``session:<sid>``: room for that prefix over a session id's limit.
_NAME_PART_LIMIT = MAX_NAME_PART_BYTES + len("session:")


def _req(value: str, what: str) -> str:
    """Every session id and namespace passes here on its way into a collection name."""
    return validate_name_part(value, what, _NAME_PART_LIMIT)


def _per_session(prefix: str) -> Callable[[str], str]:
    """The name of a session's collection: ``prefix`` + the checked session id."""

    def name(sid: str) -> str:
        return prefix + _req(sid, "session ID")

    return name


def _per_namespace(prefix: str) -> Callable[[str], str]:
    """The name of a namespace's collection: ``prefix`` + the checked namespace."""

    def name(ns: str) -> str:
        return prefix + _req(ns, "namespace")

    return name


# ---- per session ------------------------------------------------------------------------

session = _per_session(SESSION_PREFIX)  # the v1 active view
session_raw = _per_session(SESSION_RAW_PREFIX)
session_summary = _per_session(SESSION_SUMMARY_PREFIX)
session_edge = _per_session(SESSION_EDGE_PREFIX)
session_state = _per_session(SESSION_STATE_PREFIX)
session_recall = _per_session(SESSION_RECALL_PREFIX)
elevated_session = _per_session(ELEVATED_SESSION_PREFIX)


def lossless_collections(sid: str) -> list[str]:
    """The lossless set ensured for every session."""
    return [session_raw(sid), session_summary(sid), session_edge(sid), session_state(sid)]


def session_collections(sid: str) -> list[str]:
    """Every collection that belongs to one session (what forgetting a session drops)."""
    return [
        session(sid),
        *lossless_collections(sid),
        session_recall(sid),
        elevated_session(sid),
    ]


# ---- per namespace ----------------------------------------------------------------------


def default_namespace(session_id: str) -> str:
    """``session:<sid>``: the namespace of a session whose requests name none
    (``sidecar.memory.ingest.sessions.namespace_of_session`` decides when it applies)."""
    return "session:" + _req(session_id, "session ID")


turns = _per_namespace(TURNS_PREFIX)  # the namespace's raw history (both roles)
user = _per_namespace(USER_PREFIX)  # durable memories
elevated_user = _per_namespace(ELEVATED_USER_PREFIX)
dream = _per_namespace(DREAM_PREFIX)


def namespace_collections(ns: str) -> list[str]:
    """Every collection that belongs to a namespace as a whole (what ``forget`` drops)."""
    return [turns(ns), user(ns), elevated_user(ns), dream(ns)]


def namespace_of(collection: str) -> str | None:
    """The namespace of one of :func:`namespace_collections`, else None."""
    for prefix in (ELEVATED_USER_PREFIX, TURNS_PREFIX, USER_PREFIX, DREAM_PREFIX):
        if collection.startswith(prefix):
            return collection[len(prefix) :]
    return None


def authored(tier: str) -> str:
    """``authored:<tier>`` for tier hard / soft / variant."""
    try:
        return AUTHORED_TIERS[tier]
    except KeyError:
        raise MemoryInputError(
            f"authored tier must be hard, soft or variant, not {tier!r}"
        ) from None


def session_id_of(collection: str) -> str | None:
    """The session id of a per-session collection name, else None."""
    for prefix in (
        SESSION_RAW_PREFIX,
        SESSION_SUMMARY_PREFIX,
        SESSION_EDGE_PREFIX,
        SESSION_STATE_PREFIX,
        SESSION_RECALL_PREFIX,
        ELEVATED_SESSION_PREFIX,
        SESSION_PREFIX,
    ):
        if collection.startswith(prefix):
            return collection[len(prefix) :]
    return None


# ---- ids --------------------------------------------------------------------------------


def namespace_turn_id(sid: str, turn_id: str) -> str:
    """Id of a turn in ``turns:<ns>`` and ``user:<ns>``: ``<sid>:<turnId>``.

    The session is part of the id so that equal client ids in different sessions of one
    namespace never collide.
    """
    return f"{sid}:{turn_id}"


def turn_id_in(record_id: str, sid: str) -> str | None:
    """The turn id of ``<sid>:<turnId>`` (:func:`namespace_turn_id`), else None."""
    prefix = f"{sid}:"
    return record_id[len(prefix) :] if sid and record_id.startswith(prefix) else None


def edge_id(summary_id: str, child_id: str) -> str:
    return f"edge:{summary_id}:{child_id}"


# ---- tombstones (forget) ----------------------------------------------------------------

#: Tombstones are stored under the memory namespace (store tombstone ``namespace``) with
#: key :func:`tombstone_key`. Session-scoped records use the namespace of the session.
TOMBSTONE_REASON_FORGET = "forget"


def tombstone_key(collection: str, record_id: str) -> str:
    """Unambiguous tombstone key of one record: ``["<collection>","<id>"]`` (JSON)."""
    return json.dumps([collection, record_id], ensure_ascii=False, separators=(",", ":"))


def content_tombstone_id(text: str) -> str:
    """Tombstone id of a record's content (``text:<sha256>``), for records whose ids are
    positional (dream entries are numbered by position in their diary, so an id names a
    different entry once the diary changes)."""
    digest = hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()
    return f"text:{digest}"


def tombstone_keys(collection: str, ids: Iterable[str]) -> list[str]:
    return [tombstone_key(collection, i) for i in ids]


def parse_tombstone_key(key: str) -> tuple[str, str] | None:
    try:
        value = json.loads(key)
    except ValueError:
        return None
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return value[0], value[1]
    return None
