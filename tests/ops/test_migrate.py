"""``libravdb migrate`` between the embedded SQLite store and PostgreSQL, on a store a real
daemon wrote with the real embedding model: SQLite -> PostgreSQL -> SQLite, and the
``libravdb export`` of the original equals the export of each copy (record versions and
update times restart with the copy, as documented; everything else, vectors included,
byte for byte). Refusals: a non-empty target, a source a daemon holds, a location that is
neither; and the check at the end catches a copy that differs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from libravdb_client import Client
from libravdb_client.testing import DaemonProcess

from tests.support import REPO, daemon_env

NS = "mover"
CHAT = [
    ("user", "I moved to Lisbon last spring and I love the tiled facades."),
    ("assistant", "Lisbon is lovely; the Alfama district is full of azulejos."),
    ("user", "My daughter Mia starts violin lessons on Wednesdays."),
    ("assistant", "Violin at her age builds a great ear. Wednesdays noted."),
    ("user", "Please always answer me in British English."),
    ("assistant", "Certainly, I shall use British spelling from now on."),
    ("user", "The locker code at my gym is 5521, keep it private."),
    ("assistant", "Noted, I will keep the locker code private."),
    ("user", "We are planning a hiking trip to the Azores in June."),
    ("assistant", "The Azores in June are green and mild, good for hiking."),
]


def _tool(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sidecar", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=daemon_env(home),
        timeout=600,
    )


def _written_by_a_daemon(tmp: Path) -> Path:
    """A SQLite store with turns, summaries, edges, state, authored rules, a corrected fact,
    a forgotten turn (tombstones), an empty collection and a v1 record; daemon stopped."""
    data = tmp / "orig"
    with (
        DaemonProcess.start("tcp", data_dir=data, home=tmp / "home", ready_timeout=90) as d,
        Client(d.endpoint, timeout=180) as c,
    ):
        msgs = [
            {"id": f"m{i}", "role": role, "content": text, "ts": 1_700_000_000_000 + i}
            for i, (role, text) in enumerate(CHAT)
        ]
        c.ingest("trip", msgs, user_id=NS)
        c.ingest("other", msgs[:4], user_id=NS)
        c.compact("trip", force=True, target_size=4)
        c.call("authored.ingest", {"sourceDoc": "rules.md", "text": "# Rules\n\n- Be kind.\n"})
        fact = next(r for r in c.memory_list(user_id=NS).records if "Mia" in r.text)
        c.memory_update(fact.collection, fact.id, "Mia starts violin on Thursdays now.", user_id=NS)
        c.forget(user_id=NS, message_ids=["m6"])
        c.call("ensure_collections", {"collections": ["user:empty"]})
        c.call("insert_text", {"collection": "global", "id": "g1", "text": "Shared note."})
    return data


def _export(home: Path, *where: str) -> list[dict[str, Any]]:
    out = home.parent / f"export-{len(list(home.parent.glob('export-*')))}.ndjson"
    done = _tool(home, "export", *where, "-o", str(out))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    for line in lines:
        line.pop("version", None)  # restart at 1 in a copy
        line.pop("updated_ms", None)  # the copy's time
        line.pop("exported_ms", None)
        if line["kind"] == "tombstone":
            line.pop("created_ms", None)  # the copy's time
    return lines


def test_sqlite_to_postgres_to_sqlite_keeps_everything(tmp_path: Path, pg_server: Any) -> None:
    home = tmp_path / "home"
    orig = _written_by_a_daemon(tmp_path)
    url = pg_server.new_database()
    there = _tool(home, "migrate", "--from", f"sqlite:{orig}", "--to", url)
    assert there.returncode == 0, there.stderr
    assert "records/s" in there.stderr and "ETA" in there.stderr  # progress
    assert "verified" in there.stderr.splitlines()[-1]
    back = tmp_path / "back"
    again = _tool(home, "migrate", "--from", url, "--to", f"sqlite:{back}")
    assert again.returncode == 0, again.stderr

    original = _export(home, "--data-dir", str(orig))
    kinds = {line["kind"] for line in original}
    assert {"record", "tombstone", "collection"} <= kinds
    assert any("vector" in line for line in original)
    assert _export(home, "--store", url) == original
    assert _export(home, "--data-dir", str(back)) == original

    # a daemon on the copy answers as one on the original does
    answers = []
    for data in (orig, back):
        with (
            DaemonProcess.start("tcp", data_dir=data, home=home, ready_timeout=90) as d,
            Client(d.endpoint, timeout=180) as c,
        ):
            hits = c.search("What instrument does Mia play?", user_id=NS, k=5).hits
            answers.append([(h.collection, h.id, h.score) for h in hits])
    # the same hits in the same order; scores equal but for the recency of "now"
    assert answers[0] and [a[:2] for a in answers[0]] == [a[:2] for a in answers[1]]
    assert all(abs(x[2] - y[2]) < 1e-3 for x, y in zip(*answers, strict=True))


def test_refusals(tmp_path: Path, pg_server: Any) -> None:
    home = tmp_path / "home"
    orig = _written_by_a_daemon(tmp_path)
    url = pg_server.new_database()
    assert _tool(home, "migrate", "--from", f"sqlite:{orig}", "--to", url).returncode == 0
    full = _tool(home, "migrate", "--from", f"sqlite:{orig}", "--to", url)
    assert full.returncode == 1 and "is not empty" in full.stderr
    nothing = _tool(home, "migrate", "--from", f"sqlite:{tmp_path / 'none'}", "--to", url)
    assert nothing.returncode == 1 and "no store at" in nothing.stderr
    odd = _tool(home, "migrate", "--from", "mysql://x/y", "--to", url)
    assert odd.returncode == 1 and "neither sqlite:DIR nor a postgresql:// URL" in odd.stderr
    with DaemonProcess.start("tcp", data_dir=orig, home=home, ready_timeout=90):
        held = _tool(home, "migrate", "--from", f"sqlite:{orig}", "--to", f"sqlite:{tmp_path}/b")
    assert held.returncode == 1 and "in use by process" in held.stderr


@pytest.mark.parametrize("damage", ["vector", "metadata", "record"])
def test_the_check_catches_a_copy_that_differs(tmp_path: Path, pg_server: Any, damage: str) -> None:
    from sidecar.ops.migrate_copy import record_keys
    from sidecar.ops.migrate_open import open_end, parse_location, read_identity
    from sidecar.ops.migrate_verify import verify
    from sidecar.store.types import Delete, Patch, Put

    orig = _written_by_a_daemon(tmp_path)
    url = pg_server.new_database()
    assert _tool(tmp_path / "home", "migrate", "--from", str(orig), "--to", url).returncode == 0
    src, dst = parse_location(f"sqlite:{orig}"), parse_location(url)
    ident = read_identity(src)
    with open_end(src, ident, ident.embed_dims) as s, open_end(dst, ident, ident.embed_dims) as t:
        keys = record_keys(s)
        assert verify(s, t, keys, sample=len(keys)).ok
        _seq, coll, rid = next(k for k in keys if k[1].startswith("turns:"))
        rec = t.get(coll, rid, include_vector=True)
        assert rec is not None and rec.vector is not None
        if damage == "vector":
            nudged = rec.vector.copy()
            nudged[0] += 1e-7
            t.write([Put(coll, rid, rec.text, rec.metadata, nudged, created_ms=rec.created_ms)])
        elif damage == "metadata":
            t.write([Patch(coll, rid, {"role": "someone else"})])
        else:
            t.write([Delete(coll, rid)])
        checked = verify(s, t, keys, sample=len(keys))
    assert not checked.ok
    expected = {"vector": "vector differs", "metadata": "metadata differs", "record": "copied"}
    assert any(expected[damage] in p for p in checked.problems), checked.problems
