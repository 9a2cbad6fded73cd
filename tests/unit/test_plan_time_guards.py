"""Honest guards at plan time: the deploy ceiling, lane configs against their Config, the input cap,
and the run ids triggers derive (no AWS)."""

from __future__ import annotations

import json

import pytest

from control_plane.cli import main
from control_plane.cost import CostCeilingError
from control_plane.handlers import plan_run as plan_run_handler
from control_plane.lane_configs import LaneConfigInvalidError
from control_plane.models import MAX_EXECUTION_INPUT_BYTES, ExecutionInputTooLargeError, RunRequest
from control_plane.plan import EmptyRequestError, plan_run
from control_plane.settings import get_settings
from tests.fixtures.event_samples import load_event, nightly_schedule_input

RESULTS = "s3://bkt/results"


@pytest.fixture(autouse=True)
def no_aws(monkeypatch):
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("NEURONPIPE_MAX_COST_USD_CEILING", raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


# ---- cost ceiling ---------------------------------------------------------------------------
def test_a_request_cannot_raise_the_deploy_ceiling():
    with pytest.raises(
        CostCeilingError,
        match=r"^max_cost_usd: 1e\+12 exceeds the deployment's ceiling \$50\.00 "
        r"\(cdk\.json neuronpipe\.max_cost_usd_ceiling\)$",
    ):
        plan_run(RunRequest(preset="smoke", max_cost_usd=1e12), run_id="r", results_uri=RESULTS)


def test_a_request_can_lower_the_ceiling_and_the_default_is_the_deploy_ceiling():
    plan = plan_run(RunRequest(preset="smoke"), run_id="r", results_uri=RESULTS, ceiling_usd=20)
    assert plan.cost_ceiling_usd == 20
    lowered = plan_run(RunRequest(preset="smoke", max_cost_usd=10), run_id="r", results_uri=RESULTS, ceiling_usd=20)
    assert lowered.cost_ceiling_usd == 10
    with pytest.raises(CostCeilingError, match=r"worst case \$\d+\.\d\d exceeds the ceiling \$1\.00"):
        plan_run(RunRequest(preset="smoke"), run_id="r", results_uri=RESULTS, ceiling_usd=1)


def test_the_cli_reads_the_deploy_ceiling_from_the_environment(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NEURONPIPE_MAX_COST_USD_CEILING", "5")
    get_settings.cache_clear()
    req = tmp_path / "run.json"
    req.write_text(json.dumps({"preset": "smoke", "max_cost_usd": 10}))
    assert main(["plan", "--input", str(req)]) == 2
    assert "exceeds the deployment's ceiling $5.00" in capsys.readouterr().err


def test_an_event_naming_neither_lanes_nor_preset_is_refused():
    with pytest.raises(EmptyRequestError, match="give lanes or a preset"):
        plan_run_handler.request_from_event({})
    with pytest.raises(EmptyRequestError):
        plan_run_handler.request_from_event({"models": ["qwen3-8b"]})


# ---- lane configs ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "lane_config, expected",
    [
        ({"sft": {"stepz": 3}}, "sft.stepz: unknown field; valid fields: "),
        ({"sft": {"steps": "ten"}}, "sft.steps: expected int, got str 'ten'"),
        ({"sft": {"learning_rate": -1e-4}}, "sft.learning_rate: must not be negative, got -0.0001"),
        ({"smoke": {"require_loss_fall": "yes"}}, "smoke.require_loss_fall: expected bool, got str 'yes'"),
        ({"serve_sweep": {"models": ["qwen3-8b", 3]}}, "serve_sweep.models: item 1: "),
    ],
)
def test_lane_config_is_checked_against_the_lanes_config_at_plan_time(lane_config, expected):
    with pytest.raises(LaneConfigInvalidError) as err:
        plan_run(RunRequest(preset="full", lane_config=lane_config), run_id="r", results_uri=RESULTS)
    assert str(err.value).startswith(expected)


def test_every_problem_of_every_lane_is_listed_and_a_valid_config_passes():
    with pytest.raises(LaneConfigInvalidError) as err:
        plan_run(
            RunRequest(preset="full", lane_config={"sft": {"steps": -1}, "merge": {"nope": 1}}),
            run_id="r",
            results_uri=RESULTS,
        )
    assert str(err.value).splitlines() == [
        "sft.steps: must not be negative, got -1",
        f"merge.nope: {str(err.value).splitlines()[1].split(': ', 1)[1]}",
    ]
    plan = plan_run(
        RunRequest(lanes=["sft"], lane_config={"sft": {"steps": 4, "learning_rate": 1e-4}}),
        run_id="r",
        results_uri=RESULTS,
    )
    assert plan.lane_steps[0].config == {"steps": 4, "learning_rate": 1e-4}


# ---- execution input cap -----------------------------------------------------------------
def test_an_execution_input_over_the_cap_is_refused():
    big = "x" * (MAX_EXECUTION_INPUT_BYTES // 2)
    with pytest.raises(
        ExecutionInputTooLargeError,
        match=r"^execution input with its largest wave: [\d,]+ bytes "
        rf"exceeds the cap of {MAX_EXECUTION_INPUT_BYTES:,} bytes "
        r"\(Step Functions allows 256 KiB\)",
    ):
        plan_run(RunRequest(lanes=["smoke"], lane_config={"smoke": {"model": big}}), run_id="r", results_uri=RESULTS)


# ---- `neuronpipe plan`: one clear line each, exit 2 --------------------------------------
@pytest.mark.parametrize(
    "body, expected",
    [
        ({"preset": "smoke", "max_cost_usd": 1e12}, "max_cost_usd: 1e+12 exceeds the deployment's ceiling $50.00"),
        ({"preset": "smoke", "lane_config": {"smoke": {"warp": 9}}}, "smoke.warp: unknown field"),
        ({"preset": "smoke", "trigger": "cli", "lane_config": {"smoke": {"model": "m" * 300_000}}}, "is 300,"),
    ],
)
def test_neuronpipe_plan_refuses_with_one_clear_line(tmp_path, capsys, body, expected):
    req = tmp_path / "run.json"
    req.write_text(json.dumps(body))
    assert main(["plan", "--input", str(req)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"invalid request {req}: ") and expected in lines[0]
    assert captured.out == ""


# ---- run ids of triggers -----------------------------------------------------------------
def test_s3_event_run_id_comes_from_bucket_key_and_version():
    event = load_event("s3_object_created")
    request, run_id = plan_run_handler.request_from_event(event)
    again = plan_run_handler.request_from_event(load_event("s3_object_created"))[1]
    assert run_id == again and run_id.startswith("adapter-") and len(run_id) == len("adapter-") + 16
    event["detail"]["object"]["version-id"] = "another-version"
    assert plan_run_handler.request_from_event(event)[1] != run_id  # a new upload is a new run
    del event["detail"]["object"]["version-id"]  # unversioned bucket: the etag identifies the object
    assert plan_run_handler.request_from_event(event)[1].startswith("adapter-")
    assert request.preset == "finetune_serve"
    assert request.adapter_uri.endswith("adapters/llama-3.1-8b-instruct/adapter.tar.gz")


def test_schedule_run_id_is_the_minute_of_the_event():
    event = load_event("scheduled_event")
    request, run_id = plan_run_handler.request_from_event(nightly_schedule_input(event))
    assert run_id == "nightly-smoke-20260701-0300" and request.preset == "smoke"
    assert request.trigger == "schedule:nightly-smoke"
    event["time"] = "2026-07-01T03:00:59Z"
    assert plan_run_handler.request_from_event(nightly_schedule_input(event))[1] == run_id
