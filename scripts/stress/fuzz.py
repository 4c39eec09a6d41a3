"""Fuzz: generated frames against the real daemon, a ``health`` after every one.

A grammar fuzzer of our own (seeded, so a failure replays): frames typed from each
method's params with fields dropped, retyped and stretched, random JSON, raw byte
mutations of valid frames, deep nesting, huge and non-finite numbers, invalid UTF-8,
frames split across writes and batches, writes dated past the accepted range and the
statistics over them. Promise: no internal error (-32603), no reply
that is not JSON, no dropped connection, and ``health`` answers after every frame.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

from scripts.stress.common import Client, Report, daemon

SKIP = {"shutdown"}
TEXTS = ["I prefer green tea in the morning.", "deploy on fridays is banned", "ok", ""]

# A valid example of each method's params; the fuzzer derives the rest from these.
BASE: dict[str, dict[str, Any]] = {
    "ingest": {
        "sessionId": "fz-s1",
        "namespace": "fz",
        "messages": [{"role": "user", "content": "I prefer green tea.", "id": "fz-m1"}],
    },
    "assemble": {"sessionId": "fz-s1", "tokenBudget": 2000, "prompt": "what tea?"},
    "search": {"query": "tea", "namespace": "fz", "k": 5},
    "compact": {"sessionId": "fz-s1", "force": True},
    "expand": {"sessionId": "fz-s1", "summaryId": "x"},
    "forget": {"namespace": "fz-gone"},
    "embed": {"texts": ["hello"]},
    "summarize": {"texts": ["we met at noon", "it rained"]},
    "authored.ingest": {"sourceDoc": "fz.md", "text": "- always write tests\n"},
    "authored.delete": {"sourceDoc": "fz.md"},
    "authored.list": {},
    "insert_text": {"collection": "fz:v1", "id": "r1", "text": "fuzzed", "metadata": {}},
    "search_text": {"collection": "fz:v1", "text": "fuzzed", "k": 3},
    "search_text_collections": {"collections": ["fz:v1"], "text": "x", "k": 3},
    "list_collection": {"collection": "fz:v1"},
    "list_by_meta": {"collection": "fz:v1", "key": "a", "value": "b"},
    "delete": {"collection": "fz:v1", "id": "r9"},
    "delete_batch": {"collection": "fz:v1", "ids": ["r8", "r9"]},
    "bump_access_counts": {"updates": [{"collection": "fz:v1", "ids": ["r1"]}]},
    "ensure_collections": {"collections": ["fz:v1"]},
    "insert_session_turn": {"sessionId": "fz-v1", "role": "user", "text": "hi", "id": "t1"},
    "compact_session": {"sessionId": "fz-v1", "force": True},
    "query_raw_session": {"sessionId": "fz-v1", "text": "hi", "k": 3},
    "gating_scalar": {"userId": "fz", "text": "I like tea"},
    "export_memory": {"namespace": "fz"},
    "flush_namespace": {"namespace": "fz-gone"},
    "status": {},
    "health": {},
    "initialize": {"clientInfo": {"name": "fuzz", "version": "1"}},
}


LAST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, the last accepted ts
STAMPS: list[Any] = [
    0,
    -1,
    LAST_MS,
    LAST_MS + 1,
    1_704_067_200_000_000,  # microseconds
    1_704_067_200_000_000_000,  # nanoseconds
    2**63,
    2**64,
    1e20,
    -1e300,
    "1704067200000000",
    "2024-01-01",
    1_704_067_200_000,
]


class Grammar:
    def __init__(self, rng: random.Random, methods: list[str]) -> None:
        self.rng = rng
        self.methods = [m for m in methods if m not in SKIP and not m.startswith("debug.")]

    def string(self) -> str:
        r = self.rng.random()
        if r < 0.4:
            return self.rng.choice(TEXTS)
        if r < 0.6:
            return "".join(chr(self.rng.randint(0, 0x2FF)) for _ in range(self.rng.randint(0, 40)))
        if r < 0.7:
            return self.rng.choice(["\ud800", "a\x00b", "../../etc", "x" * 5000, "é" * 300])
        if r < 0.75:
            return "w " * self.rng.randint(1000, 8000)
        return "".join(self.rng.choice("abc :/._-") for _ in range(self.rng.randint(0, 30)))

    def number(self) -> Any:
        return self.rng.choice(
            [0, -1, 1, 2**31, 2**63, -(2**63) - 1, 10**40, 1.5, -0.0, 1e308, 3, 200, 201]
        )

    def value(self, depth: int = 0) -> Any:
        r = self.rng.random()
        if depth > 3 or r < 0.25:
            return self.string()
        if r < 0.45:
            return self.number()
        if r < 0.55:
            return self.rng.choice([None, True, False])
        if r < 0.75:
            return [self.value(depth + 1) for _ in range(self.rng.randint(0, 4))]
        return {self.string()[:12]: self.value(depth + 1) for _ in range(self.rng.randint(0, 4))}

    def params(self, method: str) -> Any:
        base = json.loads(json.dumps(BASE.get(method, {})))
        r = self.rng.random()
        if r < 0.05:
            return self.value()  # not even an object
        for key in list(base):
            roll = self.rng.random()
            if roll < 0.15:
                del base[key]
            elif roll < 0.4:
                base[key] = self.value()
            elif roll < 0.5 and isinstance(base[key], list):
                base[key] = base[key] * self.rng.randint(0, 50)
        if self.rng.random() < 0.2:
            base[self.string()[:20]] = self.value()  # an unknown field
        return base

    def request(self) -> dict[str, Any]:
        method = self.rng.choice(self.methods)
        if self.rng.random() < 0.03:
            method = self.string()[:50]
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": self.params(method)}
        r = self.rng.random()
        if r < 0.8:
            msg["id"] = self.rng.randint(1, 10**6)
        elif r < 0.9:
            msg["id"] = self.rng.choice(["s", 1.5, None, [], {}, True])
        if self.rng.random() < 0.03:
            msg["jsonrpc"] = self.rng.choice(["1.0", 2, None])
        return msg

    def frame(self) -> tuple[str, list[bytes]]:
        """(kind, chunks): the chunks are written one after another."""
        r = self.rng.random()
        if r < 0.45:
            return "typed", [json.dumps(self.request()).encode() + b"\n"]
        if r < 0.55:
            return "json", [json.dumps(self.value()).encode() + b"\n"]
        if r < 0.7:
            raw = bytearray(json.dumps(self.request()).encode())
            for _ in range(self.rng.randint(1, 6)):
                at = self.rng.randrange(len(raw))
                op = self.rng.random()
                if op < 0.4:
                    raw[at] = self.rng.randrange(256)
                elif op < 0.7:
                    raw[at:at] = self.rng.choice([b"\xff\xfe", b"\xc0", b"\xed\xa0\x80", b"\x00"])
                else:
                    del raw[at:]
                    break
            return "bytes", [bytes(raw).replace(b"\n", b" ") + b"\n"]
        if r < 0.75:
            depth = self.rng.choice([100, 990, 2000, 20000])
            open_, close = self.rng.choice([("[", "]"), ('{"a":', "}")])
            inner = open_ * depth + "1" + close * depth
            frame = f'{{"jsonrpc":"2.0","id":7,"method":"search","params":{inner}}}'
            return "deep", [frame.encode() + b"\n"]
        if r < 0.82:
            token = self.rng.choice(["NaN", "Infinity", "-Infinity", "1e999", "9" * 400, "-0"])
            key = self.rng.choice(["k", "tokenBudget", "maxDepth", "id"])
            frame = (
                f'{{"jsonrpc":"2.0","id":8,"method":"search","params":'
                f'{{"query":"tea","namespace":"fz","{key}":{token}}}}}'
            )
            return "numbers", [frame.encode() + b"\n"]
        if r < 0.92:
            data = json.dumps(self.request()).encode() + b"\n"
            cuts = sorted(self.rng.sample(range(1, max(2, len(data))), min(3, len(data) - 1)))
            parts = [data[i:j] for i, j in zip([0, *cuts], [*cuts, len(data)], strict=True)]
            return "split", [p for p in parts if p]
        if r < 0.96:
            return "timestamps", [json.dumps(self.dated()).encode() + b"\n"]
        n = self.rng.choice([0, 1, 5, 20])
        batch = [self.request() if self.rng.random() < 0.8 else self.value() for _ in range(n)]
        return "batch", [json.dumps(batch).encode() + b"\n"]

    def dated(self) -> dict[str, Any]:
        """A write dated at or past the edges of the accepted range (epoch ms, 1970-01-01
        to 9999-12-31: a microsecond ts failed ingest with -32603, a record in the year
        9999 every ``memory.stats``), or a ``memory.stats`` over what they stored."""
        ts = self.rng.choice(STAMPS)
        kind = self.rng.choice(["ingest", "insert_text", "insert_session_turn", "memory.stats"])
        n = self.rng.randint(1, 10**6)
        if kind == "ingest":
            msg = {"role": "user", "content": f"dated {n}", "id": f"fz-ts{n}", "ts": ts}
            params: dict[str, Any] = {"sessionId": "fz-ts", "namespace": "fz", "messages": [msg]}
        elif kind == "insert_text":
            params = {"collection": "turns:fz", "id": f"ts{n}", "text": "x", "metadata": {"ts": ts}}
        elif kind == "insert_session_turn":
            params = {"sessionId": "fz-ts1", "id": f"t{n}", "text": "x", "metadata": {"ts": ts}}
        else:
            params = {"bucket": self.rng.choice(["day", "week", "month"])}
            if self.rng.random() < 0.5:
                params["namespace"] = "fz"
        return {"jsonrpc": "2.0", "id": n, "method": kind, "params": params}


def run_fuzz(tmp: Path, frames: int = 10_000, seed: int = 1) -> Report:
    report = Report("fuzz")
    rng = random.Random(seed)
    kinds: dict[str, int] = {}
    internal = dropped = bad_replies = 0
    started = time.perf_counter()
    with daemon(tmp, tmp / "data") as d:

        def connect() -> Client:
            c = Client(d.endpoint)
            c.result("initialize", {"clientInfo": {"name": "fuzz", "version": "1"}})
            return c

        client = connect()
        grammar = Grammar(rng, client.result("initialize")["methods"])
        for n in range(frames):
            kind, chunks = grammar.frame()
            kinds[kind] = kinds.get(kind, 0) + 1
            probe = f"health-{n}"
            try:
                for i, chunk in enumerate(chunks):
                    client.send_raw(chunk)
                    if i + 1 < len(chunks):
                        time.sleep(0.001)
                client.send_raw(
                    json.dumps({"jsonrpc": "2.0", "id": probe, "method": "health"}).encode() + b"\n"
                )
                while True:
                    line = client.read_line()
                    try:
                        reply = json.loads(line)
                    except ValueError:
                        bad_replies += 1
                        report.fail(f"frame {n} ({kind}): reply is not JSON: {line[:120]!r}")
                        continue
                    for item in reply if isinstance(reply, list) else [reply]:
                        err = item.get("error") if isinstance(item, dict) else None
                        if isinstance(err, dict) and err.get("code") == -32603:
                            internal += 1
                            report.fail(f"frame {n} ({kind}): internal error {err}")
                    if isinstance(reply, dict) and reply.get("id") == probe:
                        if "result" not in reply:
                            report.fail(f"frame {n} ({kind}): health failed: {reply}")
                        break
            except (ConnectionError, OSError) as exc:
                dropped += 1
                report.fail(f"frame {n} ({kind}): connection dropped ({exc}): {chunks[0][:160]!r}")
                if d.proc.poll() is not None:
                    report.fail(f"daemon exited with {d.proc.returncode} after frame {n}")
                    break
                client.close()
                client = connect()
        client.close()
        alive = d.proc.poll() is None
        crashes = d.stderr_text().count("Unhandled exception")
    if not alive:
        report.fail("daemon was not running at the end")
    if crashes:
        report.fail(f"{crashes} unhandled exceptions in the daemon log")
    report.figures = {
        "frames": frames,
        "seed": seed,
        "kinds": dict(sorted(kinds.items())),
        "internal errors": internal,
        "dropped connections": dropped,
        "replies not JSON": bad_replies,
        "seconds": round(time.perf_counter() - started, 1),
    }
    return report
