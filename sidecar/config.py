"""Daemon settings.

Precedence, highest first: command-line flags > environment > TOML config file > defaults.
Each setting has one dotted key (``server.endpoint``) used by the TOML file and by flags;
the environment table maps the reference daemon's ``LIBRAVDB_*`` names onto those keys so
existing service files keep working.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec


class ConfigError(Exception):
    """A setting is missing, malformed or contradictory."""


def default_home(env: Mapping[str, str] | None = None) -> Path:
    """``$HOME/.clawdb``, or ``./.clawdb`` when HOME is unknown (as the reference does)."""
    home = (os.environ if env is None else env).get("HOME")
    return Path(home) / ".clawdb" if home else Path(".clawdb").absolute()


class ServerSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    # "" is filled by load_settings: unix:$HOME/.clawdb/run/libravdb.sock
    endpoint: str = ""
    transport: str = "socket"  # "socket" (unix:/tcp: endpoint) or "stdio"
    max_frame_bytes: int = 8 * 1024 * 1024
    shutdown_grace_s: float = 10.0
    debug_methods: bool = False  # serve debug.* (tests, console experiments)
    # A file holding the shared secret clients send in `initialize` (authToken). Needed to
    # listen on a non-loopback address; must be readable by the owner only.
    auth_token_file: str = ""
    max_connections: int = 256  # more are answered "busy" and closed
    max_inflight: int = 64  # requests executing at once, all connections together
    max_batch: int = 1000  # entries in one JSON-RPC batch
    max_parse_errors: int = 3  # consecutive unparsable frames before a socket is closed


class EmbeddingSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    backend: str = "bundled"
    profile: str = "all-minilm-l6-v2"
    # A profile used when the configured one cannot load. Empty (the default): the daemon
    # refuses to start and says why, rather than run another model without telling.
    fallback_profile: str = ""
    model: str = ""  # directory, embedding.json, or .onnx file
    tokenizer: str = ""
    dimensions: int = 0
    normalize: bool = True
    runtime: str = ""  # accepted for compatibility; the onnxruntime wheel is used
    max_batch: int = 32
    max_wait_ms: float = 2.0
    idle_unload_s: float = 0.0  # 0 = never unload
    threads: int = 0  # 0 = onnxruntime default
    lanes: int = 0  # batches run side by side, single-threaded; 0 = one per core, at most 4
    spin: bool = False  # let onnxruntime's pool threads busy-wait between runs
    int8_matmul: bool = True  # int8-weight models: run the products in int8 (engines.md)
    preload: bool = True  # start loading in the background at startup


class SummarizerSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    backend: str = "bundled"
    profile: str = ""
    model: str = ""  # directory with summarizer.json
    tokenizer: str = ""
    runtime: str = ""
    max_new_tokens: int = 64
    idle_unload_s: float = 300.0


class StoreSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    # "" (the default): the embedded SQLite store in data_dir. "postgresql://..." (or
    # "postgres://..."): a shared PostgreSQL + pgvector database; "sqlite:DIR" is a SQLite
    # store in DIR (it sets data_dir). Prefer a ~/.pgpass (or passfile=) to a password here.
    url: str = ""
    # PostgreSQL only: connections this daemon keeps open to the database at most (reads and
    # writes; each held session lock and the presence lock take one more of their own)
    pool_size: int = 8
    hnsw_m: int = 16
    hnsw_ef_construction: int = 100  # same recall as 200 here at half the build time
    hnsw_ef_search: int = 64
    exact_threshold: int = 20_000
    # From this many records in a collection, assemble and search take its dense candidates
    # from the store's ANN index instead of scanning every cached vector (store.md)
    assemble_ann_rows: int = 100_000
    # Such a collection is ranked by an HNSW graph the daemon builds in the background
    # over the vectors it caches: "auto" (when the store's index is in another process:
    # PostgreSQL), "on" or "off" (operations.md)
    assemble_graph: str = "auto"
    oversample: int = 4
    checkpoint_idle_s: float = 30.0
    rebuild_deleted_fraction: float = 0.2
    # FULL survives power loss; NORMAL survives a process kill but not power loss.
    synchronous: str = "FULL"
    index_threads: int = 1
    # A SQLite database file of at least this many bytes has its pages checked beside the
    # start (writes wait for the check) instead of before it (docs/store.md, "Durability
    # promise"): the check reads the whole file, half a minute at a million memories.
    page_check_background_bytes: int = 256 * 1024 * 1024


class GatingSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    threshold: float = 0.21  # chosen on the dev conversations (scripts/eval_gate.py)
    w1c: float = 0.35
    w2c: float = 0.40
    w3c: float = 0.25
    w1t: float = 0.40
    w2t: float = 0.35
    w3t: float = 0.25
    tech_norm: float = 1.5
    centroid_k: int = 10  # nearest raw turns read for the gate's centroid
    memory_k: int = 5  # nearest durable memories read for novelty
    # a turn repeated (cosine >= threshold) up to cap times in the input is damped; the
    # same for one already stored as a durable memory
    input_freq_threshold: float = 0.80
    input_freq_cap: int = 5
    mem_saturation_threshold: float = 0.85
    mem_saturation_cap: int = 3
    model: Literal["conversation", "reference"] = "conversation"  # "reference": its formula


class CompactionSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    min_turns: int = 4  # the protected recent tail keeps at least this many turns
    tail_tokens: int = 128  # ...and extends to this token target
    prior_context_tokens: int = 96  # bounded prior-summary context (delta conditioning)
    target_size: int = 20  # turns per chronological cluster
    max_active_summaries: int = 8  # more active summaries than this are condensed a level up
    auto: bool = True  # background auto-compaction from the per-session token accumulator
    session_budget_tokens: int = 8000
    soft_fraction: float = 0.70
    emergency_fraction: float = 0.85
    # Compactions running at once, explicit and automatic together (the rest wait their
    # turn): each holds a cluster's texts and the summarizer's buffers, and 16 at once
    # raised resident memory by 400 MB.
    max_concurrent: int = 2
    # A session idle this long (seconds) has its in-process bookkeeping dropped: the token
    # count toward auto-compaction restarts at 0, the compaction epoch is read back from the
    # store. 0 keeps it forever.
    idle_forget_s: float = 3600.0


class AuthoredSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    # Markdown roots the daemon watches: "generic:/path" or "obsidian:/path" (kind optional).
    roots: list[str] = msgspec.field(default_factory=list)
    include: list[str] = msgspec.field(default_factory=lambda: ["**/*.md"])
    exclude: list[str] = msgspec.field(default_factory=list)
    core_globs: list[str] = msgspec.field(default_factory=list)  # documents that yield hard rules
    # v1 ingest_markdown_document: the published plugin sends coreDoc:true for every file, so
    # by default coreDoc counts only for a sourcePath matching core_globs (or frontmatter
    # core: true); "trust" restores the reference (every list item of every note is hard).
    v1_core_doc: Literal["globs", "trust"] = "globs"
    debounce_ms: int = 500
    poll_interval_ms: int = 2000  # how often the roots are walked (stat only; hashing on change)


class JournalSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    max_entries: int = 500  # 0 = unbounded


class CacheSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The retrieval caches (docs/store.md, "Views"): ``max_bytes`` bounds the estimated
    size of the collection views kept between requests; the least recently used are
    dropped past it and read again on demand. 0 = unbounded."""

    max_bytes: int = 1 << 30


class McpSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``libravdb mcp --http``: every ``initialize`` opens a session the server keeps, so the
    table is bounded (past the cap the least recently used idle session is closed) and an
    idle session is closed after a few minutes, not the SDK's 30."""

    http_max_sessions: int = 32
    http_session_idle_s: float = 300.0


class Settings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    data_dir: str = ""  # filled by load_settings: $HOME/.clawdb/data
    log_level: str = "info"
    # "json" (one JSON object per line), "text" (for a person) or "auto": text when stderr
    # is a terminal, JSON otherwise (a host or a log collector reads it).
    log_format: str = "auto"
    config_file: str = ""
    server: ServerSettings = msgspec.field(default_factory=ServerSettings)
    embedding: EmbeddingSettings = msgspec.field(default_factory=EmbeddingSettings)
    summarizer: SummarizerSettings = msgspec.field(default_factory=SummarizerSettings)
    store: StoreSettings = msgspec.field(default_factory=StoreSettings)
    gating: GatingSettings = msgspec.field(default_factory=GatingSettings)
    journal: JournalSettings = msgspec.field(default_factory=JournalSettings)
    cache: CacheSettings = msgspec.field(default_factory=CacheSettings)
    mcp: McpSettings = msgspec.field(default_factory=McpSettings)
    compaction: CompactionSettings = msgspec.field(default_factory=CompactionSettings)
    authored: AuthoredSettings = msgspec.field(default_factory=AuthoredSettings)

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir).expanduser().absolute()

    @property
    def resolved_endpoint(self) -> str:
        return self.server.endpoint.strip()

    @property
    def store_url(self) -> str:
        """The PostgreSQL URL of a shared store, "" for the embedded SQLite store."""
        return self.store.url.strip()

    @property
    def store_location(self) -> str | Path:
        """What the store opens: the PostgreSQL URL, else the SQLite data directory."""
        return self.store_url or self.data_path

    @property
    def store_display(self) -> str:
        """The store for logs and messages: the URL with its password masked, or the
        data directory."""
        return mask_url(self.store_url) if self.store_url else str(self.data_path)


# Environment variable -> dotted settings key. LIBRAVDB_DB_PATH is the reference's store path;
# here it names the data directory.
ENV_KEYS: dict[str, str] = {
    "LIBRAVDB_CONFIG": "config_file",
    "LIBRAVDB_DATA_DIR": "data_dir",
    "LIBRAVDB_DB_PATH": "data_dir",
    "LIBRAVDB_STORE_URL": "store.url",
    "LIBRAVDB_STORE_POOL_SIZE": "store.pool_size",
    "LIBRAVDB_LOG_LEVEL": "log_level",
    "LIBRAVDB_LOG_FORMAT": "log_format",
    "LIBRAVDB_RPC_ENDPOINT": "server.endpoint",
    "LIBRAVDB_MAX_FRAME_BYTES": "server.max_frame_bytes",
    "LIBRAVDB_SHUTDOWN_GRACE_S": "server.shutdown_grace_s",
    "LIBRAVDB_DEBUG_METHODS": "server.debug_methods",
    "LIBRAVDB_AUTH_TOKEN_FILE": "server.auth_token_file",
    "LIBRAVDB_MAX_CONNECTIONS": "server.max_connections",
    "LIBRAVDB_MAX_INFLIGHT": "server.max_inflight",
    "LIBRAVDB_MAX_BATCH": "server.max_batch",
    "LIBRAVDB_ONNX_RUNTIME": "embedding.runtime",
    "LIBRAVDB_EMBEDDING_BACKEND": "embedding.backend",
    "LIBRAVDB_EMBEDDING_PROFILE": "embedding.profile",
    "LIBRAVDB_FALLBACK_PROFILE": "embedding.fallback_profile",
    "LIBRAVDB_EMBEDDING_MODEL": "embedding.model",
    "LIBRAVDB_EMBEDDING_TOKENIZER": "embedding.tokenizer",
    "LIBRAVDB_EMBEDDING_DIMENSIONS": "embedding.dimensions",
    "LIBRAVDB_EMBEDDING_NORMALIZE": "embedding.normalize",
    "LIBRAVDB_EMBEDDING_MAX_BATCH": "embedding.max_batch",
    "LIBRAVDB_EMBEDDING_MAX_WAIT_MS": "embedding.max_wait_ms",
    "LIBRAVDB_EMBEDDING_LANES": "embedding.lanes",
    "LIBRAVDB_EMBEDDING_SPIN": "embedding.spin",
    "LIBRAVDB_EMBEDDING_INT8_MATMUL": "embedding.int8_matmul",
    "LIBRAVDB_EMBEDDING_IDLE_UNLOAD_S": "embedding.idle_unload_s",
    "LIBRAVDB_EMBEDDING_PRELOAD": "embedding.preload",
    "LIBRAVDB_SUMMARIZER_BACKEND": "summarizer.backend",
    "LIBRAVDB_SUMMARIZER_PROFILE": "summarizer.profile",
    "LIBRAVDB_SUMMARIZER_MODEL_PATH": "summarizer.model",
    "LIBRAVDB_SUMMARIZER_TOKENIZER": "summarizer.tokenizer",
    "LIBRAVDB_SUMMARIZER_RUNTIME": "summarizer.runtime",
    "LIBRAVDB_SUMMARIZER_MAX_NEW_TOKENS": "summarizer.max_new_tokens",
    "LIBRAVDB_SUMMARIZER_IDLE_UNLOAD_S": "summarizer.idle_unload_s",
    "LIBRAVDB_GATING_THRESHOLD": "gating.threshold",
    "LIBRAVDB_GATING_W1C": "gating.w1c",
    "LIBRAVDB_GATING_W2C": "gating.w2c",
    "LIBRAVDB_GATING_W3C": "gating.w3c",
    "LIBRAVDB_GATING_W1T": "gating.w1t",
    "LIBRAVDB_GATING_W2T": "gating.w2t",
    "LIBRAVDB_GATING_W3T": "gating.w3t",
    "LIBRAVDB_GATING_TECH_NORM": "gating.tech_norm",
    "LIBRAVDB_GATING_CENTROID_K": "gating.centroid_k",
    "LIBRAVDB_GATING_MODEL": "gating.model",
    "LIBRAVDB_LIFECYCLE_JOURNAL_MAX_ENTRIES": "journal.max_entries",
    "LIBRAVDB_CACHE_MAX_BYTES": "cache.max_bytes",
    "LIBRAVDB_COMPACTION_AUTO": "compaction.auto",
    "LIBRAVDB_COMPACTION_MIN_TURNS": "compaction.min_turns",
    "LIBRAVDB_COMPACTION_MAX_CONCURRENT": "compaction.max_concurrent",
    "LIBRAVDB_COMPACTION_IDLE_FORGET_S": "compaction.idle_forget_s",
    "LIBRAVDB_COMPACTION_SESSION_BUDGET_TOKENS": "compaction.session_budget_tokens",
    "LIBRAVDB_MCP_HTTP_MAX_SESSIONS": "mcp.http_max_sessions",
    "LIBRAVDB_MCP_HTTP_SESSION_IDLE_S": "mcp.http_session_idle_s",
}


def set_dotted(tree: dict[str, Any], key: str, value: Any) -> str | None:
    """``tree["a"]["b"] = value`` for the key ``"a.b"``, making the tables on the way; the
    part of the key that already holds a value, if one does (then nothing is set)."""
    node = tree
    *parents, leaf = key.split(".")
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            return part
        node = child
    node[leaf] = value
    return None


def _set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    part = set_dotted(tree, key, value)
    if part is not None:
        raise ConfigError(f"setting {key!r}: {part!r} is not a table")


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _env_layer(env: Mapping[str, str]) -> dict[str, Any]:
    layer: dict[str, Any] = {}
    for name, key in ENV_KEYS.items():
        raw = env.get(name)
        if raw is None or raw.strip() == "":
            continue
        _set_dotted(layer, key, raw.strip())
    return layer


def _toml_layer(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc


def load_settings(
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Build settings from flags (dotted keys), the environment and an optional TOML file."""
    env = os.environ if env is None else env
    flag_layer: dict[str, Any] = {}
    for key, value in (flags or {}).items():
        if value is not None:
            _set_dotted(flag_layer, key, value)
    env_layer = _env_layer(env)

    config_file = flag_layer.get("config_file") or env_layer.get("config_file") or ""
    toml_layer = _toml_layer(Path(config_file).expanduser()) if config_file else {}

    merged = _merge(_merge(toml_layer, env_layer), flag_layer)
    try:
        settings = msgspec.convert(merged, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid setting: {exc}") from exc
    _store_location(settings)
    home = default_home(env)
    if not settings.data_dir.strip():
        settings.data_dir = str(home / "data")
    if not settings.server.endpoint.strip():
        settings.server.endpoint = f"unix:{home / 'run' / 'libravdb.sock'}"
    _validate(settings)
    return settings


POSTGRES_SCHEMES = ("postgresql://", "postgres://")
SQLITE_SCHEME = "sqlite:"


def is_postgres_url(location: object) -> bool:
    """Whether a store location names a PostgreSQL database (else a SQLite directory)."""
    return isinstance(location, str) and location.strip().lower().startswith(POSTGRES_SCHEMES)


_SECRET_KEYS = frozenset({"password", "sslpassword"})
_QUERY_SECRET = re.compile(r"(?i)((?:^|[?&\s])(?:ssl)?password=)[^&\s]*")
# Characters that end a password where libpq or a URL parser may read the URL otherwise
# (an unescaped one cuts the password, and the piece after it lands in a host or a path).
_CUTS = re.compile(r"[@/:?#]")
_ENCODE_HINT = "percent-encode them: @ as %40, / as %2F, : as %3A, ? as %3F, # as %23"


def _userinfo(url: str) -> tuple[str, str, str] | None:
    """(scheme://, user name and password, the rest) of a URL, or None without an ``@``.

    The user name and password end at the **last** ``@``: a password may hold an
    unescaped ``@``, ``/``, ``?`` or ``#`` (libpq then reads the URL differently, but no
    reading of it may show the password). A URL with an ``@`` only in its query string
    (``?application_name=a@b``) is over-masked rather than risk a password."""
    scheme, sep, rest = url.partition("://")
    at = rest.rfind("@")
    if not sep or at < 0:
        return None
    return scheme + sep, rest[:at], rest[at + 1 :]


def mask_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for logs and error messages): the
    whole password of the user name part (everything from the first ``:`` to the last
    ``@``) and ``password=``/``sslpassword=`` parameters."""
    parts = _userinfo(url)
    if parts is None:
        return _QUERY_SECRET.sub(r"\1***", url)
    head, userinfo, rest = parts
    user, colon, _password = userinfo.partition(":")
    rest = _QUERY_SECRET.sub(r"\1***", rest)
    return f"{head}{user}{':***' if colon else ''}@{rest}"


def url_secrets(url: str) -> list[str]:
    """Every string of ``url`` that is, or may be read as, a password (longest first): the
    password up to the last ``@``, libpq's reading of it and the ``password=``
    parameters, each as written and percent-decoded. When libpq reads the password
    otherwise (an unescaped ``@`` or ``/`` in it), also the pieces an ``@``, ``/``, ``:``,
    ``?`` or ``#`` cuts it into: a driver's message may quote any of them as a host or a
    path. For redacting what a message may quote."""
    from urllib.parse import unquote

    found = _libpq_passwords(url)
    parts = _userinfo(url)
    if parts is not None and ":" in parts[1]:
        whole = parts[1].partition(":")[2]
        if unquote(whole) not in found:  # libpq reads it otherwise: its pieces too
            found += _CUTS.split(whole)
        found.append(whole)
    found += [m.group(0).partition("=")[2] for m in _QUERY_SECRET.finditer(url)]
    found += [unquote(v) for v in found]
    return sorted({v for v in found if v}, key=len, reverse=True)


def _libpq_passwords(url: str) -> list[str]:
    try:
        from psycopg import conninfo  # lazy: only a PostgreSQL store needs the driver

        parsed = conninfo.conninfo_to_dict(url)
    except Exception:  # not a URL libpq reads (or no driver): nothing it would quote
        return []
    return [str(parsed[k]) for k in _SECRET_KEYS if parsed.get(k)]


def scrub(text: str, url: str, min_len: int = 4) -> str:
    """``text`` (a driver's message about ``url``) with the URL masked and every string of
    ``min_len`` characters or more that may be its password replaced by ``***`` (shorter
    pieces would garble the message: :func:`quotes_secret` tells whether to show it)."""
    text = text.replace(url, mask_url(url))
    for secret in url_secrets(url):
        if len(secret) >= min_len:
            text = text.replace(secret, "***")
    return mask_url(text)


def quotes_secret(text: str, url: str) -> bool:
    """Whether ``text`` holds any piece of two characters or more of ``url``'s password."""
    return any(len(s) >= 2 and s in text for s in url_secrets(url))


def _ambiguous_at(url: str) -> bool:
    """Whether libpq would read an ``@`` of ``url`` as part of a host or the database name:
    the mark of an unescaped ``@`` or ``/`` in a password (libpq ends the user name and
    password at the first ``@``, and takes none when a ``/`` comes first)."""
    rest = url.partition("://")[2]
    slash, first = rest.find("/"), rest.find("@")
    start = first + 1 if first >= 0 and (slash < 0 or first < slash) else 0
    query = rest.find("?", start)
    return "@" in rest[start : len(rest) if query < 0 else query]


def check_store_url(url: str) -> None:
    """Refuse a URL libpq could not read, or would read otherwise than it looks (an
    unescaped ``@`` or ``/`` in the password): ConfigError naming it, password masked and
    no piece of it quoted. A failover list (``h1:5432,h2:5433``) is libpq's to read."""
    shown = mask_url(url)
    if not is_postgres_url(url):
        raise ConfigError(
            f"store.url {shown!r} is not a postgresql:// or postgres:// URL "
            "(or sqlite:DIR for a SQLite data directory)"
        )
    if _ambiguous_at(url):
        raise ConfigError(
            f"store.url {shown!r} is malformed: an '@' or '/' in the user name or password "
            f"is read as part of the host or database name; {_ENCODE_HINT}"
        )
    from psycopg import conninfo  # lazy: only a PostgreSQL store needs the driver

    try:
        parsed = conninfo.conninfo_to_dict(url)
    except Exception as exc:  # psycopg.ProgrammingError: libpq's own parser refused it
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if quotes_secret(first, url):  # libpq quoted what it took for a host or a parameter
            first = (
                f"libpq cannot read it (if the password holds special characters, {_ENCODE_HINT})"
            )
        raise ConfigError(f"store.url {shown!r} is malformed: {scrub(first, url)}") from None
    for port in str(parsed.get("port") or "").split(","):
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            # a non-number may be a piece of a password cut by an unescaped character
            what = f"port {port!r}" if "@" not in url else "a port"
            raise ConfigError(
                f"store.url {shown!r} is malformed: {what} is not a number from 1 to 65535 "
                f"(if the password holds special characters, {_ENCODE_HINT})"
            )


def _store_location(settings: Settings) -> None:
    """``store.url = "sqlite:DIR"`` names a SQLite store: it becomes ``data_dir``."""
    url = settings.store.url.strip()
    if url.lower().startswith(SQLITE_SCHEME):
        path = url[len(SQLITE_SCHEME) :]
        if path.startswith("//"):  # sqlite:///abs/path
            path = path[2:]
        if not path.strip():
            raise ConfigError("store.url 'sqlite:' needs a directory: sqlite:/path/to/data")
        settings.data_dir = path
        settings.store.url = ""
    elif url:
        check_store_url(url)
        settings.store.url = url


def _validate(settings: Settings) -> None:
    if settings.store.pool_size < 2:
        raise ConfigError("store.pool_size must be at least 2")
    if settings.server.max_frame_bytes < 1024:
        raise ConfigError("server.max_frame_bytes must be at least 1024")
    for key in ("max_connections", "max_inflight", "max_batch", "max_parse_errors"):
        if getattr(settings.server, key) < 1:
            raise ConfigError(f"server.{key} must be at least 1")
    if settings.server.transport not in ("socket", "stdio"):
        raise ConfigError("server.transport must be 'socket' or 'stdio'")
    if settings.log_format not in ("auto", "json", "text"):
        raise ConfigError(f"log format {settings.log_format!r} is not one of auto, json, text")
    if settings.log_level.lower() not in ("debug", "info", "warning", "error", "critical"):
        raise ConfigError(
            f"log level {settings.log_level!r} is not one of debug, info, warning, error, critical"
        )
    if settings.store.assemble_graph not in ("auto", "on", "off"):
        raise ConfigError("store.assemble_graph must be auto, on or off")
    if settings.store.synchronous.upper() not in ("FULL", "NORMAL"):
        raise ConfigError("store.synchronous must be FULL or NORMAL")
    if settings.store.page_check_background_bytes < 0:
        raise ConfigError("store.page_check_background_bytes must be 0 or more")
    if settings.cache.max_bytes < 0:
        raise ConfigError("cache.max_bytes must be >= 0 (0 = unbounded)")
    if settings.journal.max_entries < 0:
        raise ConfigError("journal.max_entries must be >= 0 (0 = unbounded)")
    if settings.mcp.http_max_sessions < 1:
        raise ConfigError("mcp.http_max_sessions must be at least 1")
    if not 0 < settings.mcp.http_session_idle_s < float("inf"):
        raise ConfigError("mcp.http_session_idle_s must be a positive number of seconds")
