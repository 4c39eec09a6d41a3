"""Authored rules follow their configuration.

Regression: rules ingested from a watched root that is no longer configured kept being
injected for every user after a restart with no roots.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support import REPO, RawConnection, daemon_env, start_daemon

RULE = "Always run the migration dry-run before deploying."


def _config(tmp: Path, root: Path | None) -> Path:
    path = tmp / ("with-root.toml" if root else "no-root.toml")
    lines = ["[authored]"]
    if root is not None:
        lines += [f'roots = ["generic:{root}"]', 'core_globs = ["rules/**"]']
    path.write_text("\n".join(lines) + "\n")
    return path


def _documents(conn: RawConnection) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = conn.call("authored.list", {})["result"]["documents"]
    return docs


def _wait_for_documents(conn: RawConnection, n: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        docs = _documents(conn)
        if len(docs) >= n:
            return docs
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} authored documents after 60 s")


def _assemble(conn: RawConnection) -> str:
    result = conn.call(
        "assemble",
        {"sessionId": "x", "userId": "u", "prompt": "how do we deploy?", "tokenBudget": 8000},
    )["result"]
    addition: str = result["systemPromptAddition"]
    return addition


def test_documents_of_a_removed_root_are_retired_at_start(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    (root / "rules").mkdir(parents=True)
    (root / "rules" / "deploy.md").write_text(f"# Deploying\n\n- {RULE}\n")
    daemon = start_daemon(
        tmp_path, "--tcp", "127.0.0.1:0", extra_args=("--config", str(_config(tmp_path, root)))
    )
    try:
        with RawConnection(daemon.endpoint) as conn:
            docs = _wait_for_documents(conn, 1)
            assert docs[0]["watched"] is True and docs[0]["root"] == str(root)
            assert docs[0]["core"] is True and docs[0]["hard"] >= 1
            direct = conn.call(
                "authored.ingest", {"sourceDoc": "direct.md", "text": "- Be kind in reviews.\n"}
            )
            assert "error" not in direct
            assert RULE in _assemble(conn)
    finally:
        daemon.stop()

    again = start_daemon(
        tmp_path, "--tcp", "127.0.0.1:0", extra_args=("--config", str(_config(tmp_path, None)))
    )
    try:
        with RawConnection(again.endpoint) as conn:
            docs = _documents(conn)
            assert [d["sourceDoc"] for d in docs] == ["direct.md"]  # never watched: kept
            assert RULE not in _assemble(conn)
            listing = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "from sidecar.cli import tool_main; raise SystemExit(tool_main())",
                    "authored",
                    "list",
                    "--endpoint",
                    again.endpoint,
                ],
                capture_output=True,
                text=True,
                cwd=REPO,
                env=daemon_env(tmp_path / "home"),
                timeout=60,
            )
    finally:
        again.stop()
    assert listing.returncode == 0, listing.stderr
    assert "direct.md" in listing.stdout and "authored.ingest" in listing.stdout
    assert "deploy.md" not in listing.stdout
    retired = [e for e in again.log_events() if e.get("event") == "authored.retired"]
    assert retired and retired[0]["documents"] == 1
