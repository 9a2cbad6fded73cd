"""The report end to end on synthetic committed results: sections, vLLM keys, plots, byte-identical rebuilds,
several runs side by side, and the report/compare/pull commands."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image as mpimg
import pytest

from analytics.report.files import build_report_files
from analytics.store import LocalStore
from control_plane.cli import main
from tests.support.synthetic import SyntheticRun, write_synthetic_run

SECTIONS = (
    "## Machines and versions",
    "## Compile: cold vs warm cache",
    "## Training",
    "## Serving sweeps",
    "## Sustained retention",
    "## Quality",
    "## End-to-end loop",
    "## Failures and exclusions",
    "## Host CPU context",
    "## Cost context",
    "## Measurement rules",
)
VLLM_KEYS = (
    "completed",
    "failed",
    "duration",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "std_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "p99_e2el_ms",
    "max_concurrency",
    "request_rate",
    "burstiness",
)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("results")
    store = LocalStore(root)
    write_synthetic_run(store, SyntheticRun(run_id="run-a", seed=1))
    write_synthetic_run(store, SyntheticRun(run_id="run-b", seed=2, box_role="local"))
    return root


def _files(paths):
    return {p.name: p.read_bytes() for p in paths}


def test_report_has_every_section_plots_open_and_rebuild_is_byte_identical(results, tmp_path):
    first = build_report_files(str(results), ["run-a"], tmp_path / "one")
    second = build_report_files(str(results), ["run-a"], tmp_path / "two")
    assert _files(first) == _files(second)
    names = {p.name for p in first}
    assert {
        "comparison.json",
        "REPORT.md",
        "compile_cold_warm.png",
        "loss_curves.png",
        "latency_vs_concurrency_tp2-bs8.png",
        "output_throughput_vs_concurrency.png",
        "sustained_timeline.png",
    } <= names
    for p in first:
        if p.suffix == ".png":
            assert mpimg.imread(p).shape[2] in (3, 4)
    report = (tmp_path / "one" / "REPORT.md").read_text()
    for heading in SECTIONS:
        assert heading in report
    assert report.index("## Compile") < report.index("## Serving sweeps")
    assert "ServerBootError" in report and "Declared grid:" in report
    c = json.loads((tmp_path / "one" / "comparison.json").read_text())
    assert c["run_ids"] == ["run-a"]
    point = c["serving"]["points"][0]
    assert set(VLLM_KEYS) <= set(point)
    assert {r["kind"] for r in c["exclusions"]} == {"lane_failed"}
    assert c["cost"]["runs"][0]["usd"] > 0 and c["cost"]["points"][0]["usd_per_million_output_tokens"] > 0
    assert c["sustained"]["retention"][0]["retention_vs_first"] is not None
    assert c["roundtrip"]["models"][0]["holds"] is True


def test_report_matches_the_views_it_reads(results, tmp_path):
    from analytics.views import connect

    build_report_files(str(results), ["run-a"], tmp_path)
    c = json.loads((tmp_path / "comparison.json").read_text())
    con = connect(LocalStore(results), run_ids=["run-a"])
    expected = dict(con.execute("SELECT point_id, p99_ttft_ms FROM serving_points").fetchall())
    got = {p["point_id"]: p["p99_ttft_ms"] for p in c["serving"]["points"]}
    assert got.keys() == expected.keys()
    for k, v in expected.items():
        assert got[k] == pytest.approx(v, rel=1e-8)


def test_empty_results_say_so_plainly(tmp_path):
    build_report_files(str(tmp_path / "none"), None, tmp_path / "out")
    report = (tmp_path / "out" / "REPORT.md").read_text()
    assert "No committed results" in report
    assert "_No compiles" in report and "_No training runs" in report and "_No sweep points" in report
    assert "_No sustained runs" in report and "_No quality results" in report
    assert "## Measurement rules" in report


def test_two_runs_side_by_side_and_local_cost_is_null(results, tmp_path):
    build_report_files(str(results), ["run-a", "run-b"], tmp_path)
    c = json.loads((tmp_path / "comparison.json").read_text())
    assert c["run_ids"] == ["run-a", "run-b"]
    runs = {r["run_id"]: r for r in c["cost"]["runs"]}
    assert runs["run-b"]["usd"] is None and runs["run-b"]["cost_note"] == "local run: no instance cost"
    report = (tmp_path / "REPORT.md").read_text()
    assert "## Runs side by side" in report and "### `run-b` vs `run-a`" in report
    assert "serving · serve_sweep tiny-llama tp2-bs8 in=64 out=16 conc=4 · output_throughput" in report


def test_cli_report_and_compare(results, tmp_path, capsys):
    assert main(["report", "--results", str(results), "--run-id", "run-a", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "REPORT.md").exists()
    capsys.readouterr()
    assert main(["compare", "run-a", "run-b", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    line = next(
        ln for ln in out.splitlines() if "conc=8 · p99_ttft_ms" in ln and ln.startswith("serving · serve_sweep")
    )
    assert len(line.split()) > 5
    assert main(["compare", "run-a", "nope", "--results", str(results)]) == 2
    assert "runs found: run-a" in capsys.readouterr().err


def test_report_without_matplotlib_still_writes_json_and_markdown(tmp_path, monkeypatch):
    """The finalize Lambda ships without matplotlib: the report has no PNGs and no broken image links."""
    import sys

    from analytics.report import write_report
    from analytics.store import LocalStore
    from analytics.views import connect

    store = LocalStore(tmp_path / "results")
    w = store.begin_attempt("r1", "host_cpu")
    w.add_rows("host_bench", [{"bench": "triad", "value": 1.0, "unit": "GB/s"}])
    w.commit("succeeded")
    monkeypatch.setitem(sys.modules, "analytics.report.plots", None)  # import fails like a missing package
    paths = write_report(connect(store), None, tmp_path / "out")
    assert [p.name for p in paths] == ["comparison.json", "REPORT.md"]
    assert ".png)" not in (tmp_path / "out" / "REPORT.md").read_text()
