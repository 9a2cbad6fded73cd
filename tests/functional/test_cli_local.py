"""`neuronpipe run --local`, `lanes` and `query` as a person runs them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.usefixtures("test_lanes")


def neuronpipe(*args, check=True):
    out = subprocess.run(
        [sys.executable, "-m", "control_plane.cli", *args], capture_output=True, text=True, timeout=600
    )
    if check:
        assert out.returncode == 0, out.stderr + out.stdout
    return out


def test_lanes_lists_the_plan_in_order():
    out = neuronpipe("lanes").stdout.split("\n")
    names = [line.split()[0] for line in out if line.strip()]
    assert names[:4] == ["provenance", "preflight", "host_cpu", "smoke"]
    assert names.index("sft") < names.index("merge") < names.index("serve_sweep")


def test_run_resume_and_force(tmp_path):
    results = str(tmp_path / "r")
    first = neuronpipe(
        "run", "--local", "--lanes", "t_skip,t_ok", "--results", results, "--run-id", "run-a", "--no-live"
    )
    assert "run-a" in first.stdout
    q = neuronpipe(
        "query",
        "--results",
        results,
        "--format",
        "json",
        "select lane, status, supersedes from lane_runs order by attempt",
    )
    rows = [json.loads(line) for line in q.stdout.splitlines()]
    assert [(r["lane"], r["status"]) for r in rows] == [("t_ok", "succeeded"), ("t_skip", "skipped")]

    neuronpipe("run", "--local", "--lanes", "t_ok,t_skip", "--results", results, "--run-id", "run-a", "--no-live")
    q = neuronpipe(
        "query",
        "--results",
        results,
        "--format",
        "csv",
        "select status, count(*) from lane_runs where not supersedes group by status",
    )
    assert q.stdout.strip().splitlines()[1:] == ["skipped,2"]  # both lanes skipped, nothing new committed

    neuronpipe("run", "--local", "--lanes", "t_ok", "--results", results, "--run-id", "run-a", "--force", "--no-live")
    q = neuronpipe(
        "query",
        "--results",
        results,
        "--format",
        "csv",
        "select count(*) as n, count(distinct attempt) as a from host_bench",
    )
    assert q.stdout.strip().splitlines()[1] == "1,1"  # the views show only the newest attempt
    q = neuronpipe(
        "query",
        "--results",
        results,
        "--format",
        "csv",
        "select count(*) from lane_runs where lane='t_ok' and status='succeeded'",
    )
    assert q.stdout.strip().splitlines()[1] == "2"


def test_failed_lane_leaves_the_run_partial(tmp_path):
    out = neuronpipe("run", "--local", "--lanes", "t_ok,t_boom", "--results", str(tmp_path), "--no-live", check=False)
    assert out.returncode == 3  # partial: t_ok succeeded, t_boom failed (pipeline.graph.EXIT_PARTIAL)
    assert "t_boom failed" in out.stderr and "RuntimeError" in out.stderr


def test_unknown_lane_is_a_usage_error(tmp_path):
    out = neuronpipe("run", "--local", "--lanes", "provenance,warp", "--results", str(tmp_path), check=False)
    assert out.returncode == 2 and "valid lanes" in out.stderr


def test_query_reports_sql_errors_clearly(tmp_path):
    from analytics.store.locate import write_identity

    write_identity(tmp_path)  # an empty results store: the SQL, not the path, is what is wrong
    out = neuronpipe("query", "--results", str(tmp_path), "select * from nope", check=False)
    assert out.returncode == 2 and "nope" in out.stderr


def test_query_and_report_refuse_a_directory_that_is_not_a_store(tmp_path):
    for args in (
        ("query", "--results", str(tmp_path), "select 1"),
        ("report", "--results", str(tmp_path), "--out", str(tmp_path / "out")),
    ):
        out = neuronpipe(*args, check=False)
        assert out.returncode == 2 and "is not a results store" in out.stderr, args
        assert out.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_provenance_lane_records_this_machine(tmp_path):
    results = str(tmp_path / "r")
    neuronpipe("run", "--local", "--lanes", "provenance", "--results", results, "--no-live")
    q = neuronpipe(
        "query",
        "--results",
        results,
        "--format",
        "json",
        "select name, value, note from provenance where category in ('python', 'package', 'instance')",
    )
    rows = {r["name"]: r for r in map(json.loads, q.stdout.splitlines())}
    assert rows["version"]["value"] == sys.version.split()[0]
    assert rows["pyarrow"]["value"]
    assert rows["vllm"]["value"] is None and rows["vllm"]["note"] == "not installed"
    assert rows["instance-id"]["value"] is None and "not on EC2" in rows["instance-id"]["note"]
