from __future__ import annotations

import math

from sidecar.memory.lifecycle.dream import (
    DreamEntry,
    dream_entry_id,
    gate_entries,
    parse_bullet,
    parse_dream_diary,
    resolve_source_line,
)

DIARY = """# Dream diary

## Notes
- not a dream section {score=0.9 recall=5 unique=5}

## Deep Sleep   Consolidation
- The user prefers tabs over spaces in Go code. {score=0.82, recall=3, unique=2}
- too weak {score=0.2 recall=1 unique=1}
* Missing a field here in this bullet {score=0.9 recall=3}
+ Uses the long key names for counts here {score=0.7 recallCount=4 uniqueQueries=3}

```
- inside a fence {score=0.9 recall=9 unique=9}
```

# Single hash is not a heading
- Still in the deep sleep section, yes. {score=0.61 recall=2 unique=2}

### Promotions ###
- Bullet without a block
-  {score=0.9 recall=3 unique=3}
- Promoted entry about the release train. { score = 0.9 , recall=2, unique=2 }
- Value with bad number {score=high recall=2 unique=2}
"""


def test_parse_sections_and_real_lines() -> None:
    entries = parse_dream_diary(DIARY)
    assert [e.text for e in entries] == [
        "The user prefers tabs over spaces in Go code.",
        "too weak",
        "Uses the long key names for counts here",
        "Still in the deep sleep section, yes.",
        "Promoted entry about the release train.",
    ]
    lines = DIARY.split("\n")
    for e in entries:
        assert e.text in lines[e.line - 1]
    assert [e.index for e in entries] == [1, 2, 3, 4, 5]
    assert entries[0].section == "deep sleep consolidation"
    assert entries[-1].section == "promotions"
    assert entries[2].recall_count == 4 and entries[2].unique_queries == 3


def test_parse_crlf_and_tilde_fence() -> None:
    text = (
        "## Dreams\r\n~~~\r\n- hidden {score=1 recall=9 unique=9}\r\n~~~\r\n"
        "- shown entry {score=1 recall=2 unique=2}\r\n"
    )
    entries = parse_dream_diary(text)
    assert [(e.text, e.line) for e in entries] == [("shown entry", 5)]


def test_parse_bullet_rules() -> None:
    assert parse_bullet("text {score=0.5 recall=2.0 unique=3}") == ("text", 0.5, 2, 3)
    assert parse_bullet("text {score=nan recall=2 unique=3}") is None
    assert parse_bullet("text {score=0.5 recall=2.5 unique=3}") is None
    assert parse_bullet("text {score=0.5 recall=2 unique=3} trailing") is None
    assert parse_bullet("a {x} b {score=0.7 recall=2 unique=2}") == ("a {x} b", 0.7, 2, 2)


def test_gates_reference_example() -> None:
    good = DreamEntry("The user prefers tabs over spaces.", 0.82, 3, 2, line=7)
    bad = DreamEntry("The user prefers spaces over tabs.", 0.2, 1, 1, line=8)
    result = gate_entries([good, bad])
    assert result.accepted == (good,)
    assert result.promoted == 1
    assert len(result.rejected) == 1
    assert result.rejected[0].entry is bad
    assert set(result.rejected[0].reasons) == {
        "score below 0.6",
        "recall below 2",
        "unique queries below 2",
    }


def test_gate_boundaries() -> None:
    exactly = DreamEntry("x" * 16, 0.6, 2, 2)
    short = DreamEntry("  " + "x" * 15 + "  ", 0.9, 5, 5)
    multibyte = DreamEntry("é" * 8, 0.9, 5, 5)  # 16 bytes
    nan = DreamEntry("a valid long text", math.nan, 5, 5)
    result = gate_entries([exactly, short, multibyte, nan])
    assert result.accepted == (exactly, multibyte)
    assert [r.entry for r in result.rejected] == [short, nan]


def test_all_rejected_still_reports() -> None:
    result = gate_entries([DreamEntry("tiny", 0.1, 0, 0)])
    assert result.accepted == () and len(result.rejected) == 1


def test_source_line_and_ids() -> None:
    assert resolve_source_line(1, 42) == 42
    assert resolve_source_line(3, None) == 3
    assert resolve_source_line(None, 0) == 0
    assert dream_entry_id("/d/diary.md", 0) == "/d/diary.md#dream#000000"
    assert dream_entry_id("/d/diary.md", 12) == "/d/diary.md#dream#000012"
