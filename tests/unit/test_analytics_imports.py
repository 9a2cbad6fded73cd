"""analytics/ imports in one direction: no import cycle (module-level and lazy imports inside functions alike),
the report's data stage never imports a render module, its leaves import nothing of the report, and neither the
report nor the importers import the packages above analytics (agents, control_plane, rehearsal, infra)."""

from __future__ import annotations

from tests.support.imports import ROOT, cycles, imports_in, module_graph, reachable

REPORT = "analytics.report"
DATA_STAGE = {
    f"{REPORT}.{m}"
    for m in (
        "comparison",
        "compare",
        "decision",
        "rows",
        "rules",
        "stats",
        "run_level",
        "request_tests",
        "sides",
        "accuracy",
        "html_data",
    )
}
RENDER_STAGE = {
    f"{REPORT}.{m}" for m in ("markdown", "plots", "notes_md", "decision_md", "deltas_md", "accuracy_md", "html")
}
LEAVES = {f"{REPORT}.{m}" for m in ("format", "rows", "names", "rules", "stats", "html_assets", "document")}
ABOVE = {"agents", "control_plane", "rehearsal", "infra"}


def graph() -> dict[str, set[str]]:
    return module_graph("analytics")


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
    for package in ("analytics/report", "analytics/importers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            assert not {i.module.split(".")[0] for i in imports_in(path)} & ABOVE, path


def test_the_checks_catch_a_cycle_and_a_lazy_import(tmp_path):
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    lazy = tmp_path / "m.py"
    lazy.write_text("def f():\n    from analytics.report.markdown import fmt\n    import agents.graph\n")
    assert {i.module for i in imports_in(lazy, tmp_path)} == {"analytics.report.markdown", "agents.graph"}
