"""The control plane's modules import each other without a cycle, and only the CLI imports its commands.

Every import counts, at module level and inside functions (``ast`` over control_plane/**.py)."""
from __future__ import annotations

import ast

from tests.conftest import ROOT

PACKAGE = "control_plane"


def _imports() -> dict[str, set[str]]:
    files = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def module_of(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {}
    for name, path in files.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        found = {module_of(t) for t in targets if t.startswith(PACKAGE)}
        edges[name] = {m for m in found if m and m not in (name, PACKAGE)}
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [node, nxt] if nxt in path else [node, nxt]
            if nxt not in state and (found := visit(nxt, path + [node])):
                return found
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start, [])):
            return found
    return None


def test_no_import_cycle_among_control_plane_modules():
    edges = _imports()
    assert "control_plane.plan" in edges and edges["control_plane.local"]  # the walk saw the package
    assert _cycle(edges) is None


def test_only_the_cli_imports_the_commands():
    commands = f"{PACKAGE}.commands"
    outside = {name: sorted(e for e in deps if e.startswith(commands))
               for name, deps in _imports().items()
               if not name.startswith(commands) and name not in (f"{PACKAGE}.cli", f"{PACKAGE}.cli_reference")}
    assert {name: deps for name, deps in outside.items() if deps} == {}
