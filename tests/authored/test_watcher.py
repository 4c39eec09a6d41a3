"""The markdown watcher against a real temporary directory (polling, state, symlinks)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.config import AuthoredSettings
from sidecar.memory.authored.service import AuthoredService
from sidecar.memory.authored.watcher import (
    AuthoredWatcher,
    OutsideRoot,
    _read_hash,
    eligible,
    glob_match,
    parse_root,
)
from tests.authored.conftest import Rpc, make_rpc


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[tuple[Rpc, Path]]:
    rpc, app = await make_rpc(tmp_path)
    try:
        yield rpc, tmp_path
    finally:
        await app.close()


def _watcher(rpc: Rpc, tmp: Path, roots: list[str], **kw: Any) -> AuthoredWatcher:
    clocks = {k: kw.pop(k) for k in ("clock", "wall_clock_ns") if k in kw}
    settings = AuthoredSettings(roots=roots, debounce_ms=kw.pop("debounce_ms", 0), **kw)
    return AuthoredWatcher(
        settings, tmp / "data", rpc.app.service(AuthoredService), poll_interval_s=3600, **clocks
    )


async def _docs(rpc: Rpc) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for tier in ("hard", "soft", "variant"):
        for r in await rpc.listing(f"authored:{tier}"):
            out.setdefault(r["metadata"]["source_doc"], set()).add(tier)
    return out


@pytest.mark.sqlite_only("no store: the watcher's file handling alone")
def test_globs_and_roots() -> None:
    assert glob_match(["**/*.md"], "a.md") and glob_match(["**/*.md"], "x/y/a.md")
    assert glob_match(["notes/**"], "notes/a/b.md") and not glob_match(["notes/**"], "other/a.md")
    assert glob_match(["*.md"], "a.md") and not glob_match(["*.md"], "x/a.md")
    assert glob_match(["drafts/*.md"], "drafts/a.md") and not glob_match(["a?.md"], "a.md")
    assert eligible("x/memory.md", ["only/**"], []) and not eligible("x/memory.md", [], ["x/**"])
    assert not eligible("a.txt", ["**/*"], []) and eligible("A.MARKDOWN", [], [])
    assert parse_root("obsidian:/v").kind == "obsidian" and parse_root("/v").kind == "generic"
    assert parse_root("generic:/v").path == "/v"


async def test_create_modify_delete_and_restart(env: tuple[Rpc, Path]) -> None:
    rpc, tmp = env
    root = tmp / "notes"
    (root / "sub").mkdir(parents=True)
    (root / "rules.md").write_text("- never push to main\n- run the tests\n")
    (root / "sub" / "lore.md").write_text("# Lore\n\nThe old kingdom fell.\n")
    (root / "skip.txt").write_text("not markdown")
    for d in (".git", "node_modules", ".obsidian", "drafts"):
        (root / d).mkdir()
        (root / d / "x.md").write_text("- hidden rule\n")
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("- outside rule\n")
    os.symlink(outside, root / "escape")  # directory symlink out of the root
    os.symlink(outside / "secret.md", root / "escape.md")  # file symlink out of the root
    os.symlink(root / "sub", root / "loop")  # inside the root: followed once, no loop

    w = _watcher(rpc, tmp, [f"generic:{root}"], core_globs=["rules.md"], exclude=["drafts/**"])
    await w.start()
    await asyncio.wait_for(w.wait_scanned(), 10)
    docs = await _docs(rpc)
    assert set(docs) == {str(root / "rules.md"), str(root / "sub" / "lore.md")}
    assert docs[str(root / "rules.md")] == {"hard"}  # core by core_globs
    assert w.stats.ingested == 2
    recs = await rpc.listing("authored:hard")
    meta = recs[0]["metadata"]
    assert meta["source_root"] == str(root) and meta["source_path"] == "rules.md"
    assert meta["source_kind"] == "generic" and meta["hash_backend"] == "sha256"
    assert len(meta["file_hash"]) == 64

    # modify (content changes), touch without change, delete
    (root / "sub" / "lore.md").write_text("# Lore\n\nThe new kingdom rose.\n")
    os.utime(root / "rules.md")  # mtime changes, content does not: hash says unchanged
    await w.scan_once(force=True)
    texts = [r["text"] for r in await rpc.listing("authored:variant")]
    assert "The new kingdom rose." in texts and "The old kingdom fell." not in texts
    assert w.stats.ingested == 3 and w.stats.unchanged == 1
    (root / "rules.md").unlink()
    await w.scan_once(force=True)
    assert set(await _docs(rpc)) == {str(root / "sub" / "lore.md")}
    await w.close()

    # restart: nothing unchanged is re-sent; a change made while down is picked up
    calls = len(rpc.embed.calls)
    w2 = _watcher(rpc, tmp, [f"generic:{root}"], exclude=["drafts/**"])
    await w2.start()
    await asyncio.wait_for(w2.wait_scanned(), 10)
    assert w2.stats.ingested == 0 and w2.stats.deleted == 0 and w2.stats.unchanged == 0
    assert len(rpc.embed.calls) == calls
    (root / "new.md").write_text("fresh note\n")
    await w2.scan_once(force=True)
    assert w2.stats.ingested == 1 and str(root / "new.md") in await _docs(rpc)
    await w2.close()

    # a root no longer configured: its documents are deleted; a missing root keeps them
    w3 = _watcher(rpc, tmp, [f"generic:{tmp / 'unmounted'}"])
    await w3.start()
    await asyncio.wait_for(w3.wait_scanned(), 10)
    assert await _docs(rpc) == {}
    await w3.close()


async def test_missing_root_keeps_documents(env: tuple[Rpc, Path]) -> None:
    rpc, tmp = env
    root = tmp / "vault"
    root.mkdir()
    (root / "a.md").write_text("some note #tag\n")
    w = _watcher(rpc, tmp, [f"obsidian:{root}"])
    await w.scan_once()
    assert set(await _docs(rpc)) == {str(root / "a.md")}
    (root / "a.md").rename(tmp / "a.md")
    root.rmdir()  # the whole root vanished (unmounted): keep its documents
    await w.scan_once(force=True)
    assert set(await _docs(rpc)) == {str(root / "a.md")}
    assert w.states()["authored_watcher"].reason.startswith("root ")


async def test_debounce(env: tuple[Rpc, Path]) -> None:
    rpc, tmp = env
    root = tmp / "notes"
    root.mkdir()
    now = [100.0]
    (root / "a.md").write_text("being written\n")
    written_ns = (root / "a.md").stat().st_mtime_ns
    w = _watcher(
        rpc,
        tmp,
        [str(root)],
        debounce_ms=300,
        clock=lambda: now[0],
        wall_clock_ns=lambda: written_ns + 1,  # the first poll sees it 1 ns old
    )
    await w.scan_once()
    assert w.stats.ingested == 0  # just written: wait until it is stable
    now[0] += 0.2
    await w.scan_once()
    assert w.stats.ingested == 0  # unchanged, but not for long enough yet
    now[0] += 0.15
    await w.scan_once()
    assert w.stats.ingested == 1


@pytest.mark.sqlite_only("no store: the watcher's file handling alone")
def test_a_file_swapped_for_an_outside_symlink_after_the_walk_is_not_read(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    outside = tmp_path / "secret.md"
    outside.write_text("- the outside rule\n")
    note = root / "note.md"
    note.write_text("- an inside rule\n")
    real_root = os.path.realpath(root)
    data, _ = _read_hash(str(note), real_root)
    assert data == b"- an inside rule\n"
    note.unlink()
    os.symlink(outside, note)  # swapped between the walk and the read
    with pytest.raises(OutsideRoot):
        _read_hash(str(note), real_root)
    inside = root / "inside.md"
    inside.write_text("- linked rule\n")
    note.unlink()
    os.symlink(inside, note)  # a symlink that stays inside the root is still read
    assert _read_hash(str(note), real_root)[0] == b"- linked rule\n"
