"""Memory benchmarks: batch ingest throughput against the embedder's own batch throughput
(measured in the same run, same texts), and compaction latency of a 200-turn session with
the extractive summarizer.

Runs the daemon's real services in-process (MiniLM embedder, SQLite+HNSW store in a
temporary directory). ``run(quick)`` returns ``{metric, value, target, verdict}`` rows.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

TOPICS = [
    "We planted tomatoes and basil in the raised bed near the fence",
    "The PostgreSQL migration failed with a lock timeout on the orders table",
    "My sister is visiting Lisbon in March for the architecture conference",
    "The invoice for the roof repair came to 2,400 euros including scaffolding",
    "I switched the build from webpack to esbuild and it is five times faster",
    "The dog needs his vaccination at the vet on the second of April",
    "Please keep answers short and always cite the source document",
    "The quarterly report is due on Friday and still needs the revenue chart",
]


def _texts(n: int, salt: str) -> list[str]:
    return [f"{TOPICS[i % len(TOPICS)]} ({salt} note {i}, item {i * 7 % 13})" for i in range(n)]


def _row(metric: str, value: str, target: str = "", verdict: str = "") -> dict[str, str]:
    return {"metric": metric, "value": value, "target": target, "verdict": verdict}


async def _bench(quick: bool) -> list[dict[str, str]]:
    from sidecar.app import App
    from sidecar.config import load_settings
    from sidecar.engines import EngineHub
    from sidecar.memory.compaction.compactor import CompactionOptions
    from sidecar.memory.ingest.sessions import MessageIn
    from sidecar.memory.service import MemoryService
    from sidecar.services import install_services

    rows: list[dict[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(
            flags={
                "data_dir": str(Path(tmp) / "data"),
                "summarizer.backend": "extractive",
                "compaction.auto": False,
            },
            env={},
        )
        app = App(settings)
        install_services(app)
        await app.start()
        try:
            mem = app.service(MemoryService)
            emb = app.service(EngineHub).require_embedder()
            await emb.embed(["warm up"], "document")
            await mem.ingest("warm", [MessageIn("user", "warm up the store", "w0", 1)])

            n = 1000
            reps = 2 if quick else 3
            t_raw: list[float] = []
            t_ing: list[float] = []
            for r in range(reps):  # interleaved so machine noise hits both alike
                texts = _texts(n, f"raw{r}")
                s = time.perf_counter()
                await emb.embed(texts, "document")
                t_raw.append(time.perf_counter() - s)
                texts = _texts(n, f"ing{r}")
                msgs = [
                    MessageIn("user" if i % 2 == 0 else "assistant", t, f"m{i:05d}", 1000 + i)
                    for i, t in enumerate(texts)
                ]
                s = time.perf_counter()
                out = await mem.ingest(f"bench-ingest-{r}", msgs, user_id=f"bench{r}")
                t_ing.append(time.perf_counter() - s)
                assert out.ingested == n
            raw_tps = n / statistics.median(t_raw)
            ing_tps = n / statistics.median(t_ing)
            ratio = ing_tps / raw_tps
            rows.append(_row("memory: embedder raw batch, 1000 texts", f"{raw_tps:.0f} texts/s"))
            rows.append(_row("memory: batch ingest 1000 turns", f"{ing_tps:.0f} turns/s"))
            rows.append(
                _row(
                    "memory: ingest / raw embed throughput",
                    f"{ratio * 100:.0f} %",
                    ">= 80 %",
                    "met" if ratio >= 0.80 else "missed",
                )
            )

            t_comp: list[float] = []
            covered = 0
            for r in range(reps):
                sid = f"bench-compact-{r}"
                texts = _texts(200, f"c{r}")
                msgs = [
                    MessageIn("user" if i % 2 == 0 else "assistant", t, f"c{i:04d}", 5000 + i)
                    for i, t in enumerate(texts)
                ]
                await mem.ingest(sid, msgs, user_id=f"bench-c{r}")
                s = time.perf_counter()
                res = await mem.compact(sid, CompactionOptions.from_settings(settings))
                t_comp.append(time.perf_counter() - s)
                assert res.did_compact
                covered = res.turns_covered
            t = statistics.median(t_comp)
            rows.append(
                _row(
                    f"memory: compact 200-turn session, extractive ({covered} turns covered)",
                    f"{t * 1000:.0f} ms",
                    "<= 1000 ms",
                    "met" if t <= 1.0 else "missed",
                )
            )
        finally:
            await app.close()
    return rows


def run(quick: bool = False) -> list[dict[str, str]]:
    return asyncio.run(_bench(quick))


def main(argv: list[str] | None = None) -> int:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    start = time.perf_counter()
    rows = run(quick=quick)
    width = max(len(r["metric"]) for r in rows)
    for r in rows:
        print(f"{r['metric']:<{width}}  {r['value']:>14}  {r['target']:>10}  {r['verdict']}")
    print(f"({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
