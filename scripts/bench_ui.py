"""``libravdb ui`` page loads on a 100,000-memory store.

Target: page loads p50 <= 150 ms, over every page of the memory browser, on a store of
100,000 durable memories (``--quick``: 20,000).

The data is ``bench_assemble``'s: the durable memories (with their ``turns:`` and
``session_raw:`` copies, 300,000 records in all, in 1,000 earlier sessions) are written
offline with the daemon's own store and embedder, then a live session of 400 turns goes
through ``ingest`` and is compacted (so the Sessions page has a summary DAG to show), and
a few authored documents through ``authored.ingest``. The daemon serves the Unix socket;
``libravdb ui`` runs as its own process against it, as a user would start it.

Timed: one HTTP request per page load (the HTML page; its two static files are a few
hundred bytes served from memory), on one keep-alive connection, with the session cookie,
once the daemon is idle, pages interleaved round by round, twice: as a person browses
(the UI keeps the answers of whole-namespace reads for 30 s, ``sidecar/ui/cache.py``) and
as first loads (every page with its Refresh parameter, so every read goes to the daemon:
``memory.list``, ``sessions.list`` and ``memory.stats`` read the store's time indexes,
docs/store.md "Listing by time"). The pages: the Memories list
(first page and a later page by cursor), a search (distinct queries), a filtered list
(scope, session, time range), one memory with its versions, the Sessions list, one session
(timeline and DAG), a summary's expansion (the fragment ui.js loads), the Why form, a Why
answer (``assemble`` with ``explain``; distinct prompts), and the Overview
(``memory.stats``, authored rules, health and status). ``run(quick)`` returns
``{metric, value, target, verdict}`` rows.
"""

from __future__ import annotations

import asyncio
import http.client
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote, urlencode

REPO = Path(__file__).resolve().parent.parent
for _p in (REPO, REPO / "host_clients" / "python"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from scripts import bench_assemble as seeding  # noqa: E402
from sidecar.ui.cache import TTL_S  # noqa: E402

NS = seeding.NS
LIVE = "ui-live"
TARGET_MS = 150.0
WARM = 3
LIVE_TURNS = 400
AUTHORED_NODES = 40


def _row(metric: str, value: str, target: str = "", verdict: str = "") -> dict[str, str]:
    return {"metric": metric, "value": value, "target": target, "verdict": verdict}


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


class Browser:
    """One keep-alive HTTP connection with the UI's session cookie."""

    def __init__(self, url: str) -> None:
        base, _, token = url.partition("/login?token=")
        self.host, port = base.removeprefix("http://").rsplit(":", 1)
        self.port = int(port)
        self.origin = base
        self.cookie = f"libravdb_ui_{self.port}={token}"
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)

    def load(self, method: str, path: str, body: str = "") -> tuple[int, str, float]:
        headers = {"Host": f"{self.host}:{self.port}", "Cookie": self.cookie}
        if body:
            headers["Origin"] = self.origin
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        started = time.perf_counter()
        self.conn.request(method, path, body=body.encode() or None, headers=headers)
        reply = self.conn.getresponse()
        text = reply.read().decode()
        return reply.status, text, (time.perf_counter() - started) * 1000


def _start_ui(tmp: Path, endpoint: str) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIBRAVDB_")}
    env["HOME"] = str(tmp)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sidecar",
            "ui",
            "--endpoint",
            endpoint,
            "--namespace",
            NS,
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=REPO,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise RuntimeError(f"libravdb ui did not start: {url!r}")
    return proc, url


def _seed_live(endpoint: str) -> dict[str, object]:
    from libravdb_client import Client

    with Client.connect(endpoint, timeout=600) as client:
        now = int(time.time() * 1000)
        turns = seeding.live_session(LIVE_TURNS, seed=41)
        msgs = [
            {
                "id": f"ui-{i:04d}",
                "role": role,
                "content": text,
                "ts": now - (len(turns) - i) * 60_000,
            }
            for i, (role, text) in enumerate(turns)
        ]
        client.call("ingest", {"sessionId": LIVE, "namespace": NS, "messages": msgs})
        compacted = client.call("compact", {"sessionId": LIVE, "targetSize": 8})
        for doc, text, core in seeding.authored_docs(AUTHORED_NODES):
            client.call("authored.ingest", {"sourceDoc": doc, "text": text, "core": core})
        summaries = client.call(
            "memory.list", {"namespace": NS, "sessionId": LIVE, "scope": "summary", "limit": 500}
        )["records"]
        durable = int(client.call("status")["records"]["memories"])
    top = max(summaries, key=lambda r: int(r["metadata"].get("level", 1)))
    return {
        "summaries": len(summaries),
        "new": len(compacted["summaryIds"]),
        "durable": durable,
        "top": top["id"],
    }


def _pages(browser: Browser, live: dict[str, object], n: int) -> list[tuple[str, str, str, object]]:
    """(name, method, path, body or a callable of the round giving one)."""
    status, first, _ = browser.load("GET", "/")
    assert status == 200, first
    cursor = re.search(r'href="/\?cursor=([^&"]+)&amp;o=50"', first)
    assert cursor is not None, "no next page on the Memories list"
    record = re.search(r'href="/memory\?c=([^&"]+)&amp;id=([^&"]+)"', first)
    assert record is not None
    _, why, _ = browser.load("GET", "/why")
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', why)
    assert csrf is not None
    queries = seeding.prompts(2 * n + 20, seed=29)
    filtered = urlencode(
        {"scope": "history", "session": "hist-0420", "since": "2000-01-01", "until": "2999-12-31"}
    )
    summary = quote(str(live["top"]), safe="")
    return [
        ("Memories (first page)", "GET", "/", ""),
        ("Memories (a later page)", "GET", f"/?cursor={cursor.group(1)}&o=50", ""),
        ("Memories: search", "GET", "search", lambda i: "/?" + urlencode({"q": queries[i]})),
        ("Memories: filtered list", "GET", f"/?{filtered}", ""),
        (
            "one memory and its versions",
            "GET",
            f"/memory?c={record.group(1)}&id={record.group(2)}",
            "",
        ),
        ("Sessions", "GET", "/sessions", ""),
        ("one session: timeline and DAG", "GET", f"/sessions/{LIVE}", ""),
        ("a summary's expansion", "GET", f"/sessions/{LIVE}/expand/{summary}", ""),
        ("Why (the form)", "GET", "/why", ""),
        (
            "Why (an answer)",
            "POST",
            "/why",
            lambda i: urlencode(
                {
                    "prompt": queries[n + i],
                    "session": LIVE,
                    "budget": "4000",
                    "fraction": "0.25",
                    "csrf": csrf.group(1),
                    "ns": NS,
                }
            ),
        ),
        ("Overview", "GET", "/overview", ""),
    ]


def _measure(
    browser: Browser, pages: list[tuple[str, str, str, object]], rounds: int, *, fresh: bool
) -> dict[str, list[float]]:
    """``rounds`` loads of every page, interleaved; ``fresh`` bypasses the UI's cache of
    whole-namespace reads (each page's Refresh link), so every load asks the daemon."""
    times: dict[str, list[float]] = {name: [] for name, *_ in pages}
    for i in range(WARM + rounds):
        for name, method, path, body in pages:
            payload = ""
            if callable(body):
                if method == "GET":
                    path = body(i)
                else:
                    payload = body(i)
            if fresh:
                path += ("&" if "?" in path else "?") + "fresh=1"
            status, text, ms = browser.load(method, path, payload)
            assert status == 200, f"{name}: {status} {text[:300]}"
            if i >= WARM:
                times[name].append(ms)
    return times


def _bench(quick: bool, data: Path | None) -> list[dict[str, str]]:
    n_mem = 20_000 if quick else 100_000
    n_base = 1_000 if quick else 4_000
    rounds = 20 if quick else 40
    cold_rounds = 5 if quick else 10
    tmp = Path(tempfile.mkdtemp(prefix="bench-ui-"))
    try:
        data_dir = data or tmp / "data"
        seed_s = 0.0
        if data is None or not (data / "store.sqlite3").exists():
            t0 = time.perf_counter()
            asyncio.run(seeding._seed_offline(data_dir, n_mem, n_base))
            seed_s = time.perf_counter() - t0
        proc, endpoint = seeding._spawn(tmp, data_dir)
        try:
            live = _seed_live(endpoint) if seed_s else _live_of(endpoint)
            idle_s = seeding._wait_idle(proc.pid)
            ui, url = _start_ui(tmp, endpoint)
            try:
                browser = Browser(url)
                pages = _pages(browser, live, 2 * WARM + rounds + cold_rounds)
                times = _measure(browser, pages, rounds, fresh=False)
                cold = _measure(browser, pages, cold_rounds, fresh=True)
            finally:
                ui.terminate()
                ui.wait(30)
        finally:
            seeding.stop(proc, 60)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    every = [ms for samples in times.values() for ms in samples]
    first = [ms for samples in cold.values() for ms in samples]
    p50, cold_p50 = _pct(every, 0.5), _pct(first, 0.5)
    described = (
        f"data: {live['durable']:,} durable memories in user:{NS} (each with its turns: and "
        f"session_raw: copies, written offline), a live session of {LIVE_TURNS} turns via "
        f"ingest ({live['summaries']} summaries after compact), {AUTHORED_NODES} authored "
        "nodes; one HTTP keep-alive connection with the session cookie"
    )
    seeded = f"{seed_s:.0f} / {idle_s:.0f} s" if seed_s else f"(reused) / {idle_s:.0f} s"
    rows = [
        _row(described, ""),
        _row("seeding (offline write and index build, live session) / idle wait", seeded),
        _row(
            f"page load p50, every page, as browsed ({len(every)} loads: {len(pages)} pages x "
            f"{rounds} rounds; whole-namespace reads kept {TTL_S:g} s by the UI)",
            f"{p50:.1f} ms",
            f"<= {TARGET_MS:g} ms",
            "met" if p50 <= TARGET_MS else "missed",
        ),
        _row("page load p95, every page, as browsed", f"{_pct(every, 0.95):.1f} ms"),
        _row(
            f"page load p50, every page, first load (Refresh: every read from the daemon; "
            f"{len(first)} loads)",
            f"{cold_p50:.1f} ms",
            f"<= {TARGET_MS:g} ms",
            "met" if cold_p50 <= TARGET_MS else "missed",
        ),
    ]
    for name, samples in times.items():
        rows.append(
            _row(
                f"{name}: p50 / p95 as browsed; p50 first load",
                f"{_pct(samples, 0.5):.1f} / {_pct(samples, 0.95):.1f}; "
                f"{_pct(cold[name], 0.5):.1f} ms",
            )
        )
    return rows


def _live_of(endpoint: str) -> dict[str, object]:
    """What ``_seed_live`` wrote, read back from a kept data directory."""
    from libravdb_client import Client

    with Client.connect(endpoint, timeout=600) as client:
        summaries = client.call(
            "memory.list", {"namespace": NS, "sessionId": LIVE, "scope": "summary", "limit": 500}
        )["records"]
        durable = int(client.call("status")["records"]["memories"])
    top = max(summaries, key=lambda r: int(r["metadata"].get("level", 1)))
    return {"summaries": len(summaries), "durable": durable, "top": top["id"]}


def run(quick: bool = False) -> list[dict[str, str]]:
    keep = os.environ.get("BENCH_UI_DATA")  # a data directory to seed once and reuse
    return _bench(quick, Path(keep) if keep else None)


def main(argv: list[str] | None = None) -> int:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    start = time.perf_counter()
    for r in run(quick=quick):
        print(f"{r['metric']}  |  {r['value']}  |  {r['target']}  |  {r['verdict']}")
    print(f"({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
