"""Modules stay small: none over LIMIT lines unless docs/design.md ("Size limits") names it
and says why. A listed module that has shrunk below the limit must be taken off the list,
so the list never hides a new giant."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIMIT = 650  # "about 600"
ROOTS = ("sidecar", "protocol", "scripts", "host_clients/python/libravdb_client")
DESIGN = REPO / "docs" / "design.md"


def _sizes() -> dict[str, int]:
    out: dict[str, int] = {}
    for root in ROOTS:
        for path in (REPO / root).rglob("*.py"):
            out[str(path.relative_to(REPO))] = len(path.read_text().splitlines())
    return out


def _allowed() -> set[str]:
    text = DESIGN.read_text()
    section = text.split("## Size limits", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([^`]+\.py)` \|", section, flags=re.M))


def test_no_module_over_the_limit_unless_design_says_why() -> None:
    too_big = {p: n for p, n in _sizes().items() if n > LIMIT}
    assert sorted(set(too_big) - _allowed()) == [], too_big


def test_the_exceptions_are_still_needed() -> None:
    sizes = _sizes()
    listed = _allowed()
    assert listed, "docs/design.md has no Size limits table"
    assert sorted(p for p in listed if sizes.get(p, 0) <= LIMIT) == []
