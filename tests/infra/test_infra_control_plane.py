"""The ControlPlane stack: state machine from the checked-in ASL, the Lambdas, the rules (INTERFACES C, F)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from aws_cdk.assertions import Match

from infra.config import ADAPTERS_PREFIX, STACK_CONTROL_PLANE
from infra.stacks.control import (
    EXECUTION_ENDED_STATUSES,
    EXECUTION_STATUS_DETAIL_TYPE,
    HANDLERS,
    SSM_FAILED_STATUSES,
    SSM_STATUS_DETAIL_TYPE,
)

ROOT = Path(__file__).resolve().parents[2]


def _rules(synthesized):
    return synthesized.resources(STACK_CONTROL_PLANE, "AWS::Events::Rule")


def _target_logical_id(rule) -> str:
    (target,) = rule["Properties"]["Targets"]
    return target["Arn"]["Fn::GetAtt"][0]


def _lease_table_id(synthesized) -> str:
    (table_id,) = synthesized.resources(STACK_CONTROL_PLANE, "AWS::DynamoDB::Table")
    return table_id


def _function_ids(synthesized) -> dict[str, str]:
    fns = synthesized.resources(STACK_CONTROL_PLANE, "AWS::Lambda::Function")
    return {f["Properties"]["Handler"].split(".")[-2]: k for k, f in fns.items()}


def test_lambdas_by_handler_path(synthesized):
    fns = synthesized.resources(STACK_CONTROL_PLANE, "AWS::Lambda::Function")
    handlers = sorted(f["Properties"]["Handler"] for f in fns.values())
    assert sorted(HANDLERS) == [
        "commit_lane",
        "finalize_run",
        "idle_reaper",
        "on_command_status",
        "on_execution_status",
        "plan_execution",
        "plan_run",
        "schedule_wave",
    ]
    assert handlers == sorted(f"control_plane.handlers.{n}.handler" for n in HANDLERS)
    for f in fns.values():
        p = f["Properties"]
        assert p["Runtime"].startswith("python3.")
        assert p["TracingConfig"] == {"Mode": "Active"}
        assert len(p["Layers"]) == 1  # the third-party layer
        env = p["Environment"]["Variables"]
        assert env["NEURONPIPE_RESULTS_URI"]
        assert {"NEURONPIPE_TRN1_INSTANCE_ID", "NEURONPIPE_INF2_INSTANCE_ID", "NEURONPIPE_STATE_MACHINE_ARN"} <= set(
            env
        )
        assert env["NEURONPIPE_MAX_COST_USD_CEILING"] == "50"  # cdk.json max_cost_usd_ceiling (INTERFACES D)
        assert env["NEURONPIPE_LEASE_TABLE"] == {"Ref": _lease_table_id(synthesized)}


def test_lambda_code_asset_holds_the_handlers(synthesized):
    assets = json.loads((synthesized.outdir / f"{STACK_CONTROL_PLANE}.assets.json").read_text())["files"]
    dirs = [synthesized.outdir / a["source"]["path"] for a in assets.values() if a["source"].get("packaging") == "zip"]
    code = [d for d in dirs if (d / "control_plane").is_dir()]
    assert any((d / "python").is_dir() for d in dirs)  # the layer keeps python/ at its root
    assert code, "no asset folder carries the first-party packages"
    for pkg in ("control_plane", "statemachine", "analytics", "agents"):
        assert (code[0] / pkg / "__init__.py").is_file()
    assert not list(code[0].rglob("__pycache__"))
    for name in HANDLERS:
        if (ROOT / "control_plane" / "handlers" / f"{name}.py").is_file():
            assert (code[0] / "control_plane" / "handlers" / f"{name}.py").is_file()


def test_state_machine_is_the_checked_in_asl_with_every_substitution(synthesized):
    from statemachine.build import ASL_PATH, SUBSTITUTIONS, placeholders

    (machine,) = synthesized.resources(STACK_CONTROL_PLANE, "AWS::StepFunctions::StateMachine").values()
    p = machine["Properties"]
    assert json.loads(p["DefinitionString"]) == json.loads(ASL_PATH.read_text())
    assert set(p["DefinitionSubstitutions"]) == set(SUBSTITUTIONS) == placeholders(ASL_PATH.read_text())
    assert p["DefinitionSubstitutions"]["FinalizeRunFunctionArn"] == {
        "Fn::GetAtt": [_function_ids(synthesized)["finalize_run"], "Arn"]
    }
    assert p["DefinitionSubstitutions"]["ScheduleWaveFunctionArn"] == {
        "Fn::GetAtt": [_function_ids(synthesized)["schedule_wave"], "Arn"]
    }
    # an execution started with a run request plans itself with plan_execution
    assert p["DefinitionSubstitutions"]["PlanExecutionFunctionArn"] == {
        "Fn::GetAtt": [_function_ids(synthesized)["plan_execution"], "Arn"]
    }
    if "LeaseTableName" in SUBSTITUTIONS:  # INTERFACES B: the ASL releases leases in this table
        assert p["DefinitionSubstitutions"]["LeaseTableName"] == {"Ref": _lease_table_id(synthesized)}
    assert p["StateMachineName"] == synthesized.settings.state_machine_name
    assert p["LoggingConfiguration"]["Level"] == "ALL"
    assert p["TracingConfiguration"] == {"Enabled": True}


def test_failed_ssm_commands_route_to_on_command_status(synthesized):
    ids = _function_ids(synthesized)
    rule = next(
        r for r in _rules(synthesized).values() if r["Properties"].get("EventPattern", {}).get("source") == ["aws.ssm"]
    )
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["detail-type"] == [SSM_STATUS_DETAIL_TYPE]
    assert sorted(pattern["detail"]["status"]) == sorted(SSM_FAILED_STATUSES) == ["Cancelled", "Failed", "TimedOut"]
    # any instance (a matrix's ephemeral boxes are launched per run), the state machine's document only
    assert "instance-id" not in pattern["detail"] and pattern["detail"]["document-name"] == ["AWS-RunShellScript"]
    assert _target_logical_id(rule) == ids["on_command_status"]


def test_nightly_smoke_schedule_is_disabled_and_passes_its_time(synthesized):
    """INTERFACES C: the schedule's time reaches plan_run, which names the run after it (same minute,
    same name: a redelivery is refused by Step Functions)."""
    ids = _function_ids(synthesized)
    rule = next(
        r for r in _rules(synthesized).values() if r["Properties"].get("ScheduleExpression", "").startswith("cron")
    )
    assert rule["Properties"]["State"] == "DISABLED"
    assert _target_logical_id(rule) == ids["plan_run"]
    (target,) = rule["Properties"]["Targets"]
    transformer = target["InputTransformer"]
    assert transformer["InputPathsMap"] == {"time": "$.time"}
    delivered = json.loads(transformer["InputTemplate"].replace("<time>", json.dumps("2026-05-04T06:00:00Z")))
    assert delivered == {
        "schedule": "nightly-smoke",
        "time": "2026-05-04T06:00:00Z",
        "request": {"preset": "smoke", "trigger": "schedule:nightly-smoke", "baseline": {"last": 5}},
    }


def test_each_named_schedule_is_one_rule_enabled_or_not_carrying_its_name_and_baseline(redeploy):
    """Schedules of the deploy settings: one rule each, its state as declared, its request with the trigger
    schedule:<name> and the schedule's baseline unless the request names its own."""
    rules = {
        k: r
        for k, r in redeploy[STACK_CONTROL_PLANE]["Resources"].items()
        if r["Type"] == "AWS::Events::Rule" and "ScheduleExpression" in r["Properties"]
    }
    by_expr = {r["Properties"]["ScheduleExpression"]: (k, r) for k, r in rules.items()}
    nightly_id, nightly = by_expr["cron(30 5 * * ? *)"]
    weekly_id, weekly = by_expr["rate(7 days)"]
    assert nightly_id.startswith("NightlySmokeSchedule") and weekly_id.startswith("WeeklyServeSchedule")
    assert nightly["Properties"]["State"] == "ENABLED" and weekly["Properties"]["State"] == "DISABLED"

    def delivered(rule):
        (target,) = rule["Properties"]["Targets"]
        return json.loads(target["InputTransformer"]["InputTemplate"].replace("<time>", '"T"'))

    assert delivered(nightly)["request"] == {
        "preset": "smoke",
        "trigger": "schedule:nightly-smoke",
        "baseline": {"last": 5},
    }
    assert delivered(weekly) == {
        "schedule": "weekly-serve",
        "time": "T",
        "request": {
            "lanes": ["serve_sweep"],
            "profile": "tiny",
            "baseline": "serve-golden",
            "trigger": "schedule:weekly-serve",
        },
    }


def test_schedules_refuse_a_bad_expression_or_a_name_declared_twice():
    from infra.config import DeploymentSettings, SettingsError

    one = {"name": "n", "expression": "cron(0 6 * * ? *)", "request": {"preset": "smoke"}}
    for schedules, said in (
        ([{**one, "expression": "cron(0 6 * * *)"}], "6 fields"),
        ([{**one, "expression": "cron(0 6 * * 1 *)"}], "day-of-month and day-of-week"),
        ([{**one, "expression": "every day"}], "expected cron(...) or rate(...)"),
        ([one, one], "n declared twice"),
        ([{**one, "name": "Nightly Smoke"}], "schedules.0.name"),
    ):
        with pytest.raises((SettingsError, ValueError), match=re.escape(said)):
            DeploymentSettings.from_context({"account": None, "schedules": schedules})


def test_adapter_upload_reaches_plan_run_as_the_native_event(synthesized):
    """INTERFACES C: no input transformer, so plan_run sees bucket, key and version/etag (its dedup key)."""
    ids = _function_ids(synthesized)
    synthesized.template(STACK_CONTROL_PLANE).has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.s3"],
                "detail-type": ["Object Created"],
                "detail": {
                    "bucket": {"name": Match.any_value()},
                    "object": {
                        "key": [{"wildcard": f"{ADAPTERS_PREFIX}*.tar.gz"}, {"wildcard": f"{ADAPTERS_PREFIX}*.tgz"}]
                    },
                },
            }
        },
    )
    rule = next(
        r for r in _rules(synthesized).values() if r["Properties"].get("EventPattern", {}).get("source") == ["aws.s3"]
    )
    assert _target_logical_id(rule) == ids["plan_run"]
    (target,) = rule["Properties"]["Targets"]
    assert "InputTransformer" not in target and "Input" not in target and "InputPath" not in target


def test_a_run_ending_badly_routes_to_on_execution_status(synthesized):
    ids = _function_ids(synthesized)
    rule = next(
        r
        for r in _rules(synthesized).values()
        if r["Properties"].get("EventPattern", {}).get("source") == ["aws.states"]
    )
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["detail-type"] == [EXECUTION_STATUS_DETAIL_TYPE] == ["Step Functions Execution Status Change"]
    assert sorted(pattern["detail"]["status"]) == sorted(EXECUTION_ENDED_STATUSES) == ["ABORTED", "FAILED", "TIMED_OUT"]
    assert pattern["detail"]["stateMachineArn"] == [{"Fn::GetAtt": ["RunStateMachine", "Arn"]}]
    assert _target_logical_id(rule) == ids["on_execution_status"]
    (target,) = rule["Properties"]["Targets"]
    assert "InputTransformer" not in target and "Input" not in target


def test_idle_reaper_runs_on_a_schedule(synthesized):
    ids = _function_ids(synthesized)
    rule = next(
        r for r in _rules(synthesized).values() if r["Properties"].get("ScheduleExpression", "").startswith("rate")
    )
    assert rule["Properties"]["ScheduleExpression"] == f"rate({synthesized.settings.idle_reaper_rate_minutes} minutes)"
    assert rule["Properties"]["State"] == "ENABLED"
    assert _target_logical_id(rule) == ids["idle_reaper"]
