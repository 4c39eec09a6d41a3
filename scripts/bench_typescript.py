"""`make bench` section "typescript": the OpenClaw plugin against the real daemon, side by
side in one run (host_clients/typescript/bench/typescript-bench.ts does the measuring):

* `assemble` p50 through the plugin (engine.assemble, Unix socket) against the daemon's own
  p50 for the same calls (its dispatcher's timing, request decoded to reply encoded), and a
  bare client round trip; target: plugin within 1.2x of the daemon's own.
* one host turn (recall, then commit the turn) through the plugin, and through the
  reference plugin's v1 call sequence (history, five searches, access counts; then
  insert, index, gating and durable insert of the user turn, insert of the reply), replayed
  with the same client: the reference package is not installable here: RPCs and ms per turn.

``run(quick)`` returns ``{metric, value, unit?, target?, verdict?}`` rows.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TS = REPO / "host_clients" / "typescript"


def _measure(rounds: int) -> dict[str, Any]:
    npm = shutil.which("npm")
    node = shutil.which("node")
    if npm is None or node is None:
        raise ModuleNotFoundError("node and npm are needed for the typescript section")
    subprocess.run([npm, "run", "--silent", "build:test"], cwd=TS, check=True)
    out = subprocess.run(
        [node, "build/bench/typescript-bench.js", str(rounds)],
        cwd=TS,
        check=True,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run(quick: bool = False) -> list[dict[str, object]]:
    m = _measure(60 if quick else 300)
    ratio = m["pluginP50"] / m["servedP50"] if m["servedP50"] else float("inf")
    return [
        {
            "metric": "daemon's own assemble p50 (dispatcher)",
            "value": f"{m['servedP50']:.2f}",
            "unit": "ms",
        },
        {
            "metric": "bare client assemble round trip p50",
            "value": f"{m['bareP50']:.2f}",
            "unit": "ms",
        },
        {
            "metric": "plugin engine.assemble round trip p50 / p95",
            "value": f"{m['pluginP50']:.2f} / {m['pluginP95']:.2f}",
            "unit": "ms",
        },
        {
            "metric": "plugin p50 / daemon's own p50",
            "value": f"{ratio:.2f}",
            "target": "<= 1.2",
            "ok": ratio <= 1.2,
        },
        {
            "metric": "one query embedding p50 (same run)",
            "value": f"{m['embedP50']:.2f}",
            "unit": "ms",
        },
        {
            "metric": "host turn, plugin: RPCs / ms per turn",
            "value": f"{m['oursCalls']:.1f} / {m['oursMsPerTurn']:.1f}",
        },
        {
            "metric": "host turn, reference v1 sequence: RPCs / ms per turn",
            "value": f"{m['refCalls']:.1f} / {m['refMsPerTurn']:.1f}",
        },
        {
            "metric": "rounds / turns measured",
            "value": f"{m['rounds']} / {m['turns']}",
        },
    ]
