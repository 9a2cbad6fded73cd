"""point_roofline (71_report_roofline.sql) against pipeline.roofline's formulas, its NULLs with their reasons, and
the report's "% of limit" where a user decides: the serving tables, the Decision, the Roofline section and plot."""

import json
from pathlib import Path

import pytest

from analytics.report.files import build_report_files
from analytics.store import LocalStore
from analytics.views import connect
from pipeline.model_catalogue import MODEL_CATALOGUE
from pipeline.roofline import accelerator_limits, bounds, cpu_limits, served_model
from tests.support.matrix import T0, commit_lane

LLAMA = MODEL_CATALOGUE["llama-3.1-8b-instruct"].facts
RUN = "roof-1"


def _served(tp: int, dtype: str = "bf16", max_num_seqs: int = 32) -> dict:
    m = served_model(LLAMA, dtype=dtype, kv_dtype_bytes=4 if dtype == "fp32" else 2, tensor_parallel=tp)
    return {**m.to_json(), "params": LLAMA.params, "max_num_seqs": max_num_seqs, "max_model_len": 2048}


def _points(prefix: str) -> list:
    return [(f"{prefix}-c{c}", c, None, 1.0) for c in (1, 4, 64)]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> LocalStore:
    root = tmp_path_factory.mktemp("roofline")
    store = LocalStore(Path(root) / "results")
    commit_lane(store, RUN, "serve_sweep@c01", "inf2.xlarge", "A", "llama", _points("inf2"), served=_served(2))
    commit_lane(store, RUN, "serve_sweep@c02", "g5.12xlarge", "A", "llama", _points("g5"), served=_served(4))
    commit_lane(store, RUN, "serve_sweep@c03", "inf2.xlarge", "A", "llama", _points("nofacts"))
    commit_lane(store, RUN, "serve_sweep@c04", "x9.huge", "A", "llama", _points("unknown"), served=_served(1))
    commit_lane(store, RUN, "serve_sweep@cpu", "", "A", "llama", _points("cpu"), served=_served(1, "fp32"),
                backend="cpu")  # fmt: skip
    w = store.begin_attempt(RUN, "host_cpu")
    w.add_rows("host_bench", [
        {"bench": "triad", "threads": 2, "size": 10**7, "value": 12.5, "unit": "GB/s", "repeats": 3},
        {"bench": "triad", "threads": 1, "size": 10**7, "value": 9.0, "unit": "GB/s", "repeats": 3},
        {"bench": "matmul", "threads": 2, "size": 512, "value": 80.0, "unit": "GFLOP/s", "repeats": 3},
    ])  # fmt: skip
    w.add_rows("lane_runs", [{"status": "succeeded", "supersedes": True, "backend": "cpu", "host": "h",
                              "started_at": T0, "ended_at": T0}])  # fmt: skip
    w.commit("succeeded")
    return store


@pytest.fixture(scope="module")
def roofline(store) -> dict:
    con = connect(store)
    rows = con.execute("SELECT * FROM point_roofline").fetchall()
    cols = [d[0] for d in con.description]
    return {r["point_id"]: r for r in (dict(zip(cols, row)) for row in rows)}


@pytest.mark.parametrize(
    "prefix,limits,tp",
    [
        ("inf2", accelerator_limits("Inferentia2", 2, "bf16"), 2),
        ("g5", accelerator_limits("A10G", 4, "bf16"), 4),
        ("cpu", cpu_limits(12.5, 80.0), 1),
    ],
)
def test_the_views_bounds_are_the_python_formulas(roofline, prefix, limits, tp):
    model = served_model(LLAMA, dtype="fp32" if prefix == "cpu" else "bf16",
                         kv_dtype_bytes=4 if prefix == "cpu" else 2, tensor_parallel=tp)  # fmt: skip
    for c in (1, 4, 64):
        r = roofline[f"{prefix}-c{c}"]
        b = bounds(model, limits, batch=c, input_len=64, output_len=16, max_num_seqs=32)
        assert r["batch"] == min(c, 32)
        assert r["tpot_bound_ms"] == pytest.approx(b.tpot_s * 1000, rel=1e-9)
        assert r["ttft_bound_ms"] == pytest.approx(b.ttft_s * 1000, rel=1e-9)
        assert r["output_tokens_per_s_bound"] == pytest.approx(b.output_tokens_per_s, rel=1e-9)
        assert (r["decode_bound_by"], r["prefill_bound_by"]) == (b.decode_bound_by, b.prefill_bound_by)
        assert r["throughput_fraction"] == pytest.approx(r["output_throughput"] / b.output_tokens_per_s)
        assert r["tpot_fraction"] == pytest.approx(b.tpot_s * 1000 / r["median_tpot_ms"])


def test_the_hardware_is_named_with_its_source(roofline):
    assert roofline["inf2-c1"]["hardware"] == "1× Inferentia2 (2 of its NeuronCores)"
    assert roofline["g5-c1"]["hardware"] == "4× A10G" and "A10 datasheet" in roofline["g5-c1"]["hardware_source"]
    assert roofline["cpu-c1"]["hardware"] == "CPU (measured)"
    assert "weights in cache can beat it" in roofline["cpu-c1"]["roofline_note"]


def test_a_point_without_facts_has_null_bounds_and_says_why(roofline):
    for prefix, why in (("nofacts", "no served-model facts"), ("unknown", "no hardware facts for instance type x9")):
        r = roofline[f"{prefix}-c1"]
        assert r["tpot_bound_ms"] is None and r["throughput_fraction"] is None and why in r["roofline_note"]


def test_the_report_shows_the_limit_in_the_serving_tables_the_decision_and_its_own_section(store, tmp_path):
    out = tmp_path / "report"
    build_report_files(str(store.root), None, out)
    md = (out / "REPORT.md").read_text()
    comparison = json.loads((out / "comparison.json").read_text())
    serving = next(line for line in md.splitlines() if line.startswith("| conc |"))
    assert "% of limit" in serving
    decision = [r for r in comparison["decision"]["rows"] if r.get("lane") == "serve_sweep@c01" and r.get("meets")]
    assert decision and all(0 < r["limit_fraction"] < 1 for r in decision)
    assert "## Roofline" in md and "(1× Inferentia2 (2 of its NeuronCores))" in md
    assert "![roofline](roofline.png)" in md and (out / "roofline.png").exists()
    assert "no served-model facts recorded with this point" in md
