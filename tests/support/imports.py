"""The code's imports as a graph, read with ``ast`` (never by importing): every ``import`` and ``from … import`` of
a file, at module level and inside functions, relative imports resolved against the file's package, ``from pkg
import sub`` naming the submodule when ``sub`` is one. The import-arrow, cycle and data-stage tests read it."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OURS = ("pipeline", "analytics", "agents", "statemachine", "control_plane", "rehearsal", "infra", "tests", "benchmarks")


@dataclass(frozen=True)
class Import:
    source: str  # file, relative to the repository
    line: int
    module: str  # dotted, resolved
    top_level: bool  # outside every function body


def _is_module_under(root: Path, dotted: str) -> bool:
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imports_in(path: Path, root: Path = ROOT) -> list[Import]:
    """Every import in ``path``, resolved to dotted module names (``from a import b`` is ``a.b`` when b is a module)."""
    rel = path.relative_to(root)
    parts = list(rel.with_suffix("").parts)
    package = parts[:-1]  # for __init__.py too: its own package is parts[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(rel))
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            in_function.update(id(n) for n in ast.walk(node) if n is not node)
    out = []
    for node in ast.walk(tree):
        top = id(node) not in in_function
        if isinstance(node, ast.Import):
            out += [Import(str(rel), node.lineno, a.name, top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                is_sub = alias.name != "*" and module.split(".")[0] in OURS and _is_module_under(root, sub)
                out.append(Import(str(rel), node.lineno, sub if is_sub else module, top))
    return out


def module_files(package: str, root: Path = ROOT) -> dict[str, Path]:
    """``{dotted module name: file}`` for every ``.py`` file of ``package``."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def package_imports(package: str, root: Path = ROOT) -> list[Import]:
    return [imp for f in module_files(package, root).values() for imp in imports_in(f, root)]


def module_graph(*packages: str, root: Path = ROOT) -> dict[str, set[str]]:
    """``{module: modules of the given packages it imports}``; an import of a name inside a module (``from a.b import
    f``) is an arrow to ``a.b``; a module's arrows to itself are dropped."""
    files = {m: p for pkg in packages for m, p in module_files(pkg, root).items()}

    def module_of(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {}
    for name, path in files.items():
        found = {module_of(i.module) for i in imports_in(path, root)}
        edges[name] = {m for m in found if m and m != name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, or a module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges[v]:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for w in edges.get(todo.pop(), ()):
            if w in edges and w not in seen:
                seen.add(w)
                todo.append(w)
    return seen
