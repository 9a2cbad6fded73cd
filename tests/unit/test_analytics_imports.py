"""analytics/ imports in one direction: no import cycle (module-level and lazy imports inside functions alike),
the report's data stage never imports a render module, its leaves import nothing of the report, and neither the
report nor the importers import the packages above analytics (agents, control_plane, rehearsal, infra)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPORT = "analytics.report"
DATA_STAGE = {f"{REPORT}.{m}" for m in ("comparison", "compare", "decision", "rows", "rules", "stats")}
RENDER_STAGE = {f"{REPORT}.{m}" for m in ("markdown", "plots", "addenda", "decision_md", "deltas_md")}
LEAVES = {f"{REPORT}.{m}" for m in ("format", "rows", "names", "rules", "stats")}
ABOVE = {"agents", "control_plane", "rehearsal", "infra"}


def modules(package: str = "analytics") -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every module ``path`` imports, anywhere in it (a ``from pkg import sub`` names the submodule)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            out.update(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: imports(m, p, known) for m, p in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, or a module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
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


def test_no_import_cycle_in_analytics():
    edges = graph()
    assert len(edges) > 30
    assert cycles(edges) == []


def test_the_data_stage_never_reaches_a_render_module():
    edges = graph()
    assert DATA_STAGE | RENDER_STAGE | LEAVES <= set(edges)
    for module in DATA_STAGE:
        assert not reachable(edges, module) & RENDER_STAGE, module
    assert "analytics.report.comparison" in reachable(edges, "analytics.report")  # write_report runs both stages


def test_leaves_import_nothing_of_the_report():
    edges = graph()
    for module in LEAVES:
        assert not {m for m in edges[module] if m.startswith(REPORT)}, module


def test_report_and_importers_import_nothing_above_analytics():
    edges = graph()
    for module, targets in edges.items():
        if module.startswith(("analytics.report", "analytics.importers")):
            assert not {t.split(".")[0] for t in targets} & ABOVE, module


def test_the_checks_catch_a_cycle_and_a_lazy_import(tmp_path):
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    lazy = tmp_path / "m.py"
    lazy.write_text("def f():\n    from analytics.report.markdown import fmt\n    import agents.graph\n")
    assert imports("analytics.x.m", lazy, modules()) == {"analytics.report.markdown", "agents.graph"}
