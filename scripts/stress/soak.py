"""Load and soak: many clients for minutes on a fixed data set (reads and idempotent
re-ingests only, so the data does not grow). Figures: errors, p50/p95 per method and
resident memory over time; the promise is no error and under 2 % growth in the last
minute (the last fifth of a shorter run). A few requests name a session of another
namespace (a v2 one, or one the published plugin wrote through v1): each must be refused
with -32012 while the owners' ingests run beside it. A few forget by a query that matches
nothing stored (and must delete nothing, however often they are retried) or name a shared
``global`` record (refused with -32009, the record kept)."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

from scripts.stress.common import Client, Report, daemon, now_ms, percentile, rss_mb

TOPICS = [
    "my sister's wedding in Lisbon next June",
    "the kubernetes migration and the flaky staging cluster",
    "training for a half marathon with a sore knee",
    "a vegetarian lasagna recipe with spinach",
    "the book club reading Middlemarch",
    "switching the team from Jenkins to GitHub Actions",
    "planting tomatoes and basil on the balcony",
    "learning Portuguese before the trip",
]


def _sessions(n_sessions: int, turns: int) -> list[tuple[str, list[dict[str, str]]]]:
    rng = random.Random(3)
    out = []
    for s in range(n_sessions):
        msgs = []
        for i in range(turns):
            topic = rng.choice(TOPICS)
            role = "user" if i % 2 == 0 else "assistant"
            text = f"({s}.{i}) About {topic}: " + rng.choice(
                [
                    "I think we should start early.",
                    "That sounds right to me.",
                    "Remind me of this next week.",
                    "I prefer doing it on Saturdays.",
                ]
            )
            msgs.append({"role": role, "content": text, "id": f"soak-{s}-{i}"})
        out.append((f"soak-s{s}", msgs))
    return out


# Forget requests that match nothing of TOPICS: a query forget must delete nothing.
UNRELATED = ["my cat's name", "my blood type", "my bank PIN", "my passport number", "hello"]
SHARED_RECORD = {"collection": "global", "id": "soak-shared"}
REFUSED = -32009


# A session the published plugin wrote (v1 insert_session_turn, its namespace as userId).
V1_SESSION, V1_OWNER = "soak-v1", "ns-v1"
WRONG_NAMESPACE = -32012
_LABELS = {WRONG_NAMESPACE: " (another namespace)", REFUSED: " (shared record)"}


def _seed_v1(client: Client) -> None:
    for i, text in enumerate(["my locker code is 4417", "Noted, locker 4417."]):
        meta = {"role": ("user", "assistant")[i], "userId": V1_OWNER, "sessionId": V1_SESSION}
        turn = {"sessionId": V1_SESSION, "id": f"{V1_SESSION}:{i}", "text": text, "metadata": meta}
        client.result("insert_session_turn", turn)


def _intruder_call(rng: random.Random, sid: str) -> tuple[str, dict[str, Any]]:
    """A request naming ``sid`` (or the v1 session) from another namespace."""
    ns = f"ns{(int(sid[-1]) + 1) % 8}"  # the next session's namespace
    if rng.random() < 0.5:
        sid = V1_SESSION
    msgs = [{"role": "user", "content": "not my session", "id": "intruder"}]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("assemble", {"sessionId": sid, "namespace": ns, "tokenBudget": 900}),
        ("search", {"query": "locker", "sessionId": sid, "namespace": ns}),
        ("ingest", {"sessionId": sid, "namespace": ns, "messages": msgs}),
        ("memory.list", {"sessionId": sid, "namespace": ns, "scope": "history"}),
    ]
    return rng.choice(calls)


def _pick_call(
    rng: random.Random, data: list[tuple[str, list[dict[str, Any]]]], n: int
) -> tuple[str, dict[str, Any], int | None]:
    """The ``n``-th request of a client and the error it must get (None: none): 35 %
    assemble, 25 % search, 15 % ingest, 10 % v1 search, 8 % list, 2 % forget by an
    unrelated query, about 2 % requests on another namespace's session (refused; so are a
    client's first two, so a short run has some) and 1 % forgets of the shared record
    (refused; so is a client's fourth request); status the rest."""
    method, params = _mixed_call(rng, data)
    if n < 2 or (method == "status" and rng.random() < 0.4):
        return (*_intruder_call(rng, str(rng.choice(data)[0])), WRONG_NAMESPACE)
    if n == 2:  # every client forgets by an unrelated query once, so a short run has some
        ns = f"ns{rng.randrange(8)}"
        return "forget", {"namespace": ns, "query": rng.choice(UNRELATED), "limit": 50}, None
    if n == 3 or (method == "status" and rng.random() < 0.3):
        return "forget", {"namespace": f"ns{rng.randrange(8)}", "records": [SHARED_RECORD]}, REFUSED
    return method, params, None


def _broke_a_promise(method: str, reply: dict[str, Any]) -> str:
    """What a successful reply broke (a query forget that deleted something), or ""."""
    deleted = reply.get("result", {}).get("deleted", 0) if method == "forget" else 0
    return f"forget by an unrelated query deleted {deleted} record(s)" if deleted else ""


def _mixed_call(
    rng: random.Random, data: list[tuple[str, list[dict[str, Any]]]]
) -> tuple[str, dict[str, Any]]:
    sid, msgs = rng.choice(data)
    ns = f"ns{sid[-1]}"
    r = rng.random()
    if r < 0.35:
        return "assemble", {
            "sessionId": sid,
            "namespace": ns,
            "tokenBudget": 3000,
            "prompt": rng.choice(TOPICS),
            "messages": msgs[-4:],
        }
    if r < 0.6:
        return "search", {"query": rng.choice(TOPICS), "namespace": ns}
    if r < 0.75:
        cut = rng.randrange(0, len(msgs) - 4)
        return "ingest", {"sessionId": sid, "namespace": ns, "messages": msgs[cut : cut + 4]}
    if r < 0.85:
        return "search_text", {"collection": f"turns:{ns}", "text": rng.choice(TOPICS), "k": 5}
    if r < 0.93:
        return "list_collection", {"collection": f"session_raw:{sid}"}
    if r < 0.95:
        return "forget", {"namespace": ns, "query": rng.choice(UNRELATED), "limit": 50}
    return "status", {}


def run_soak(tmp: Path, clients: int = 16, seconds: float = 300, sample_s: float = 5.0) -> Report:
    report = Report("soak")
    data = _sessions(8, 40)
    lat: dict[str, list[float]] = {}
    errors: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    with daemon(tmp, tmp / "data") as d:
        setup = Client(d.endpoint)
        for sid, msgs in data:
            setup.result(
                "ingest", {"sessionId": sid, "namespace": f"ns{sid[-1]}", "messages": msgs}
            )
        setup.result("compact", {"sessionId": data[0][0], "force": True})
        _seed_v1(setup)
        setup.result("insert_text", {**SHARED_RECORD, "text": "The office wifi is blue-otter"})
        setup.close()

        def worker(k: int) -> None:
            rng = random.Random(k)
            c = Client(d.endpoint)
            try:
                n = 0
                while not stop.is_set():
                    method, params, expected = _pick_call(rng, data, n)
                    n += 1
                    t0 = now_ms()
                    reply = c.call(method, params)
                    took = now_ms() - t0
                    code = reply.get("error", {}).get("code")
                    key = method + (_LABELS.get(expected, "") if expected is not None else "")
                    with lock:
                        lat.setdefault(key, []).append(took)
                        if code != expected:
                            errors.append(f"{key}: {reply.get('error', 'no error')}")
                        elif broken := _broke_a_promise(method, reply):
                            errors.append(f"{key}: {broken}")
            except Exception as exc:
                with lock:
                    errors.append(f"client {k}: {exc!r}")
            finally:
                c.close()

        def shared_record_kept() -> None:
            c = Client(d.endpoint)
            try:
                kept = c.result("list_collection", {"collection": SHARED_RECORD["collection"]})
                if not any(r["id"] == SHARED_RECORD["id"] for r in kept["results"]):
                    errors.append("a namespace's forget deleted the shared global record")
            finally:
                c.close()

        threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(clients)]
        started = time.monotonic()
        samples: list[tuple[float, float]] = [(0.0, rss_mb(d.proc.pid))]
        for t in threads:
            t.start()
        while (elapsed := time.monotonic() - started) < seconds:
            time.sleep(min(sample_s, max(0.05, seconds - elapsed)))
            samples.append((time.monotonic() - started, rss_mb(d.proc.pid)))
        stop.set()
        for t in threads:
            t.join(60)
        shared_record_kept()
    window = min(60.0, seconds / 5)
    start_rss = next(r for t, r in samples if t >= seconds - window - 1e-9)
    end_rss = samples[-1][1]
    growth = (end_rss - start_rss) / start_rss * 100 if start_rss else 0.0
    for e in errors[:20]:
        report.fail(e)
    if growth >= 2.0:
        report.fail(f"resident memory grew {growth:.1f} % in the last {window:.0f} s")
    report.figures = {
        "clients": clients,
        "seconds": seconds,
        "requests": sum(len(v) for v in lat.values()),
        "errors": len(errors),
        "refused on another namespace's session": sum(
            len(v) for m, v in lat.items() if m.endswith("(another namespace)")
        ),
        "latency ms (p50 / p95)": {
            m: f"{percentile(v, 0.5):.1f} / {percentile(v, 0.95):.1f}"
            for m, v in sorted(lat.items())
        },
        "rss MB (every minute)": [round(r) for t, r in samples if int(t) % 60 < sample_s]
        + [round(end_rss)],
        "rss first / last MB": f"{samples[0][1]:.0f} / {end_rss:.0f}",
        f"growth in the last {window:.0f} s": f"{growth:.2f} %",
    }
    return report
