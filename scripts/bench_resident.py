"""Resident memory of the real daemon through large ingests, with and without the memory
tuning (sidecar/allocator.py: onnxruntime arenas off, glibc returning large blocks), side
by side in one run: each mode starts its own daemon on an empty data directory, ingests
three sessions of 200 messages of about 5 KB and reports resident memory after each.
``run(quick)`` returns ``{metric, value, target, verdict}`` rows (``make bench``)."""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scripts.stress.common import Client, rss_mb  # noqa: E402
from scripts.stress.crash import WORDS  # noqa: E402
from tests.support import start_daemon  # noqa: E402


def _measure(tuned: bool, rounds: int, messages: int) -> dict[str, float]:
    rng = random.Random(1)
    env = {} if tuned else {"LIBRAVDB_MEMORY_TUNING": "off"}
    with tempfile.TemporaryDirectory() as tmp:
        d = start_daemon(Path(tmp), "--tcp", "127.0.0.1:0", env_extra=env)
        try:
            c = Client(d.endpoint, timeout=600)
            c.result(
                "ingest",
                {"sessionId": "warm", "messages": [{"role": "user", "content": "warm up"}]},
            )
            time.sleep(1)
            out = {"start": rss_mb(d.proc.pid)}
            took = 0.0
            for r in range(rounds):
                msgs = [
                    {
                        "role": "user" if i % 2 == 0 else "assistant",
                        "content": " ".join(rng.choice(WORDS) for _ in range(800)),
                    }
                    for i in range(messages)
                ]
                t0 = time.perf_counter()
                c.result("ingest", {"sessionId": f"s{r}", "messages": msgs})
                took += time.perf_counter() - t0
                out[f"after {r + 1}"] = rss_mb(d.proc.pid)
            time.sleep(3)
            out["settled"] = rss_mb(d.proc.pid)
            out["ingest s"] = took
            c.close()
        finally:
            d.stop()
    return out


def run(quick: bool = False) -> list[dict[str, str]]:
    rounds, messages = (2, 100) if quick else (3, 200)
    tuned = _measure(True, rounds, messages)
    untuned = _measure(False, rounds, messages)
    rows = []
    for name, m in (("tuned (default)", tuned), ("LIBRAVDB_MEMORY_TUNING=off", untuned)):
        grown = m["settled"] - m["start"]
        rows.append(
            {
                "metric": f"{name}: resident MB at start / after each ingest / settled",
                "value": " / ".join(f"{m[k]:.0f}" for k in m if k != "ingest s"),
            }
        )
        rows.append(
            {
                "metric": f"{name}: growth over {rounds} x {messages} messages of ~5 KB",
                "value": f"{grown:.0f} MB",
                "target": "≤ 100 MB" if name.startswith("tuned") else "",
                "verdict": ("met" if grown <= 100 else "missed")
                if name.startswith("tuned")
                else "",
            }
        )
        rows.append({"metric": f"{name}: ingest time", "value": f"{m['ingest s']:.1f} s"})
    ratio = tuned["ingest s"] / untuned["ingest s"]
    rows.append({"metric": "ingest time tuned / untuned (same run)", "value": f"{ratio:.2f}"})
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row)
