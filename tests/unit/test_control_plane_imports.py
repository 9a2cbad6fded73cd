"""The control plane's modules import each other without a cycle, and only the CLI imports its commands.

Every import counts, at module level and inside functions (``ast`` over control_plane/**.py)."""

from __future__ import annotations

from tests.support.imports import cycles, module_graph

PACKAGE = "control_plane"


def _imports() -> dict[str, set[str]]:
    return module_graph(PACKAGE)


def test_no_import_cycle_among_control_plane_modules():
    edges = _imports()
    assert "control_plane.plan" in edges and edges["control_plane.local"]  # the walk saw the package
    assert cycles(edges) == []


def test_only_the_cli_imports_the_commands():
    commands = f"{PACKAGE}.commands"
    outside = {
        name: sorted(e for e in deps if e.startswith(commands))
        for name, deps in _imports().items()
        if not name.startswith(commands) and name not in (f"{PACKAGE}.cli", f"{PACKAGE}.cli_reference")
    }
    assert {name: deps for name, deps in outside.items() if deps} == {}
