"""RunRequest validation and RunRequest -> RunPlan (pure: no AWS)."""

from __future__ import annotations

import json

import pytest

from control_plane.box_scripts import Harness, ssm_output_prefix
from control_plane.cost import INSTANCE_PRICES_USD_PER_HOUR, LANE_ALLOWANCE_S, PHASE_ALLOWANCE_S, CostCeilingError
from control_plane.models import PlanNotReadyError, RunRequest, RunRequestError, parse_request
from control_plane.plan import EmptyPlanError, box_roles_for, plan_run
from control_plane.request_configs import selected_lanes
from pipeline.lanes import LANES, plan_order

RESULTS = "s3://bkt/results"


def lanes_by_phase(plan):
    """(box role, lanes) of every segment, wave by wave."""
    return [(p.box_role, [s.lane for s in p.lanes]) for p in plan.segments]


def test_full_preset_runs_both_boxes_in_wave_0_and_merge_s_consumers_in_wave_1():
    plan = plan_run(RunRequest(), run_id="r1", results_uri=RESULTS)
    assert plan.request.preset == "full"
    later = {"quality", "accuracy", "finetune_serve"}  # they need merge, on the other box
    wave0 = [
        (role, [s.name for s in plan_order(None) if role in s.boxes and s.name not in later])
        for role in ("trn1", "inf2")
    ]
    assert [[(seg.box_role, [s.lane for s in seg.lanes]) for seg in w.segments] for w in plan.waves] == [
        wave0,
        [("inf2", ["quality", "accuracy", "finetune_serve"])],
    ]
    assert [seg.release_lease for seg in plan.segments] == [True, False, True]  # inf2 keeps its lease in between
    steps = {s.result_lane: s for s in plan.lane_steps}
    assert steps["finetune_serve"].needs == ["preflight@inf2", "smoke@inf2", "merge"]
    assert steps["finetune_serve"].wave == 1
    assert "--needs preflight@inf2,smoke@inf2,merge" in steps["finetune_serve"].script
    assert steps["smoke@trn1"].gate and steps["smoke@trn1"].needs == ["preflight@trn1"]
    assert steps["preflight@trn1"].gate and not steps["preflight@trn1"].needs
    assert [n["result_lane"] for n in plan.nodes] == sorted(
        steps, key=lambda r: (steps[r].wave, steps[r].box_role, LANES[steps[r].lane].order)
    )
    # the worst case is per segment (each starts, syncs and stops its box)
    assert plan.max_cost_usd == round(sum(seg.max_cost_usd for seg in plan.segments), 2)
    from control_plane.request_configs import IDLE_LANE_TIMEOUT_S

    idle = {"limits", "train_limits"}  # the full profile declares no bisection: they skip at once
    for step in plan.lane_steps:
        timeout = IDLE_LANE_TIMEOUT_S if step.lane in idle else LANES[step.lane].timeout_s
        assert (step.timeout_s, step.heartbeat_s) == (timeout, LANES[step.lane].heartbeat_s)


def test_smoke_preset_runs_on_both_boxes():
    plan = plan_run(RunRequest(preset="smoke"), run_id="r1", results_uri=RESULTS)
    assert lanes_by_phase(plan) == [
        ("trn1", ["provenance", "preflight", "host_cpu", "smoke"]),
        ("inf2", ["provenance", "preflight", "host_cpu", "smoke"]),
    ]


def test_finetune_serve_preset_needs_only_the_inf2_box():
    plan = plan_run(
        RunRequest(preset="finetune_serve", adapter_uri="s3://b/adapters/a"), run_id="r1", results_uri=RESULTS
    )
    assert lanes_by_phase(plan) == [("inf2", ["provenance", "preflight", "finetune_serve"])]
    assert plan.lane_steps[2].config == {"adapter_uri": "s3://b/adapters/a"}


def test_explicit_lanes_are_ordered_by_the_registry_and_pick_their_boxes():
    request = RunRequest(lanes=["merge", "provenance", "sft"])
    assert [s.name for s in selected_lanes(request)] == ["provenance", "sft", "merge"]
    assert box_roles_for(selected_lanes(request)) == ["trn1"]
    assert lanes_by_phase(plan_run(request, run_id="r", results_uri=RESULTS)) == [
        ("trn1", ["provenance", "sft", "merge"])
    ]


def test_committed_lanes_are_skipped_unless_forced():
    # lanes that run on both boxes commit per box (provenance@trn1, provenance@inf2)
    plan = plan_run(RunRequest(preset="smoke"), run_id="r1", results_uri=RESULTS, committed={"provenance@trn1"})
    assert lanes_by_phase(plan) == [
        ("trn1", ["preflight", "host_cpu", "smoke"]),
        ("inf2", ["provenance", "preflight", "host_cpu", "smoke"]),
    ]
    assert [(s.box_role, s.lane) for s in plan.skipped] == [("trn1", "provenance")]
    forced = plan_run(
        RunRequest(preset="smoke", force=True), run_id="r1", results_uri=RESULTS, committed={"provenance@trn1"}
    )
    assert forced.skipped == [] and "--force" in forced.lane_steps[0].script
    both = {f"{lane}@{box}" for lane in ("provenance", "preflight", "host_cpu", "smoke") for box in ("trn1", "inf2")}
    with pytest.raises(EmptyPlanError, match="already committed"):
        plan_run(RunRequest(preset="smoke"), run_id="r1", results_uri=RESULTS, committed=both)
    single = plan_run(RunRequest(lanes=["sft", "merge"]), run_id="r1", results_uri=RESULTS, committed={"sft"})
    assert lanes_by_phase(single) == [("trn1", ["merge"])]


def test_worst_case_cost_is_timeouts_plus_allowance_times_price():
    plan = plan_run(RunRequest(lanes=["sft"]), run_id="r", results_uri=RESULTS)
    hours = (LANES["sft"].timeout_s + LANE_ALLOWANCE_S + PHASE_ALLOWANCE_S) / 3600
    assert plan.max_instance_hours == pytest.approx(hours, abs=1e-3)
    assert plan.max_cost_usd == pytest.approx(hours * INSTANCE_PRICES_USD_PER_HOUR["trn1.2xlarge"], abs=0.01)


def test_cost_ceiling_rejects_an_expensive_plan_naming_the_field():
    with pytest.raises(CostCeilingError, match=r"max_cost_usd: worst case \$\d+\.\d\d exceeds the ceiling \$5\.00"):
        plan_run(RunRequest(preset="full", max_cost_usd=5), run_id="r", results_uri=RESULTS)


@pytest.mark.parametrize(
    "data, field",
    [
        ({"lanes": ["sft", "nope"]}, "lanes"),
        ({"preset": "huge"}, "preset"),
        ({"models": ["gpt-5"]}, "models.0"),
        ({"models": ["qwen3-8b", "qwen3-8b"]}, "models"),
        ({"run_id": "has/slash"}, "run_id"),
        ({"max_cost_usd": 0}, "max_cost_usd"),
        ({"surprise": 1}, "surprise"),
        ({"lane_config": {"nope": {}}}, "lane_config"),
    ],
)
def test_invalid_requests_name_the_field(data, field):
    with pytest.raises(RunRequestError) as info:
        parse_request(data)
    assert str(info.value).startswith(f"{field}: ")


def test_unknown_lane_error_lists_the_valid_lanes():
    with pytest.raises(RunRequestError, match="valid lanes: provenance, preflight, host_cpu"):
        parse_request({"lanes": ["nope"]})


def test_preset_and_lanes_together_are_rejected():
    with pytest.raises(RunRequestError, match="either preset or lanes"):
        parse_request({"preset": "smoke", "lanes": ["sft"]})


def test_models_and_server_configs_reach_only_the_lanes_that_take_them():
    request = RunRequest(models=["qwen3-8b"], server_configs=["B"], lane_config={"sft": {"steps": 5}})
    plan = plan_run(request, run_id="r", results_uri=RESULTS)
    configs = {(s.box_role, s.lane): s.config for s in plan.lane_steps}
    assert configs[("trn1", "provenance")] is None
    assert configs[("trn1", "sft")] == {"models": ["qwen3-8b"], "steps": 5}
    assert configs[("inf2", "serve_sweep")] == {"models": ["qwen3-8b"], "server_configs": ["B"]}
    # defaults are not passed at all: a lane that does not take them is never handed them
    default = plan_run(RunRequest(), run_id="r", results_uri=RESULTS)
    assert all(s.config is None for s in default.lane_steps)


def test_lane_script_runs_the_agent_with_the_token_from_the_environment():
    request = RunRequest(lanes=["sft"], models=["qwen3-8b"])
    plan = plan_run(request, run_id="r-7", results_uri=RESULTS, harness=Harness("/opt/np"))
    step = plan.lane_steps[0]
    assert 'cd "${NEURONPIPE_BOX_ROOT:-}"/opt/np\n' in step.script
    assert (
        "exec .venv/bin/python -m agents run-lane sft --run-id r-7 --results s3://bkt/results --profile full "
        '--heartbeat-s 150 --config \'{"models": ["qwen3-8b"]}\' '
        '--task-token "$NEURONPIPE_TASK_TOKEN"'
    ) in step.script
    assert step.execution_timeout == [str(LANES["sft"].timeout_s)]
    assert step.output_prefix == "results/logs/r-7/sft/ssm-trn1"
    assert step.comment == "neuronpipe sft r-7"
    assert plan.segments[0].sync.script.rstrip().endswith('--task-output "{\\"harness\\": \\"ready\\"}"')


def test_harness_package_is_installed_at_sync_when_given():
    plan = plan_run(
        RunRequest(lanes=["sft"]),
        run_id="r",
        results_uri=RESULTS,
        harness=Harness(package_uri="s3://bkt/harness/np.tar.gz"),
    )
    assert "aws s3 cp s3://bkt/harness/np.tar.gz" in plan.segments[0].sync.script


def test_output_prefix_lives_under_the_results_root():
    assert ssm_output_prefix("s3://b/results", "r", "sft") == "results/logs/r/sft"
    assert ssm_output_prefix("s3://b", "r", "sft") == "logs/r/sft"


def test_execution_input_needs_instances_and_s3_results():
    plan = plan_run(RunRequest(preset="smoke"), run_id="r", results_uri=RESULTS)
    with pytest.raises(PlanNotReadyError, match="trn1, inf2"):
        plan.execution_input()
    ready = plan.with_instances({"trn1": "i-trn1", "inf2": "i-inf2"})
    data = ready.execution_input()
    assert json.loads(json.dumps(data)) == data
    assert [b["instance_id"] for b in data["boxes"]] == ["i-trn1", "i-inf2"]
    assert [s["instance_id"] for w in data["waves"] for s in w["segments"]] == ["i-trn1", "i-inf2"]
    assert set(data["waves"][0]["segments"][0]["lanes"][0]) >= {
        "lane",
        "timeout_s",
        "heartbeat_s",
        "script",
        "comment",
        "execution_timeout",
        "output_prefix",
    }
    local = plan_run(RunRequest(lanes=["sft"]), run_id="r", results_uri="/tmp/results")
    with pytest.raises(PlanNotReadyError, match="s3://"):
        local.with_instances({"trn1": "i"}).execution_input()


def test_plan_is_deterministic():
    a = plan_run(RunRequest(preset="full"), run_id="r", results_uri=RESULTS)
    b = plan_run(RunRequest(preset="full"), run_id="r", results_uri=RESULTS)
    assert a.model_dump_json() == b.model_dump_json()


def test_lane_config_field_names_match_the_lanes_configs():
    """Every field the plan passes to a lane exists on that lane's Config (else the agent refuses it)."""
    import dataclasses

    from control_plane.request_configs import lane_config
    from pipeline.lanes import get_lane

    request = RunRequest(
        models=["qwen3-8b"], server_configs=["B"], adapter_uri="s3://b/adapters/x.tar.gz", preset="full"
    )
    for lane in ("precompile", "sft", "merge", "serve_sweep", "sustained", "quality", "accuracy", "finetune_serve"):
        config = lane_config(request, lane) or {}
        fields = {f.name for f in dataclasses.fields(get_lane(lane).load().Config)}
        assert set(config) <= fields, (lane, set(config) - fields)


def test_every_segment_ends_with_a_cache_push_rendered_for_its_box_and_wave():
    from control_plane.box_scripts import BASH_GUARD, cache_push_script
    from statemachine.build import CACHE_PUSH_TIMEOUT_S

    plan = plan_run(RunRequest(preset="full"), run_id="r1", results_uri=RESULTS, harness=Harness(directory="/opt/np"))
    assert len(plan.segments) >= 3  # inf2 runs in two waves: each segment pushes what it compiled
    for seg in plan.segments:
        push = seg.cache_push
        assert push.script == cache_push_script("r1", RESULTS, seg.box_role, seg.wave, Harness(directory="/opt/np"))
        assert push.comment == "neuronpipe cache-push r1"
        assert push.execution_timeout == [str(CACHE_PUSH_TIMEOUT_S)]
        assert push.output_prefix == ssm_output_prefix(RESULTS, "r1", f"_cache-push-{seg.box_role}")
    script = cache_push_script("r1", RESULTS, "inf2", 1, Harness(directory="/opt/np"))
    lines = script.splitlines()
    assert lines[0] == BASH_GUARD and lines[1] == "set -euo pipefail"
    assert 'cd "${NEURONPIPE_BOX_ROOT:-}"/opt/np' in lines  # the lane scripts' prologue, IMDS and cd
    assert any(line.startswith("imds() {") for line in lines)
    assert lines[-1] == (
        f"exec .venv/bin/python -m agents cache push --results {RESULTS} --run-id r1 "
        '--box-role inf2 --segment 1 --task-token "$NEURONPIPE_TASK_TOKEN"'
    )
    data = plan.with_instances({"trn1": "i-1", "inf2": "i-2"}).execution_input()
    assert all(
        set(s["cache_push"]) == {"script", "comment", "execution_timeout", "output_prefix", "timeout_s"}
        for w in data["waves"]
        for s in w["segments"]
    )


def test_the_worst_case_cost_holds_the_cache_push_s_timeout():
    from statemachine.build import CACHE_PUSH_TIMEOUT_S, SYNC_TIMEOUT_S

    assert PHASE_ALLOWANCE_S >= SYNC_TIMEOUT_S + CACHE_PUSH_TIMEOUT_S
