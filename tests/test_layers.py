"""Dependencies in ``sidecar/`` point one way: server → api → assembly → memory → engines /
store, with the wiring (``services``) and the service registry (``app``) above the layers
they assemble. A module may import its own layer and the layers below it, never above.
Imports inside functions count; ``TYPE_CHECKING``-only imports do not."""

from __future__ import annotations

from tests.test_import_cycles import _imports, _modules

# Lowest first. The first matching prefix names a module's layer.
LAYERS: list[tuple[int, tuple[str, ...]]] = [
    (
        0,
        (
            "sidecar.errors",
            "sidecar.config",
            "sidecar.stats",
            "sidecar.allocator",
            "sidecar.priority",
            "sidecar.logging_setup",
        ),
    ),
    (1, ("sidecar.store", "sidecar.engines")),
    (2, ("sidecar.memory.core",)),
    (3, ("sidecar.memory.authored", "sidecar.memory.ingest")),
    (4, ("sidecar.memory.compaction",)),
    (5, ("sidecar.memory.service",)),
    (6, ("sidecar.memory.lifecycle",)),
    (7, ("sidecar.assembly",)),
    (8, ("sidecar.app",)),
    (9, ("sidecar.services",)),
    (10, ("sidecar.api",)),
    (11, ("sidecar.server",)),
    (
        12,
        (
            "sidecar.cli",
            "sidecar.console",
            "sidecar.console_input",
            "sidecar.console_memory",
            "sidecar.endpoints",
            "sidecar.exit_status",
            "sidecar.command_args",
            "sidecar.tools",
            "sidecar.mcp",
            "sidecar.ops",
            "sidecar.ui",
            "sidecar.__main__",
        ),
    ),
]


def layer_of(module: str) -> int:
    if module in ("sidecar", "sidecar.memory"):  # the package doc and version only
        return 0
    for rank, prefixes in LAYERS:
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    raise AssertionError(f"{module} has no layer: add it to LAYERS in {__file__}")


def upward_imports() -> list[str]:
    modules = _modules()
    out: list[str] = []
    for name, path in sorted(modules.items()):
        for target in sorted(_imports(name, path, modules)):
            if layer_of(target) > layer_of(name):
                out.append(f"{name} (layer {layer_of(name)}) imports {target} ({layer_of(target)})")
    return out


def test_every_module_has_a_layer() -> None:
    for name in _modules():
        layer_of(name)


def test_no_module_imports_a_layer_above_it() -> None:
    assert upward_imports() == []


def test_the_rule_catches_an_upward_import() -> None:
    assert layer_of("sidecar.memory.core.tokens") < layer_of("sidecar.assembly.plan")
    assert layer_of("sidecar.store.store") < layer_of("sidecar.app")
    assert layer_of("sidecar.api.assemble") < layer_of("sidecar.server.dispatch")
