"""The daemon-owned markdown watcher (with its weaknesses fixed).

Configured roots (``settings.authored.roots``: ``"generic:/path"``, ``"obsidian:/path"`` or a
bare path = generic) are **polled**: every ``poll_interval_s`` (default 2 s) each root is
walked with ``os.scandir`` and every eligible file's ``(size, mtime_ns)`` compared with the
persisted state. Only a changed signature leads to reading the file and hashing it (sha256);
only a changed hash (or a changed core status) leads to an ingest. Polling costs one
``stat`` per file per interval (no inotify dependency; ``watchfiles`` is not installed).

* **Walk.** Directories named ``.git``, ``node_modules`` and ``.obsidian`` are never
  entered (Obsidian roots also skip ``.trash``). Symlinks are followed only when their
  real path stays inside the root's real path; a directory is walked once (no loops).
* **Eligibility.** Extension ``.md`` / ``.markdown``; the root-relative POSIX path must
  not match an ``exclude`` glob and must match an ``include`` glob (a basename of
  ``memory.md`` is always included unless excluded). Globs are anchored: ``**`` matches
  any number of path segments (``**/`` also none), ``*`` and ``?`` stay inside a segment,
  ``[...]`` is a class.
* **Core documents.** A file matching ``core_globs`` is ingested as core (its list items
  become hard rules); any other file is core only if its frontmatter says ``core: true``
  (the reference made every note of every root core).
* **Debounce.** A new or changed signature is ingested once it has been stable for
  ``debounce_ms`` (seen unchanged on a later poll that long after), or at once when the
  file's mtime is already older than that.
* **Deletion.** A file that disappears (or becomes ineligible) has its document deleted.
  Documents of a root that is no longer configured are deleted when the daemon starts,
  before it serves (also when no root is configured any more: the watcher then runs only
  that step); a configured root that is missing or unreadable is left alone (an
  unmounted disk must not erase memory).
* **State.** ``<data_dir>/authored_watch.json`` (atomic tmp + fsync + rename) maps each
  ``sourceDoc`` (the absolute path under the root) to its root, kind, relative path, size,
  mtime_ns, sha256 and core flag. It is written after a poll that changed something, so a
  restart re-sends nothing unchanged. If the daemon dies between an ingest and the state
  write, the next start hashes the file again and re-ingests it, which the authored service
  detects as unchanged (no embedding, no write).
* A failed ingest (e.g. the embedder is still loading) is retried after ``retry_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from protocol.core import ComponentState
from sidecar.memory.authored.service import AuthoredService, SourceMeta

if TYPE_CHECKING:
    from sidecar.config import AuthoredSettings

log = structlog.get_logger(__name__)

STATE_FILE = "authored_watch.json"
STATE_VERSION = 1
INGEST_VERSION = 4  # reference host used 3 (FNV-1a hashes); ours are sha256
HASH_BACKEND = "sha256"
TOKENIZER_ID = "markdown-ingest:v1"
EXTENSIONS = (".md", ".markdown")
SKIP_DIRS = frozenset({".git", "node_modules", ".obsidian"})
OBSIDIAN_SKIP_DIRS = SKIP_DIRS | {".trash"}
KINDS = ("generic", "obsidian")


# ------------------------------------------------------------------------------ config


@dataclass(frozen=True, slots=True)
class Root:
    kind: str
    path: str  # absolute, normalized (not resolved: sourceDocs keep the configured spelling)
    real: str  # realpath, for the symlink containment check


def parse_root(spec: str) -> Root:
    """``"generic:/p"`` / ``"obsidian:/p"`` / ``"/p"`` → :class:`Root`."""
    kind, sep, rest = spec.strip().partition(":")
    if sep and kind.lower() in KINDS:
        kind, raw = kind.lower(), rest
    else:
        kind, raw = "generic", spec.strip()
    if not raw.strip():
        raise ValueError(f"authored root {spec!r} has no path")
    path = os.path.abspath(os.path.expanduser(raw.strip()))
    return Root(kind, path, os.path.realpath(path))


@cache
def _glob_re(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                i += 2
                if i < n and pattern[i] == "/":
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def glob_match(patterns: Iterable[str], rel: str) -> bool:
    """Whether the root-relative POSIX path ``rel`` matches one of ``patterns``."""
    return any(_glob_re(p.lstrip("/")).match(rel) is not None for p in patterns if p)


def eligible(rel: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    name = rel.rsplit("/", 1)[-1].lower()
    if not name.endswith(EXTENSIONS):
        return False
    if glob_match(exclude, rel):
        return False
    if name == "memory.md":
        return True
    return not include or glob_match(include, rel)


def _within(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


@dataclass(frozen=True, slots=True)
class Seen:
    root: Root
    rel: str
    size: int
    mtime_ns: int


def _look(entry: os.DirEntry[str], root: Root) -> tuple[str, os.stat_result, bool] | None:
    """(real path, stat, is a directory) of a directory entry; None for what the walk
    skips: a symlink leading out of the root, a special file, anything unreadable."""
    try:
        if entry.is_symlink():
            real = os.path.realpath(entry.path)
            if not _within(real, root.real):
                return None
            return real, os.stat(real), os.path.isdir(real)
        is_dir = entry.is_dir(follow_symlinks=False)
        if not is_dir and not entry.is_file(follow_symlinks=False):
            return None
        return entry.path, entry.stat(follow_symlinks=False), is_dir
    except OSError:
        return None


def walk_root(root: Root, include: Sequence[str], exclude: Sequence[str]) -> dict[str, Seen]:
    """Eligible files under ``root``: ``{sourceDoc: Seen}`` (module doc). Raises OSError
    when the root itself cannot be listed."""
    skip = OBSIDIAN_SKIP_DIRS if root.kind == "obsidian" else SKIP_DIRS
    found: dict[str, Seen] = {}
    visited = {root.real}
    stack = [(root.path, "")]
    first = True
    deferred: list[tuple[str, str, str]] = []  # symlinked dirs, walked after the real tree
    while stack or deferred:
        if not stack:
            link, rel_link, real_dir = deferred.pop(0)
            if real_dir in visited:
                continue
            visited.add(real_dir)
            stack.append((link, rel_link))
        dirpath, relpath = stack.pop()
        try:
            entries = list(os.scandir(dirpath))
        except OSError:
            if first:
                raise
            continue
        first = False
        for entry in sorted(entries, key=lambda e: e.name):
            rel = f"{relpath}{entry.name}"
            looked = _look(entry, root)
            if looked is None:
                continue
            real, st, is_dir = looked
            if is_dir:
                if entry.name in skip:
                    continue
                real_dir = os.path.realpath(real)
                if entry.is_symlink():
                    deferred.append((entry.path, rel + "/", real_dir))
                elif real_dir not in visited:
                    visited.add(real_dir)
                    stack.append((entry.path, rel + "/"))
            elif eligible(rel, include, exclude):
                found[entry.path] = Seen(root, rel, st.st_size, st.st_mtime_ns)
    return found


# ------------------------------------------------------------------------------ state


@dataclass(slots=True)
class FileState:
    root: str
    kind: str
    rel: str
    size: int
    mtime_ns: int
    sha256: str
    core: bool


def load_state(path: Path) -> dict[str, FileState]:
    try:
        raw = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("authored.state_unreadable", path=str(path), error=str(exc))
        return {}
    out: dict[str, FileState] = {}
    if not isinstance(raw, dict) or raw.get("version") != STATE_VERSION:
        return out
    for doc, item in (raw.get("files") or {}).items():
        with contextlib.suppress(TypeError, KeyError):
            out[doc] = FileState(**item)
    return out


def save_state(path: Path, files: dict[str, FileState]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    data = {"version": STATE_VERSION, "files": {d: asdict(s) for d, s in sorted(files.items())}}
    with tmp.open("w", encoding="utf-8") as fh:
        json.dump(data, fh, separators=(",", ":"))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class OutsideRoot(OSError):
    """The file resolves outside its root (replaced by a symlink since the walk)."""


def _read_hash(path: str, root_real: str) -> tuple[bytes, str]:
    """The file's bytes and sha256, read only if the file actually opened lies inside the
    root: the walk checked symlinks, but a file can be swapped for one before it is read,
    so the opened descriptor itself is resolved (no check-then-open race)."""
    with open(path, "rb") as fh:
        opened = _opened_path(fh.fileno(), path)
        if not _within(opened, root_real):
            raise OutsideRoot(f"{path} resolves outside its root")
        data = fh.read()
    return data, hashlib.sha256(data).hexdigest()


def _opened_path(fd: int, path: str) -> str:
    """The real path of an open descriptor (/proc on Linux; realpath elsewhere)."""
    try:
        return os.path.realpath(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return os.path.realpath(path)


# ------------------------------------------------------------------------------ watcher


@dataclass(slots=True)
class WatchCounts:
    scans: int = 0
    ingested: int = 0
    unchanged: int = 0
    deleted: int = 0
    retired: int = 0  # documents of roots no longer configured, deleted at start
    errors: int = 0
    last_scan_ms: float = 0.0
    last_scan_at: int | None = None  # epoch ms


@dataclass(slots=True)
class _Pending:
    sig: tuple[int, int]
    since: float
    retry_at: float = 0.0


@dataclass(slots=True)
class _Plan:
    to_ingest: list[tuple[str, Seen]] = field(default_factory=list)
    to_delete: list[str] = field(default_factory=list)


class AuthoredWatcher:
    """App component polling the configured markdown roots (module doc)."""

    name = "authored_watcher"

    def __init__(
        self,
        settings: AuthoredSettings,
        data_dir: Path,
        authored: AuthoredService,
        *,
        poll_interval_s: float = 2.0,
        retry_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        # Injectable clocks: the debounce is tested by moving time, not by sleeping.
        self._clock = clock
        self._wall_ns = wall_clock_ns
        self.roots = [parse_root(r) for r in settings.roots if r.strip()]
        self.include = list(settings.include)
        self.exclude = list(settings.exclude)
        self.core_globs = list(settings.core_globs)
        self.debounce_s = max(0.0, settings.debounce_ms / 1000.0)
        self.poll_interval_s = max(0.05, poll_interval_s)
        self.retry_s = retry_s
        self.state_path = Path(data_dir) / STATE_FILE
        self.authored = authored
        self.files: dict[str, FileState] = {}
        self.stats = WatchCounts()
        self._pending: dict[str, _Pending] = {}
        self._task: asyncio.Task[None] | None = None
        self._scan_lock = asyncio.Lock()
        self._first_scan = asyncio.Event()
        self._error = ""

    # ---- component ----------------------------------------------------------------

    async def start(self) -> None:
        self.files = await asyncio.to_thread(load_state, self.state_path)
        await self.retire_unconfigured()
        if self.roots:
            self._task = asyncio.create_task(self._run(), name="authored-watcher")
        else:
            self._first_scan.set()

    async def retire_unconfigured(self) -> int:
        """Delete, before the daemon serves, the documents of roots that are no longer
        configured: a rule must not outlive the configuration that brought it in.
        (Documents ingested through ``authored.ingest`` were never watched: untouched.)"""
        configured = {r.path for r in self.roots}
        stale = {doc: st.root for doc, st in self.files.items() if st.root not in configured}
        if not stale:
            return 0
        async with self._scan_lock:
            for doc in sorted(stale):
                await self._delete(doc)
            retired = sum(1 for doc in stale if doc not in self.files)
            self.stats.retired += retired
            await asyncio.to_thread(save_state, self.state_path, dict(self.files))
        log.info("authored.retired", documents=retired, roots=sorted(set(stale.values())))
        return retired

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        async with self._scan_lock:
            pass

    def states(self) -> dict[str, ComponentState]:
        state = "ready" if self._first_scan.is_set() else "loading"
        return {self.name: ComponentState(state=state, reason=self._error)}

    async def counts(self) -> dict[str, int]:
        return {"authoredFiles": len(self.files), "authoredRetired": self.stats.retired}

    @property
    def scanning(self) -> bool:
        return self._scan_lock.locked()

    @property
    def error(self) -> str:
        return self._error

    async def wait_scanned(self) -> None:
        """Return once the first poll has finished (wrap in ``asyncio.wait_for``)."""
        await self._first_scan.wait()

    # ---- polling ------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                await self.scan_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep polling; report in states()
                self._error = f"scan failed: {exc}"
                log.exception("authored.scan_failed")
            self._first_scan.set()
            await asyncio.sleep(self.poll_interval_s)

    def _core(self, rel: str) -> bool | None:
        return True if glob_match(self.core_globs, rel) else None

    async def scan_once(self, *, force: bool = False) -> WatchCounts:
        """One poll of every root; ``force`` ignores the debounce (tests, tools)."""
        async with self._scan_lock:
            t0 = time.perf_counter()
            before = (self.stats.ingested, self.stats.deleted, self.stats.unchanged)
            seen, missing_roots = await asyncio.to_thread(self._walk_all)
            plan = self._plan(seen, missing_roots, force=force)
            for doc in plan.to_delete:
                await self._delete(doc)
            for doc, s in plan.to_ingest:
                await self._sync(doc, s)
            self.stats.scans += 1
            self.stats.last_scan_ms = (time.perf_counter() - t0) * 1000
            self.stats.last_scan_at = int(time.time() * 1000)
            after = (self.stats.ingested, self.stats.deleted, self.stats.unchanged)
            if after != before:
                await asyncio.to_thread(save_state, self.state_path, dict(self.files))
            return self.stats

    def _walk_all(self) -> tuple[dict[str, Seen], set[str]]:
        seen: dict[str, Seen] = {}
        missing: set[str] = set()
        for root in self.roots:
            try:
                if not os.path.isdir(root.path):
                    raise FileNotFoundError(root.path)
                for doc, s in walk_root(root, self.include, self.exclude).items():
                    seen.setdefault(doc, s)
            except OSError as exc:
                missing.add(root.path)
                self._error = f"root {root.path} unavailable: {exc}"
        return seen, missing

    def _plan(self, seen: dict[str, Seen], missing_roots: set[str], *, force: bool) -> _Plan:
        plan = _Plan()
        now = self._clock()
        wall_ns = self._wall_ns()
        for doc, s in seen.items():
            st = self.files.get(doc)
            core = bool(self._core(s.rel))
            if (
                st is not None
                and (st.size, st.mtime_ns) == (s.size, s.mtime_ns)
                and st.core == core
                and st.kind == s.root.kind
                and st.root == s.root.path
            ):
                self._pending.pop(doc, None)
                continue
            sig = (s.size, s.mtime_ns)
            p = self._pending.get(doc)
            if p is None or p.sig != sig:
                p = _Pending(sig, now)
                self._pending[doc] = p
                settled = (wall_ns - s.mtime_ns) / 1e9 >= self.debounce_s
            else:
                settled = now - p.since >= self.debounce_s
            if now < p.retry_at:
                continue
            if force or settled:
                plan.to_ingest.append((doc, s))
        # Gone, ineligible, or under a root no longer configured; a configured root that is
        # missing or unreadable keeps its documents.
        for doc, st in self.files.items():
            if doc not in seen and st.root not in missing_roots:
                plan.to_delete.append(doc)
        for doc in list(self._pending):
            if doc not in seen:
                del self._pending[doc]
        return plan

    async def _delete(self, doc: str) -> None:
        try:
            await self.authored.delete(doc)
        except Exception as exc:
            self.stats.errors += 1
            log.warning("authored.delete_failed", source_doc=doc, error=str(exc))
            return
        self.files.pop(doc, None)
        self.stats.deleted += 1
        log.info("authored.deleted", source_doc=doc)

    async def _sync(self, doc: str, s: Seen) -> None:
        core = self._core(s.rel)
        try:
            data, digest = await asyncio.to_thread(_read_hash, doc, s.root.real)
        except OSError as exc:  # vanished or unreadable since the walk: next poll decides
            log.info("authored.read_failed", source_doc=doc, error=str(exc))
            return
        st = self.files.get(doc)
        new_state = FileState(
            s.root.path, s.root.kind, s.rel, s.size, s.mtime_ns, digest, bool(core)
        )
        if (
            st is not None
            and st.sha256 == digest
            and st.core == bool(core)
            and st.kind == s.root.kind
        ):
            self.files[doc] = new_state
            self._pending.pop(doc, None)
            self.stats.unchanged += 1
            return
        try:
            await self.authored.ingest(
                doc,
                data.decode("utf-8", errors="replace"),
                core=core,
                tokenizer_id=TOKENIZER_ID,
                source=SourceMeta(
                    root=s.root.path,
                    path=s.rel,
                    kind=s.root.kind,
                    file_hash=digest,
                    size=s.size,
                    mtime_ms=s.mtime_ns // 1_000_000,
                    ingest_version=INGEST_VERSION,
                    hash_backend=HASH_BACKEND,
                ),
            )
        except Exception as exc:
            self.stats.errors += 1
            p = self._pending.get(doc)
            if p is not None:
                p.retry_at = self._clock() + self.retry_s
            log.warning("authored.ingest_failed", source_doc=doc, error=str(exc))
            return
        self.files[doc] = new_state
        self._pending.pop(doc, None)
        self.stats.ingested += 1
        log.info("authored.ingested", source_doc=doc, core=bool(core))
