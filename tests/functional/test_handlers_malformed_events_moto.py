"""on_execution_status against moto, malformed events to every handler, and the safety-net handlers
importing without the Lambda layer."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone

import boto3
import pytest

from control_plane.aws import Executions, InstanceFleet, Leases
from control_plane.handlers import finalize_run, idle_reaper, on_command_status, on_execution_status, plan_run
from tests.conftest import ROOT
from tests.fixtures.aws import LEASE_TABLE
from tests.fixtures.event_samples import load_event
from tests.functional.test_handlers_moto import CONTEXT, aws  # noqa: F401 - pytest fixtures, used by name


def aborted_event(aws, run_id="run-aborted", status="ABORTED"):
    event = load_event("sfn_execution_status_aborted")
    detail = event["detail"]
    detail.update(
        name=run_id, status=status, stateMachineArn=aws.sm, executionArn=Executions.execution_arn(aws.sm, run_id)
    )
    execution_input = json.loads(detail["input"])
    execution_input["run_id"] = run_id
    execution_input["phases"][0]["instance_id"] = aws.ids["trn1"]
    execution_input["phases"][1]["instance_id"] = aws.ids["inf2"]
    detail["input"] = json.dumps(execution_input)
    return event


def states(aws):
    res = aws.ec2.describe_instances(InstanceIds=list(aws.ids.values()))["Reservations"]
    return {i["InstanceId"]: i["State"]["Name"] for r in res for i in r["Instances"]}


def test_an_aborted_run_has_its_boxes_stopped_and_its_leases_released(aws):
    ddb = boto3.client("dynamodb")
    Leases(LEASE_TABLE, ddb).take(aws.ids.values(), "run-aborted", ttl_s=3600)
    out = on_execution_status.handler(aborted_event(aws), CONTEXT)
    assert out["outcome"] == "cleaned_up" and sorted(out["stopped"]) == sorted(aws.ids.values())
    assert sorted(out["released"]) == sorted(aws.ids.values())
    assert set(states(aws).values()) == {"stopped"}
    assert Leases(LEASE_TABLE, ddb).holders(aws.ids.values()) == {}


def test_a_box_another_run_has_leased_is_never_stopped(aws):
    ddb = boto3.client("dynamodb")
    Leases(LEASE_TABLE, ddb).take([aws.ids["inf2"]], "run-other", ttl_s=3600)
    out = on_execution_status.clean_up(
        on_execution_status.parse_status_event(aborted_event(aws, status="TIMED_OUT")),
        InstanceFleet("neuron-pipelines", aws.ec2),
        Leases(LEASE_TABLE, ddb),
        Executions(aws.sfn),
    )
    assert out["stopped"] == [aws.ids["trn1"]]  # free lease: stopped
    assert out["spared"] == [f"{aws.ids['inf2']} (leased by run run-other)"]
    assert states(aws) == {aws.ids["trn1"]: "stopped", aws.ids["inf2"]: "running"}
    assert Leases(LEASE_TABLE, ddb).holders([aws.ids["inf2"]])[aws.ids["inf2"]].run_id == "run-other"


def test_an_expired_lease_of_another_run_does_not_protect_its_box(aws):
    ddb = boto3.client("dynamodb")
    past = datetime.now(timezone.utc) - timedelta(hours=5)
    Leases(LEASE_TABLE, ddb).take([aws.ids["inf2"]], "run-stale", ttl_s=60, now=past)
    out = on_execution_status.handler(aborted_event(aws, status="FAILED"), CONTEXT)
    assert sorted(out["stopped"]) == sorted(aws.ids.values())


def test_succeeded_executions_and_other_machines_are_ignored(aws):
    assert on_execution_status.handler(aborted_event(aws, status="SUCCEEDED"), CONTEXT)["outcome"] == "ignored"
    other = aborted_event(aws)
    other["detail"]["stateMachineArn"] = aws.sm + "-other"
    assert on_execution_status.handler(other, CONTEXT)["outcome"] == "ignored"
    assert set(states(aws).values()) == {"running"}


def test_input_left_out_of_the_event_is_read_back_from_step_functions(aws):
    ddb = boto3.client("dynamodb")
    event = aborted_event(aws, run_id="run-big")
    aws.sfn.start_execution(stateMachineArn=aws.sm, name="run-big", input=event["detail"]["input"])
    event["detail"]["input"] = None
    event["detail"]["inputDetails"] = {"included": False}
    out = on_execution_status.clean_up(
        on_execution_status.parse_status_event(event),
        InstanceFleet("neuron-pipelines", aws.ec2),
        Leases(LEASE_TABLE, ddb),
        Executions(aws.sfn),
    )
    assert sorted(out["stopped"]) == sorted(aws.ids.values())


HANDLERS = {
    "plan_run": plan_run.handler,
    "on_command_status": on_command_status.handler,
    "on_execution_status": on_execution_status.handler,
    "finalize_run": finalize_run.handler,
    "idle_reaper": idle_reaper.handler,
}
BAD_EVENTS = {
    "string": "not json",
    "list": ["a", "list"],
    "s3-without-detail": {"detail-type": "Object Created", "source": "aws.s3"},
    "status-without-arns": {"detail-type": "Step Functions Execution Status Change", "detail": {"status": 3}},
}
# the reaper acts on any schedule object: only non-objects are malformed for it
CASES = [(h, e) for h in HANDLERS for e in BAD_EVENTS if h != "idle_reaper" or not isinstance(BAD_EVENTS[e], dict)]


@pytest.mark.parametrize("name, event_name", CASES)
def test_malformed_events_get_one_log_line_and_a_structured_failure(aws, name, event_name, capsys):
    handler, event = HANDLERS[name], BAD_EVENTS[event_name]
    out = handler(event, CONTEXT)
    assert isinstance(out, dict)
    verdict = out.get("outcome") or out.get("action") or out.get("status")
    assert verdict == "refused", out
    assert out["error"].endswith("Error") and "\n" not in out["message"] and out["message"]
    assert "Traceback" not in capsys.readouterr().err


BLOCKER = textwrap.dedent("""
    import sys
    BLOCKED = ("pydantic", "pydantic_settings", "aws_lambda_powertools", "pydantic_core")
    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r} (blocked: not in a layer-less Lambda)")
            return None
    sys.meta_path.insert(0, Blocker())
""")


@pytest.mark.parametrize("module", ["control_plane.handlers.on_execution_status", "control_plane.handlers.idle_reaper"])
def test_safety_net_handlers_import_without_the_layer(module):
    code = BLOCKER + textwrap.dedent(f"""
        import importlib
        m = importlib.import_module({module!r})
        assert callable(m.handler)
        out = m.handler("not an event", None)
        assert out["outcome"] == "refused", out
        bad = sorted(n for n in sys.modules if n.split(".")[0] in BLOCKED)
        assert not bad, bad
        print("imported", {module!r})
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"imported {module}" in proc.stdout


def test_the_blocker_does_block_the_layer():
    """The proof above is only worth something if the same blocker stops the layered handlers."""
    code = BLOCKER + "import control_plane.handlers.plan_run\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode != 0 and "blocked" in proc.stderr


def test_finalize_logs_each_event_under_its_own_run_id_in_a_warm_worker(aws):
    """A warm worker must not log a new run's event under the previous run's correlation id."""
    import io
    import logging

    stream = io.StringIO()
    capture = logging.StreamHandler(stream)
    capture.setFormatter(finalize_run.logger.registered_formatter)
    underlying = logging.getLogger(finalize_run.logger.name)
    underlying.addHandler(capture)
    try:
        for run_id in ("run-first", "run-second"):
            finalize_run.handler({"run_id": run_id, "results_uri": "not-s3", "status": "bogus"}, CONTEXT)
    finally:
        underlying.removeHandler(capture)
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    logged = [(line.get("correlation_id"), json.dumps(line.get("message"))) for line in lines]
    second = [cid for cid, message in logged if "run-second" in message]
    assert second and set(second) == {"run-second"}, logged
