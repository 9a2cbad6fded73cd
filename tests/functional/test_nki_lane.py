"""The nki lane through the real runner and the plan (skipped here with its reason; a bad spec refused before anything
starts, or failing the lane when it comes from S3), and fixed kernel rows through the views into REPORT.md's section."""

from __future__ import annotations

import math
import shutil
from datetime import datetime, timezone
from types import SimpleNamespace

import boto3
import pytest
from moto import mock_aws

from agents.runner import LaneRequest, run_lane
from analytics.report.comparison import existing_views
from analytics.report.document import Kernels
from analytics.report.kernels import kernels_section
from analytics.report.kernels_md import s_kernels
from analytics.store import LocalStore
from analytics.views import connect
from control_plane.cli import main
from pipeline.lane_configs.nki import BUNDLED_KERNELS
from tests.support.views import q


def test_the_lane_is_skipped_on_the_cpu_backend_with_its_reason(tmp_path):
    store = LocalStore(tmp_path / "results")
    result = run_lane(LaneRequest("nki", "r1", backend="cpu"), store)
    assert (result.status, result.exit_code) == ("skipped", 0)
    assert result.skip_reason.startswith("the NKI package cannot be imported on backend 'cpu' (nki: No module named")
    assert "2 kernel spec(s) read and checked" in result.skip_reason
    con = connect(store, view_files=["45_report_kernels.sql"])
    assert q(con, "SELECT count(*) AS n FROM kernel_checks") == [{"n": 0}]


def _bad_dir(tmp_path):
    d = tmp_path / "kernels"
    d.mkdir()
    shutil.copy(BUNDLED_KERNELS / "row_softmax.py", d)
    text = (BUNDLED_KERNELS / "row_softmax.toml").read_text()
    (d / "row_softmax.toml").write_text(text.replace('dtypes = ["float32"]', 'dtypes = ["float32", "float32"]'))
    return d


def test_the_plan_refuses_a_bad_local_spec_in_one_line(tmp_path, capsys):
    d = _bad_dir(tmp_path)
    request = tmp_path / "req.json"
    request.write_text(f'{{"run_id": "k1", "lanes": ["nki"], "lane_config": {{"nki": {{"kernel_dir": "{d}"}}}}}}')
    assert main(["plan", "--local", "--input", str(request)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.endswith(
        f"{d / 'row_softmax.toml'}: dtypes: 2 input(s), but row_softmax.py's row_softmax() "
        "takes 1 positional argument(s)"
    )
    assert not (tmp_path / "results").exists()


@mock_aws
def test_a_bad_spec_from_s3_fails_the_lane_with_the_same_line(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="kernels")
    for path in _bad_dir(tmp_path).iterdir():
        s3.put_object(Bucket="kernels", Key=f"mine/{path.name}", Body=path.read_bytes())
    store = LocalStore(tmp_path / "results")
    result = run_lane(LaneRequest("nki", "r1", backend="cpu", config={"kernel_dir": "s3://kernels/mine"}), store)
    assert (result.status, result.error_type) == ("failed", "KernelSpecError")
    assert result.error_message.endswith(
        "row_softmax.toml: dtypes: 2 input(s), but row_softmax.py's row_softmax() takes 1 positional argument(s)"
    )
    empty = run_lane(LaneRequest("nki", "r2", backend="cpu", config={"kernel_dir": "s3://kernels/none"}), store)
    assert empty.error_message == "s3://kernels/none: kernel_dir: no objects under this prefix"


T = datetime(2026, 12, 7, tzinfo=timezone.utc)
BASE = {"kernel_function": "k", "kernel_file": "k.py", "dtypes": "float32"}
TOL = {"tol_max_abs": 1e-5, "tol_max_rel": 1e-4}


def _rows():
    checks, timings = [], []
    for i, shape in enumerate(["128x512", "128x2048"]):
        common = {**BASE, "kernel": "alpha", "shape_index": i, "shape": shape, "ts": T}
        outside = 0 if i == 0 else 7
        checks += [
            {
                **common,
                **TOL,
                "stage": "simulate",
                "outcome": "ok",
                "max_abs_err": 1e-7,
                "outside_tolerance": outside,
                "elements": 65536,
            },
            {**common, **TOL, "stage": "compile", "outcome": "ok", "wall_s": 30.0},
            {**common, **TOL, "stage": "device", "outcome": "ok", "max_abs_err": 2e-7, "outside_tolerance": 0},
        ]
        timings += [
            {**common, "implementation": "kernel", "op": "k", "latencies_us": [float(x) for x in range(100, 200)]},
            {
                **common,
                "implementation": "reference",
                "op": "torch:softmax",
                "latencies_us": [2.0 * x for x in range(100, 200)],
            },
        ]
    beta = {**BASE, "kernel": "beta", "shape_index": 0, "shape": "64x64", "ts": T}
    checks += [
        {
            **beta,
            **TOL,
            "stage": "simulate",
            "outcome": "ok",
            "max_abs_err": 0.0,
            "outside_tolerance": 0,
            "elements": 4096,
        },
        {**beta, **TOL, "stage": "compile", "outcome": "not_run", "not_run_reason": "no NeuronCore"},
        {**beta, **TOL, "stage": "device", "outcome": "not_run", "not_run_reason": "no NeuronCore"},
    ]
    timings.append({**beta, "implementation": "kernel", "op": "k", "not_run_reason": "no NeuronCore"})
    return checks, timings


def _order_stat(values, p, z):
    n = len(values)
    lo = math.floor(n * p - z * math.sqrt(n * p * (1 - p)))
    hi = math.ceil(n * p + z * math.sqrt(n * p * (1 - p))) + 1
    return sorted(values)[lo - 1], sorted(values)[hi - 1]


def test_fixed_rows_give_verdicts_percentiles_and_a_speedup_with_its_interval_in_the_report(tmp_path):
    store = LocalStore(tmp_path / "results")
    checks, timings = _rows()
    writer = store.begin_attempt("k1", "nki")
    writer.add_rows("kernel_checks", checks)
    writer.add_rows("kernel_timings", timings)
    writer.commit("succeeded")
    con = connect(store, view_files=["45_report_kernels.sql"])
    shapes = {(r["kernel"], r["shape_index"]): r for r in q(con, "SELECT * FROM report_kernels")}
    first = shapes[("alpha", 0)]
    kernel_us = [float(x) for x in range(100, 200)]
    ref_us = [2.0 * x for x in kernel_us]
    assert (first["simulate"], first["compile"], first["device"], first["verdict"]) == ("pass", "pass", "pass", "pass")
    assert first["kernel_p50_us"] == pytest.approx(149.5) and first["reference_p50_us"] == pytest.approx(299.0)
    assert (first["kernel_p50_low_us"], first["kernel_p50_high_us"]) == _order_stat(kernel_us, 0.5, 1.96)
    k_lo, k_hi = _order_stat(kernel_us, 0.5, 2.2414)
    r_lo, r_hi = _order_stat(ref_us, 0.5, 2.2414)
    assert first["speedup"] == pytest.approx(2.0)
    assert (first["speedup_low"], first["speedup_high"]) == (pytest.approx(r_lo / k_hi), pytest.approx(r_hi / k_lo))
    assert shapes[("alpha", 1)]["verdict"] == "fail" and shapes[("alpha", 1)]["simulate_outside_tolerance"] == 7
    beta = shapes[("beta", 0)]
    assert (beta["verdict"], beta["compile"], beta["speedup"]) == ("simulated only", "not run", None)
    assert beta["timing_not_run_reason"] == "no NeuronCore"
    verdicts = {r["kernel"]: r for r in q(con, "SELECT * FROM report_kernel_verdicts")}
    assert (verdicts["alpha"]["verdict"], verdicts["alpha"]["passed"], verdicts["alpha"]["failed"]) == ("fail", 1, 1)
    assert verdicts["beta"]["verdict"] == "simulated only"

    section = kernels_section(con, existing_views(con))
    lines = s_kernels(SimpleNamespace(kernels=Kernels.model_validate(section)))
    text = "\n".join(lines)
    assert lines[0] == "## Kernels (NKI)"
    assert f"| 149.50 [{k_lo_95(kernel_us)}] | torch:softmax |" in text
    assert "| 2.00 [" in text and "| fail |" in text and "| simulated only |" in text
    assert "- Not run at beta 64x64: no NeuronCore" in text
    assert s_kernels(SimpleNamespace(kernels=None)) == []


def k_lo_95(values):
    lo, hi = _order_stat(values, 0.5, 1.96)
    return f"{lo:.2f}, {hi:.2f}"
