"""One finding of `libravdb doctor` and how it is printed."""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass
from typing import Any, Literal

Status = Literal["ok", "warn", "FAIL"]


@dataclass(frozen=True, slots=True)
class Check:
    """``status`` of the check ``name``; ``fix`` is a command (or step) for a failure."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def warn(name: str, detail: str, fix: str = "") -> Check:
    return Check(name, "warn", detail, fix)


def fail(name: str, detail: str, fix: str) -> Check:
    return Check(name, "FAIL", detail, fix)


def q(path: object) -> str:
    """A path as a shell word, for fixes the user pastes."""
    return shlex.quote(str(path))


def format_lines(checks: list[Check]) -> str:
    width = max((len(c.name) for c in checks), default=0)
    lines: list[str] = []
    for c in checks:
        lines.append(f"{c.status:<4}  {c.name:<{width}}  {c.detail}")
        if c.fix and c.status != "ok":
            lines.append(f"      {'':<{width}}  fix: {c.fix}")
    return "\n".join(lines)
