"""Handlers are thin: no module of ``sidecar/api`` resolves a namespace or reads a session's
owner. That happens behind the services (``MemoryService``, the door to
``sidecar.memory.core.ownership``; ``Retrieval``; ``NamespaceMemory``), the one place every
verb goes through, so a new handler cannot answer for another namespace's session by
forgetting a check.

Regression: before the services resolved the namespace, each handler called
``ownership`` itself (``assemble``, ``search``, ``memory.*``, ``forget``, ``compact``, v1
``insert_session_turn``), some through names re-exported from ``memory.ingest.sessions``.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
API = REPO / "sidecar" / "api"
OWNERSHIP = REPO / "sidecar" / "memory" / "core" / "ownership.py"
OWNERSHIP_MODULE = "sidecar.memory.core.ownership"
# MemoryService's doors to ownership, for the services above it (not for handlers).
SERVICE_DOORS = frozenset(
    {"namespace_of", "session_namespace", "required_namespace", "named_namespace"}
)


def ownership_names() -> frozenset[str]:
    """What ``ownership`` defines for others: its public functions, classes and names."""
    tree = ast.parse(OWNERSHIP.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return frozenset(n for n in names if not n.startswith("_"))


def namespace_resolution(source: str, forbidden: frozenset[str]) -> list[str]:
    """Where ``source`` imports ownership, or imports, names or calls one of ``forbidden``
    (a re-export under another module counts: the name is what matters). Imports under
    ``TYPE_CHECKING`` count too: a handler has no use for these names at all."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            found += [f"{line}: import {a.name}" for a in node.names if a.name == OWNERSHIP_MODULE]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            for alias in node.names:
                full = f"{module}.{alias.name}"
                if OWNERSHIP_MODULE in (module, full) or alias.name in forbidden:
                    found.append(f"{line}: from {module} import {alias.name}")
        elif isinstance(node, ast.Name) and node.id in forbidden:
            found.append(f"{line}: {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in forbidden:
            found.append(f"{line}: .{node.attr}")
    return found


def test_no_handler_resolves_a_namespace() -> None:
    forbidden = ownership_names() | SERVICE_DOORS
    offenders = {
        str(path.relative_to(REPO)): hits
        for path in sorted(API.rglob("*.py"))
        if (hits := namespace_resolution(path.read_text(), forbidden))
    }
    assert offenders == {}


def test_the_rule_knows_ownership() -> None:
    names = ownership_names()
    assert {"session_namespace", "reader_namespace", "refuse_another_owner"} <= names
    assert "session_exists" in names


def test_the_rule_catches_each_way_in() -> None:
    forbidden = ownership_names() | SERVICE_DOORS
    ways_in = [
        "from sidecar.memory.core.ownership import session_namespace",
        "from sidecar.memory.core import ownership",
        "import sidecar.memory.core.ownership",
        "from sidecar.memory.ingest.sessions import request_namespace",  # a re-export
        "ns = await svc.namespace_of(who)",  # the service's door, meant for services
        "if not session_exists(store, sid): pass",
    ]
    for source in ways_in:
        assert namespace_resolution(source, forbidden), source
    thin = "out = await ctx.app.service(NamespaceMemory).get(who, coll, rid)"
    assert namespace_resolution(thin, forbidden) == []
