#!/usr/bin/env python3
"""Engine benchmarks (the ``engines`` section of ``make bench``).

``run(quick=False)`` returns rows ``{"metric", "value", "target", "verdict"}``:

* single-query embedding latency through the async API (p50, p95), target p50 <= 6 ms;
* batch throughput of the embedder vs raw onnxruntime on the same 32 texts (same model file,
  same session options; raw = one ``session.run`` on pre-tokenized, padded tensors, i.e.
  excluding tokenization and pooling), target >= 90 %;
* 8 concurrent single-text clients vs one client at a time, through the async API (micro-
  batching), target >= 2x;
* seq2seq decoder time per generated token with vs without the KV-cache decoder on the tiny T5
  fixture (510-token input, 64 new tokens, end-of-sequence disabled so both decode the same
  length; the encoder pass, identical on both paths, is excluded), target >= 3x.

Ratios are measured side by side in one run (interleaved repetitions, medians). Runs in well
under a minute; ``quick`` cuts the repetitions further.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sidecar.engines import Embedder, resolve_embedding  # noqa: E402
from sidecar.engines.seq2seq import Seq2SeqModel, spec_from_manifest  # noqa: E402

TINY_T5 = REPO / "tests" / "fixtures" / "tiny_t5"

QUERIES = [
    "how do I configure the memory daemon socket path?",
    "what did we decide about the retry policy",
    "remind me of my allergies",
    "latest notes about the release on friday",
    "which embedding model does the store use",
    "summarize yesterday's discussion about the migration plan",
    "who is on the search team",
    "where are the backups stored",
]

DOCS = [
    "The deployment is scheduled for Friday afternoon after the final review.",
    "Please do not use mutexes in the hot path; prefer channels or atomic counters.",
    "My name is Alex and I work on the search team with Sam and Kim.",
    "The build failed because a parser test timed out after ten seconds on the CI runner.",
    "We decided to retry failed requests three times with exponential backoff.",
    "The meeting moved to Monday morning at nine o'clock in the small room.",
    "The cache is cold after every restart, so the first queries are slow.",
    "Tomorrow we will review the database schema, the index layout and the backup plan, "
    "then decide whether the migration can start next week or has to wait for the audit.",
]


def _row(metric: str, value: str, target: str = "", ok: bool | None = None) -> dict[str, str]:
    verdict = "" if ok is None else ("met" if ok else "missed")
    return {"metric": metric, "value": value, "target": target, "verdict": verdict}


def _pct(samples: list[float], q: float) -> float:
    return float(np.percentile(np.array(samples), q))


# -- embedder ------------------------------------------------------------------------------------
async def _single_query_latency(emb: Embedder, n: int) -> list[float]:
    for q in QUERIES:  # warm-up
        await emb.embed([q], "query")
    out = []
    for i in range(n):
        start = time.perf_counter()
        await emb.embed([QUERIES[i % len(QUERIES)]], "query")
        out.append(time.perf_counter() - start)
    return out


def bench_single_query(emb: Embedder, quick: bool) -> list[dict[str, str]]:
    samples = asyncio.run(_single_query_latency(emb, 60 if quick else 200))
    p50, p95 = _pct(samples, 50) * 1e3, _pct(samples, 95) * 1e3
    return [
        _row("embed: single query p50 (async API)", f"{p50:.2f} ms", "≤ 6 ms", p50 <= 6.0),
        _row("embed: single query p95 (async API)", f"{p95:.2f} ms"),
    ]


def bench_batch_vs_raw(emb: Embedder, quick: bool) -> list[dict[str, str]]:
    texts = [DOCS[i % len(DOCS)] + f" (note {i})" for i in range(32)]
    spec = emb.spec
    with emb.slot.lease() as loaded:
        # the graph the embedder runs (int8 products when they are on), bare
        sess = loaded.session
        encs = loaded.tokenizer.encode_batch(texts)
    longest = max(len(e.ids) for e in encs)
    ids = np.zeros((len(texts), longest), dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, e in enumerate(encs):
        ids[i, : len(e.ids)] = e.ids
        mask[i, : len(e.ids)] = 1
    feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}

    def raw() -> None:
        sess.run([spec.output_name], feed)

    def ours() -> None:
        emb.embed_sync(texts, "document")

    raw()
    ours()
    reps = 5 if quick else 9
    t_raw: list[float] = []
    t_ours: list[float] = []
    for _ in range(reps):  # interleaved so machine noise hits both alike
        s = time.perf_counter()
        raw()
        t_raw.append(time.perf_counter() - s)
        s = time.perf_counter()
        ours()
        t_ours.append(time.perf_counter() - s)
    raw_tp = len(texts) / statistics.median(t_raw)
    our_tp = len(texts) / statistics.median(t_ours)
    ratio = our_tp / raw_tp
    return [
        _row("embed: batch of 32, raw onnxruntime", f"{raw_tp:.0f} texts/s"),
        _row("embed: batch of 32, embedder (tokenize+run+pool)", f"{our_tp:.0f} texts/s"),
        _row("embed: batch throughput vs raw onnxruntime", f"{ratio:.2f}x", "≥ 0.9x", ratio >= 0.9),
    ]


def bench_int8_vs_float(emb: Embedder, quick: bool) -> list[dict[str, str]]:
    """The same texts through int8 products (the default) and float products, interleaved."""
    exact = Embedder(emb.spec, int8_matmul=False, threads=emb.threads, lanes=emb.lanes)
    try:
        batch = [DOCS[i % len(DOCS)] + f" (note {i})" for i in range(32)]
        times: dict[str, dict[str, list[float]]] = {"int8": {}, "float": {}}
        for warm in (emb, exact):
            warm.embed_sync(batch, "document")
        for i in range(60 if quick else 200):
            q = [QUERIES[i % len(QUERIES)]]
            for name, e in (("int8", emb), ("float", exact))[:: 1 if i % 2 else -1]:
                s = time.perf_counter()
                e.embed_sync(q, "query")
                times[name].setdefault("query", []).append(time.perf_counter() - s)
                if i % 20 == 0:
                    s = time.perf_counter()
                    e.embed_sync(batch, "document")
                    times[name].setdefault("batch", []).append(time.perf_counter() - s)
        a = emb.embed_sync(batch + QUERIES, "document").vectors
        b = exact.embed_sync(batch + QUERIES, "document").vectors
        agree = (a * b).sum(axis=1).tolist()
    finally:
        exact.close()
    q8, qf = (statistics.median(times[n]["query"]) * 1e3 for n in ("int8", "float"))
    b8, bf = (len(batch) / statistics.median(times[n]["batch"]) for n in ("int8", "float"))
    return [
        _row("embed: single query p50, int8 / float products", f"{q8:.2f} / {qf:.2f} ms"),
        _row("embed: batch of 32, int8 / float products", f"{b8:.0f} / {bf:.0f} texts/s"),
        _row(
            "embed: int8 vs float vectors, min cosine",
            f"{min(agree):.5f}",
            "≥ 0.998",
            min(agree) >= 0.998,
        ),
    ]


async def _clients(emb: Embedder, clients: int, per_client: int) -> float:
    async def client(c: int) -> None:
        for i in range(per_client):
            await emb.embed([QUERIES[(c + i) % len(QUERIES)] + f" {c}"], "query")

    start = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    return clients * per_client / (time.perf_counter() - start)


def bench_concurrency(emb: Embedder, quick: bool) -> list[dict[str, str]]:
    total = 64 if quick else 160
    sequential: list[float] = []
    concurrent: list[float] = []
    batches = requests = 0
    for _ in range(2 if quick else 3):
        sequential.append(asyncio.run(_clients(emb, 1, total)))
        b0, r0 = emb.batcher.stats.batches, emb.batcher.stats.requests
        concurrent.append(asyncio.run(_clients(emb, 8, total // 8)))
        batches += emb.batcher.stats.batches - b0
        requests += emb.batcher.stats.requests - r0
    seq_tp, conc_tp = statistics.median(sequential), statistics.median(concurrent)
    ratio = conc_tp / seq_tp
    stats = emb.batcher.stats
    return [
        _row("embed: 1 client, one at a time", f"{seq_tp:.0f} req/s"),
        _row("embed: 8 concurrent single-text clients", f"{conc_tp:.0f} req/s"),
        _row("embed: 8 concurrent clients vs one at a time", f"{ratio:.2f}x", "≥ 2x", ratio >= 2.0),
        _row(
            "embed: requests per ONNX run with 8 clients",
            f"{requests / max(1, batches):.2f} (max {stats.max_requests_in_batch})",
        ),
    ]


# -- seq2seq -------------------------------------------------------------------------------------
def bench_kv_cache(quick: bool) -> list[dict[str, str]]:
    model = Seq2SeqModel(spec_from_manifest(TINY_T5 / "summarizer.json"), threads=1)
    if not model.kv_cache:
        return [_row("seq2seq: KV cache", "unavailable: " + model.kv_reason)]
    model.eos_id = -1  # decode the full length on both paths
    turns = [f"turn {i} the deploy runs on friday and the team will review it" for i in range(60)]
    prompt = model.build_prompt(turns)
    new_tokens = 32 if quick else 64

    def per_token(use_cache: bool) -> float:
        # Decoder steps only: the encoder pass is the same with or without the cache.
        gen = model.generate(prompt.ids, new_tokens, use_cache=use_cache)
        return gen.decode_seconds / gen.steps

    per_token(True)
    per_token(False)
    with_cache: list[float] = []
    without: list[float] = []
    for _ in range(2 if quick else 4):
        with_cache.append(per_token(True))
        without.append(per_token(False))
    kv, plain = statistics.median(with_cache), statistics.median(without)
    ratio = plain / kv
    return [
        _row(
            f"seq2seq tiny T5 ({len(prompt.ids)}-token input): per token without KV cache",
            f"{plain * 1e3:.2f} ms",
        ),
        _row("seq2seq tiny T5: per token with KV cache", f"{kv * 1e3:.2f} ms"),
        _row("seq2seq: KV-cache speed-up per token", f"{ratio:.2f}x", "≥ 3x", ratio >= 3.0),
    ]


def run(quick: bool = False) -> list[dict[str, str]]:
    emb = Embedder(resolve_embedding())
    try:
        emb.embed_sync(["warm up"])
        rows: list[dict[str, str]] = []
        rows += bench_single_query(emb, quick)
        rows += bench_batch_vs_raw(emb, quick)
        rows += bench_int8_vs_float(emb, quick)
        rows += bench_concurrency(emb, quick)
    finally:
        emb.close()
    rows += bench_kv_cache(quick)
    return rows


def main(argv: list[str] | None = None) -> int:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    start = time.perf_counter()
    rows = run(quick=quick)
    width = max(len(r["metric"]) for r in rows)
    for r in rows:
        print(f"{r['metric']:<{width}}  {r['value']:>14}  {r['target']:>8}  {r['verdict']}")
    print(f"({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
