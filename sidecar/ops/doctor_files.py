"""Doctor checks of the data directory on disk: owner-only permissions, the lock file and
who holds it, and the free space of its file system. Nothing here takes the lock or
changes a file."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from sidecar.ops.doctor_result import Check, fail, ok, q, warn
from sidecar.store.lock import LOCK_NAME, read_holder_pid

GIB = 1 << 30
LOW_FREE_BYTES = GIB
LOW_FREE_FRACTION = 0.05
PROC_LOCKS = Path("/proc/locks")


def check_data_dir(data_dir: Path) -> Check:
    name = "data dir"
    if not data_dir.exists():
        return warn(name, f"{data_dir} does not exist yet (the daemon creates it, mode 0700)")
    if not data_dir.is_dir():
        return fail(name, f"{data_dir} is not a directory", f"move {q(data_dir)} aside")
    st = data_dir.stat()
    if st.st_uid != os.getuid():
        return fail(
            name,
            f"{data_dir} belongs to uid {st.st_uid}, not to you (uid {os.getuid()})",
            f"chown -R {os.getuid()} {q(data_dir)}",
        )
    shared = [(p, mode) for p, mode in _modes(data_dir) if mode & 0o077]
    if shared:
        first, mode = shared[0]
        more = f" and {len(shared) - 1} more" if len(shared) > 1 else ""
        return fail(
            name,
            f"other users can read {first} (mode {mode:04o}){more}; memories are private",
            f"chmod -R go-rwx {q(data_dir)}",
        )
    return ok(name, f"{data_dir} and its files are owner-only")


def _modes(data_dir: Path) -> list[tuple[Path, int]]:
    """The permission bits of the directory and everything below it (links not followed).
    A running daemon renames temporary files meanwhile: what vanished is skipped."""
    paths = [data_dir]
    for root, dirs, files in os.walk(data_dir):
        paths += [Path(root, n) for n in (*dirs, *files)]
    out: list[tuple[Path, int]] = []
    for path in paths:
        try:
            st = path.lstat()
        except OSError:
            continue
        if not stat.S_ISLNK(st.st_mode):
            out.append((path, stat.S_IMODE(st.st_mode)))
    return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, but is another user's
    return True


def flock_holders(path: Path) -> set[int] | None:
    """Pids holding a ``flock`` on ``path`` according to /proc/locks; None where the
    kernel does not say (not Linux). Reading it takes no lock."""
    try:
        st = path.stat()
        text = PROC_LOCKS.read_text()
    except OSError:
        return None
    holders: set[int] = set()
    for line in text.splitlines():
        fields = line.split()
        if "->" in fields:  # a waiter, not a holder
            continue
        if len(fields) < 6 or fields[1] != "FLOCK":
            continue
        try:
            major, minor, inode = fields[5].split(":")
            same = (int(major, 16), int(minor, 16), int(inode)) == (
                os.major(st.st_dev),
                os.minor(st.st_dev),
                st.st_ino,
            )
            if same:
                holders.add(int(fields[4]))
        except ValueError:
            continue
    return holders


def check_lock(data_dir: Path) -> Check:
    name = "lock"
    path = data_dir / LOCK_NAME
    if not path.exists():
        return ok(name, "no LOCK file: no daemon has used this directory")
    recorded = read_holder_pid(data_dir)
    holders = flock_holders(path)
    if holders:
        who = ", ".join(str(p) for p in sorted(holders))
        return ok(name, f"held by pid {who} (a running daemon)")
    if recorded is None:
        return ok(name, "not held (the last daemon stopped cleanly)")
    stale = (
        holders is not None or not _pid_alive(recorded)  # /proc/locks knows it is not held
    )
    if not stale:
        return ok(name, f"held by pid {recorded} (running)")
    alive = " (a different process now)" if _pid_alive(recorded) else " (no longer running)"
    return fail(
        name,
        f"stale: LOCK names pid {recorded}{alive}, which does not hold it; the daemon was "
        "killed rather than stopped",
        f"rm {q(path)}   (or start the daemon: it takes the lock over)",
    )


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_disk(
    data_dir: Path, min_free: int = LOW_FREE_BYTES, min_fraction: float = LOW_FREE_FRACTION
) -> Check:
    name = "disk"
    where = _existing(data_dir)
    usage = shutil.disk_usage(where)
    share = usage.free / usage.total if usage.total else 0.0
    detail = (
        f"{usage.free / GIB:.1f} GiB free of {usage.total / GIB:.1f} GiB ({share:.0%}) at {where}"
    )
    if usage.free < min_free or share < min_fraction:
        return warn(
            name,
            f"low: {detail}; writes fail with -32005 when it is full",
            f"free space on the file system of {q(where)}",
        )
    return ok(name, detail)
