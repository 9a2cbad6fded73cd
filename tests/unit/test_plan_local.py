"""One planner: `run --local` plans with `plan_local`, the AWS planner's twin — the same lanes, lane configs, SLO
and checks — and `neuronpipe plan --local` prints that plan."""

from __future__ import annotations

import json

import pytest

from control_plane.cli import main
from control_plane.lane_configs import LaneConfigInvalidError
from control_plane.local_plan import local_request, plan_local
from control_plane.models import RunRequest
from control_plane.plan import plan_run
from control_plane.run_ids import RunIdError, check_run_id, new_run_id
from pipeline.graph import LOCAL

RESULTS = "s3://bucket/results"


def _aws_configs(request: RunRequest) -> dict[str, dict]:
    plan = plan_run(request, run_id="r", results_uri=RESULTS)
    return {step.lane: step.config for step in plan.lane_steps if step.config}


@pytest.mark.parametrize(
    "request_json",
    [
        {"preset": "full", "models": ["qwen3-8b"], "server_configs": ["B"], "slo": "cpu-tiny"},
        {"lanes": ["serve_sweep", "sustained", "quality"], "slo": {"ttft_ms": 900, "tpot_ms": 40}},
        {
            "preset": "finetune_serve",
            "adapter_uri": "s3://bucket/adapters/a.tar.gz",
            "lane_config": {"finetune_serve": {"min_prompts": 2}},
        },
    ],
    ids=["full", "serving-lanes", "finetune-serve"],
)
def test_local_and_aws_plans_carry_the_same_lanes_and_configs(request_json):
    request = RunRequest.model_validate(request_json)
    local = plan_local(request, run_id="r", results_uri="results")
    aws = plan_run(request, run_id="r", results_uri=RESULTS)
    assert {n.lane for n in local.nodes} == {step.lane for step in aws.lane_steps}
    assert dict(local.configs) == _aws_configs(request)
    assert {n.box for n in local.nodes} == {LOCAL}


def test_a_lane_config_that_does_not_fit_is_refused_by_both_planners():
    request = RunRequest(lanes=["host_cpu"], lane_config={"host_cpu": {"bogus_field": 1}})
    with pytest.raises(LaneConfigInvalidError, match="host_cpu.bogus_field: unknown field") as aws:
        plan_run(request, run_id="r", results_uri=RESULTS)
    with pytest.raises(LaneConfigInvalidError) as local:
        plan_local(request, run_id="r", results_uri="results")
    assert str(local.value) == str(aws.value)


def test_the_local_graph_is_in_run_order_and_a_lane_committed_before_binds_its_consumers():
    request = local_request(None, lanes=["quality", "sft"], profile="tiny")
    fresh = plan_local(request, run_id="r", results_uri="results")
    assert [n.lane for n in fresh.nodes] == ["sft", "quality"]
    assert "merge" not in dict((n.lane, n.needs) for n in fresh.nodes)["quality"]
    asked: list[str] = []
    resumed = plan_local(
        request, run_id="r", results_uri="results", in_run=lambda run_id: asked.append(run_id) or {"merge"}
    )
    assert asked == ["r"]
    assert "merge" in dict((n.lane, n.needs) for n in resumed.nodes)["quality"]


def test_local_request_takes_the_files_profile_else_the_flags_and_either_force():
    from_file = RunRequest(lanes=["host_cpu"], profile="full")
    assert local_request(from_file, profile="tiny").profile == "full"
    unset = RunRequest(lanes=["host_cpu"])
    assert (local_request(unset, profile="tiny").profile, local_request(unset, force=True).force) == ("tiny", True)
    assert local_request(unset, slo="cpu-tiny").slo == "cpu-tiny"
    assert local_request(None, lanes=None).preset == "full"


def test_run_ids_are_checked_by_the_one_rule():
    assert check_run_id(new_run_id())
    with pytest.raises(RunIdError, match="invalid run id 'a/b'"):
        check_run_id("a/b")
    with pytest.raises(RunIdError):
        plan_local(RunRequest(lanes=["host_cpu"]), run_id="-bad", results_uri="results")


def test_plan_local_prints_what_run_local_runs(tmp_path, capsys):
    req = tmp_path / "run.json"
    req.write_text(json.dumps({"lanes": ["sustained", "smoke"], "slo": "cpu-tiny"}))
    assert main(["plan", "--local", "--input", str(req), "--results", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "profile: tiny" in out
    lines = [line for line in out.splitlines() if "│" in line]
    assert [line.split("│")[2].strip() for line in lines] == ["smoke", "sustained"]
    assert '{"slo": "cpu-tiny"}' in lines[1]
    assert "worst case" not in out  # no boxes, no cost

    assert main(["plan", "--local", "--json", "--input", str(req)]) == 0
    data = json.loads(capsys.readouterr().out)
    expected = plan_local(
        local_request(RunRequest(lanes=["sustained", "smoke"], slo="cpu-tiny")), run_id="run-id", results_uri="results"
    )
    assert data == expected.to_json()


def test_plan_local_refuses_as_plan_does(tmp_path, capsys):
    req = tmp_path / "run.json"
    req.write_text(json.dumps({"lanes": ["host_cpu"], "lane_config": {"host_cpu": {"bogus_field": 1}}}))
    assert main(["plan", "--local", "--input", str(req)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"invalid request {req}: host_cpu.bogus_field: unknown field")
