"""The fault matrix (issue 12 point 7; issue 13's acceptance), each case driven through the rehearsal engine.

One rehearsal (moto server, the synthesized stacks deployed, two sandbox boxes with the emulated SSM agent,
Lambda workers with only the layer, the bus with the deployed rules) serves every case; each case injects
its fault (:mod:`tests.support.faults`), runs the smallest request (the fault lanes of
``tests/fixtures/rehearsal_lanes.py``, on the boxes through ``PYTHONPATH``/``NEURONPIPE_EXTRA_LANES``), lets
the end-of-run events reach their Lambdas, prints ``fault <name>: execution <STATUS>, boxes left running: N``
and asserts N == 0, the recorded end state, and that results committed before the fault stay readable
through ``S3Store`` and the DuckDB views.

TEST-ONLY change of the deployed definition (never of ``statemachine/pipeline.asl.json``): every Retry waits
1 s without backoff (:func:`tests.support.faults.shorten_retries`); MaxAttempts are the production ones, so
"all retries" below means all of them. The hang case shortens one lane's HeartbeatSeconds in the execution
input (:func:`tests.support.faults.lane_heartbeat`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from control_plane.aws import BoxesLeasedError
from control_plane.models import RunRequest
from rehearsal.bus import EXECUTION_STATUS_DETAIL_TYPE
from statemachine.build import EC2_START_RETRY, STOP_FAILED_ERROR, STOP_RETRY
from tests.fixtures import rehearsal_lanes
from tests.support.faults import (
    CallFault,
    boxes_left_running,
    capacity_error,
    client,
    command_in_progress,
    fault_rehearsal,
    for_instance,
    for_lane,
    lambda_function,
    lane_heartbeat,
    leases_held,
    reboot,
    start_run,
    wait_for,
)

STOP_CALLS = 1 + STOP_RETRY[0]["MaxAttempts"]  # what the state machine tries before it gives up on a stop
START_CALLS = 1 + EC2_START_RETRY[0]["MaxAttempts"]
RUN_DEADLINE_S = 150.0


@pytest.fixture(scope="module")
def rehearsal(cfn_assembly, tmp_path_factory):
    yield from fault_rehearsal(cfn_assembly, tmp_path_factory.mktemp("fault-matrix"))


# -- helpers ------------------------------------------------------------------------------------------------------


def request(*lanes: str) -> RunRequest:
    return RunRequest(lanes=list(lanes), profile="tiny", trigger="rehearsal-faults")


def box(r, role: str) -> str:
    return r.deployment.instances[role].instance_id


def sfn(r):
    return client(r, "stepfunctions")


def wait_ended(r, execution_arn: str, deadline_s: float = RUN_DEADLINE_S) -> dict[str, Any]:
    wait_for(
        lambda: sfn(r).describe_execution(executionArn=execution_arn)["status"] != "RUNNING",
        f"execution {execution_arn.rsplit(':', 1)[-1]} to end",
        deadline_s,
        poll_s=0.25,
    )
    return sfn(r).describe_execution(executionArn=execution_arn)


def conclude(r, say, name: str, execution_arn: str, expected: str) -> dict[str, Any]:
    """The execution's end, the end-of-run events handled, the printed line, boxes and status asserted."""
    desc = wait_ended(r, execution_arn)
    settle(r, desc)
    running = boxes_left_running(r)
    say(f"fault {name}: execution {desc['status']}, boxes left running: {len(running)}")
    assert running == [], f"{name}: boxes left running: {running}"
    assert desc["status"] == expected, (
        f"{name}: {desc['status']} {desc.get('error')} {desc.get('cause')}\n{failures(r, execution_arn)}"
    )
    held = {i: run for i, run in leases_held(r).items() if run == desc["name"]}
    assert held == {}, f"{name}: leases still held by the run: {held}"
    return desc


def settle(r, desc: dict[str, Any]) -> None:
    """The end-of-run events delivered: for a bad end, ExecutionEndedRule's delivery to on_execution_status done
    (the watcher may be publishing it from its own thread while ``Rehearsal.settle`` drains)."""
    r.settle()
    if desc["status"] not in ("FAILED", "ABORTED", "TIMED_OUT"):
        return

    def delivered() -> bool:
        return any(
            d.detail_type == EXECUTION_STATUS_DETAIL_TYPE
            and desc["executionArn"] in json.dumps(d.payload)
            and (d.result is not None or d.error is not None)
            for d in list(r.bus.deliveries)
        )

    wait_for(delivered, f"the end of {desc['name']} delivered to on_execution_status", 60)
    r.bus.drain(60)


def failures(r, execution_arn: str) -> str:
    """The failure events of an execution's history, one line each (for assertion messages)."""
    lines = []
    for e in r.history(execution_arn):
        details = next((v for k, v in e.items() if k.endswith("FailedEventDetails")), None)
        if details:
            lines.append(f"  #{e['id']} {e['type']}: {details.get('error')}: {str(details.get('cause'))[:300]}")
    return "\n".join(lines)


def committed(r, run_id: str) -> dict[str, str]:
    """lane -> status of the committed attempts, read back through S3Store (the segments' boot records aside)."""
    from analytics.store import S3Store
    from pipeline.lanes import BOOT_RECORD_PREFIX

    store = S3Store(r.settings().results_uri, client=client(r, "s3"))
    return {m.lane: m.status for m in store.effective_markers([run_id]) if not m.lane.startswith(BOOT_RECORD_PREFIX)}


def standing(r, run_id: str) -> dict[str, str]:
    """lane -> its standing in the run (pipeline.graph: succeeded, failed, blocked, ...), read through S3Store."""
    from agents.runner import lane_statuses
    from analytics.store import S3Store

    store = S3Store(r.settings().results_uri, client=client(r, "s3"))
    return {lane: st.status for lane, st in lane_statuses(store, run_id).items()}


def reasons(r, run_id: str) -> dict[str, str]:
    from agents.runner import lane_statuses
    from analytics.store import S3Store

    store = S3Store(r.settings().results_uri, client=client(r, "s3"))
    return {lane: st.reason or "" for lane, st in lane_statuses(store, run_id).items()}


def outcome_of(desc: dict[str, Any]) -> dict[str, Any]:
    """The run's outcome: ``$.outcome`` of a SUCCEEDED execution's output, the cause of a FAILED one."""
    return json.loads(desc["output"] if desc["status"] == "SUCCEEDED" else desc["cause"])["outcome"]


def fail_lanes(r, *lanes: str) -> None:
    """The graph fault lanes named here fail (``gate@trn1``, ``make``) until the case ends."""
    r.fault_markers.mkdir(parents=True, exist_ok=True)
    (r.fault_markers / rehearsal_lanes.FAIL_FILE).write_text("\n".join(lanes) + "\n")


def view_rows(r, run_id: str, sql: str) -> list[tuple]:
    """Rows of a query over the DuckDB views of the run's committed results."""
    from analytics.store import S3Store
    from analytics.views import connect

    store = S3Store(r.settings().results_uri, client=client(r, "s3"))
    return connect(store, [run_id]).execute(sql).fetchall()


def entered(r, execution_arn: str, state: str) -> list[dict[str, Any]]:
    """The inputs the execution entered ``state`` with, in order."""
    out = []
    for e in r.history(execution_arn):
        details = e.get("stateEnteredEventDetails")
        if details and details.get("name") == state:
            out.append(json.loads(details.get("input") or "null"))
    return out


def handled(r, module: str, run_id: str) -> list[dict[str, Any]]:
    """The results of a Lambda's invocations for one run (by the event's run id / execution name)."""
    fn = lambda_function(r, module)
    return [
        inv.get("result") or {"error": inv.get("error")}
        for inv in fn.invocations
        if run_id in json.dumps(inv.get("event"))
    ]


def starts(r, lane_result: str) -> int:
    path = r.fault_markers / f"{lane_result}.starts"
    return len(path.read_text().splitlines()) if path.exists() else 0


# -- the cases ------------------------------------------------------------------------------------------------------


def test_a_failed_lane_leaves_the_others_running_and_the_run_partial(rehearsal, faults, say):
    """Issue 14: a lane's failure stays local (first lane of both boxes' segments fails, the next ones run)."""
    r = rehearsal
    launched = start_run(r, request("boom", "ok_late"), "fault-first-lane")
    desc = conclude(r, say, "first-lane-fails", launched.execution_arn, "SUCCEEDED")
    outcome = outcome_of(desc)
    assert outcome["status"] == "partial" and sorted(outcome["failed"]) == ["boom@inf2", "boom@trn1"]
    assert standing(r, "fault-first-lane") == {
        "boom@trn1": "failed",
        "ok_late@trn1": "succeeded",
        "boom@inf2": "failed",
        "ok_late@inf2": "succeeded",
    }
    assert ("boom@trn1", 2.0) in view_rows(r, "fault-first-lane", "SELECT lane, value FROM host_bench")
    assert len(entered(r, launched.execution_arn, "StartInstance")) == 2
    partial = [e for e in r.bus.of_type("RunPartiallySucceeded") if e["detail"]["run_id"] == "fault-first-lane"]
    assert partial and partial[0]["detail"]["outcome"] == outcome


def test_a_failed_gate_skips_its_box_s_later_lanes_and_fails_the_run_the_other_box_carries_on(rehearsal, faults, say):
    r = rehearsal
    fail_lanes(r, "gate@trn1")
    launched = start_run(r, request("gate", "ok", "ok_late"), "fault-gate")
    desc = conclude(r, say, "gate-fails", launched.execution_arn, "FAILED")
    outcome = outcome_of(desc)
    assert outcome["status"] == "failed" and "gate gate@trn1" in outcome["why"]
    assert standing(r, "fault-gate") == {
        "gate@trn1": "failed",
        "ok@trn1": "blocked",
        "ok_late@trn1": "blocked",
        "gate@inf2": "succeeded",
        "ok@inf2": "succeeded",
        "ok_late@inf2": "succeeded",
    }
    assert reasons(r, "fault-gate")["ok@trn1"].startswith("gate gate@trn1 did not pass: it failed")
    # the segment ended at the gate: no command for trn1's later lanes
    assert not [
        run
        for run in r.agents.runs
        if run.comment.startswith("neuronpipe ok fault-gate") and run.instance_id == box(r, "trn1")
    ]


def test_a_failed_producer_skips_its_consumer_on_the_other_box_which_is_not_started_for_it(rehearsal, faults, say):
    r = rehearsal
    fail_lanes(r, "make")
    launched = start_run(r, request("ok", "make", "use"), "fault-producer")
    desc = conclude(r, say, "producer-fails", launched.execution_arn, "SUCCEEDED")
    assert outcome_of(desc)["status"] == "partial"
    assert standing(r, "fault-producer") == {
        "ok@trn1": "succeeded",
        "make": "failed",
        "ok@inf2": "succeeded",
        "use": "blocked",
    }
    assert reasons(r, "fault-producer")["use"].startswith("needs make, which failed in attempt")
    # wave 1 (inf2: use) was dropped: inf2 started once (wave 0), not for the skip
    started = [i["instance_id"] for i in entered(r, launched.execution_arn, "StartInstance")]
    assert sorted(started) == sorted([box(r, "trn1"), box(r, "inf2")])


def test_both_boxes_at_once_and_the_consumer_after_its_producer_committed(rehearsal, faults, say):
    """Issue 14's rehearsal acceptance: the two boxes' lane intervals overlap, ``use`` (inf2) starts only after
    ``make`` (trn1) has committed, no Wait state in the history, at most 6 state transitions per lane."""
    from rehearsal.summary import lane_intervals, overlap_s, transitions_per_lane

    r = rehearsal
    launched = start_run(r, request("nap", "make", "use"), "fault-graph")
    desc = conclude(r, say, "graph", launched.execution_arn, "SUCCEEDED")
    assert outcome_of(desc)["status"] == "succeeded"
    assert standing(r, "fault-graph") == {
        "nap@trn1": "succeeded",
        "make": "succeeded",
        "nap@inf2": "succeeded",
        "use": "succeeded",
    }
    history = r.history(launched.execution_arn)
    roles = {box(r, role): role for role in ("trn1", "inf2")}
    intervals = lane_intervals(history, roles)
    overlap = overlap_s(intervals, "trn1", "inf2")
    assert overlap > 0, intervals
    from analytics.store import S3Store

    store = S3Store(r.settings().results_uri, client=client(r, "s3"))
    make = store.latest_committed("fault-graph", "make")
    assert make is not None and intervals["inf2:use"][0] > intervals["trn1:make"][1]
    assert not [e for e in history if e["type"] == "WaitStateEntered"]
    transitions = transitions_per_lane(history)
    assert len(transitions) == 4 and max(transitions) <= 6, transitions
    say(f"graph: lanes of both boxes overlapped {overlap:.1f} s; transitions per lane {transitions}")


def test_ssm_send_command_refused(rehearsal, faults, say):
    r = rehearsal
    refused = faults.send_command(
        CallFault("InvalidParameters", "the rehearsal refused this command", match=for_lane("ok_late"))
    )
    launched = start_run(r, request("ok", "ok_late"), "fault-ssm-send")
    desc = conclude(r, say, "ssm-send-refused", launched.execution_arn, "FAILED")
    assert "InvalidParameters" in desc["error"], desc["error"]  # the box's failure is the run's error
    assert refused.failed == 2  # once per box; not retried: only agent-not-registered and throttling errors are
    assert standing(r, "fault-ssm-send") == {
        "ok@trn1": "succeeded",
        "ok@inf2": "succeeded",
        "ok_late@trn1": "blocked",
        "ok_late@inf2": "blocked",
    }


def test_lane_hangs_until_the_heartbeat_timeout(rehearsal, faults, say):
    r = rehearsal
    launched = start_run(r, request("ok", "hang"), "fault-hang", mutate=lane_heartbeat("hang", 2))
    desc = conclude(r, say, "lane-hangs", launched.execution_arn, "FAILED")
    assert desc["error"] == "Lane.TimedOut"
    # AWS names the expiry States.HeartbeatTimeout; moto's interpreter says States.Timeout. Either way it is the
    # 2 s heartbeat that ended it: the lane's TimeoutSeconds is an hour.
    assert "sent no heartbeat within 2 s" in desc["cause"], desc["cause"]
    assert "States.HeartbeatTimeout" in desc["cause"] or "States.Timeout" in desc["cause"]
    # the hung attempts committed nothing: the scheduler recorded them, blocked by their failed box
    assert standing(r, "fault-hang") == {
        "ok@trn1": "succeeded",
        "ok@inf2": "succeeded",
        "hang@trn1": "blocked",
        "hang@inf2": "blocked",
    }
    hung = [run for run in r.agents.runs if run.comment.startswith("neuronpipe hang fault-hang")]
    assert [run.status for run in hung] == ["Failed", "Failed"]  # killed when StopInstanceAfterFailure stopped it


def test_start_instances_refused_for_capacity(rehearsal, faults, say):
    r = rehearsal
    trn1 = r.deployment.instances["trn1"]
    refused = faults.start_instances(
        CallFault(*capacity_error(trn1.instance_type, trn1.availability_zone), match=for_instance(trn1.instance_id))
    )
    launched = start_run(r, request("ok"), "fault-capacity")
    desc = conclude(r, say, "start-capacity", launched.execution_arn, "FAILED")
    # EC2 has no modelled exceptions: Step Functions names every EC2 error Ec2.Ec2Exception, the message says why
    assert desc["error"] == "Ec2.Ec2Exception" and "sufficient trn1.2xlarge capacity" in desc["cause"], desc
    assert refused.calls == START_CALLS  # every retry of StartInstance was used
    # the other box carried on
    assert standing(r, "fault-capacity") == {"ok@trn1": "blocked", "ok@inf2": "succeeded"}


@pytest.mark.slow  # ~15-25 s: every one of the stop's retries, 1 s apart
def test_stop_instances_failing_on_the_success_path(rehearsal, faults, say):
    r = rehearsal
    trn1 = box(r, "trn1")
    failing = faults.stop_instances(
        CallFault("InternalError", "An internal error has occurred.", times=STOP_CALLS, match=for_instance(trn1))
    )
    launched = start_run(r, request("ok"), "fault-stop-success")
    desc = conclude(r, say, "stop-fails-success-path", launched.execution_arn, "FAILED")
    # the state machine gave up after all its retries and says so; ExecutionEndedRule -> on_execution_status
    # stopped the box (the next StopInstances call)
    assert desc["error"] == STOP_FAILED_ERROR
    assert failing.failed == STOP_CALLS and failing.calls == STOP_CALLS + 1
    cleanups = [o for o in handled(r, "on_execution_status", "fault-stop-success") if o.get("outcome") == "cleaned_up"]
    assert cleanups and trn1 in cleanups[0]["stopped"], cleanups
    # the box that could not be stopped kept its lease through the run-wide release (KeepLease marked it):
    # on_execution_status released it only after stopping it
    assert trn1 in cleanups[0]["released"], cleanups
    assert "fault-stop-success" not in leases_held(r).values()
    assert standing(r, "fault-stop-success") == {"ok@trn1": "succeeded", "ok@inf2": "succeeded"}, (
        f"{reasons(r, 'fault-stop-success')}\n{failures(r, launched.execution_arn)}"
    )


@pytest.mark.slow  # ~15-25 s: every one of the stop's retries, 1 s apart
def test_stop_instances_failing_on_the_failure_path(rehearsal, faults, say):
    r = rehearsal
    trn1 = box(r, "trn1")
    failing = faults.stop_instances(
        CallFault("InternalError", "An internal error has occurred.", times=STOP_CALLS, match=for_instance(trn1))
    )
    launched = start_run(r, request("hang"), "fault-stop-failure", mutate=lane_heartbeat("hang", 2))
    desc = conclude(r, say, "stop-fails-failure-path", launched.execution_arn, "FAILED")
    assert desc["error"] == STOP_FAILED_ERROR  # a box that may still run fails the run so it is stopped
    stop_failed = entered(r, launched.execution_arn, "SegmentStopFailed")
    assert stop_failed and "An internal error has occurred" in stop_failed[0]["stop_error"]["Cause"]
    assert stop_failed[0]["failure"]["Error"] == "Lane.TimedOut"  # the segment's own failure came first
    assert failing.failed == STOP_CALLS
    cleanups = [o for o in handled(r, "on_execution_status", "fault-stop-failure") if o.get("outcome") == "cleaned_up"]
    assert cleanups and trn1 in cleanups[0]["stopped"], cleanups
    # the box that could not be stopped kept its lease through the run-wide release (KeepLease marked it):
    # on_execution_status released it only after stopping it
    assert trn1 in cleanups[0]["released"], cleanups
    assert "fault-stop-failure" not in leases_held(r).values()
    assert standing(r, "fault-stop-failure") == {"hang@trn1": "blocked", "hang@inf2": "blocked"}


def test_operator_stops_the_execution_mid_lane(rehearsal, faults, say):
    r = rehearsal
    trn1 = box(r, "trn1")
    before = starts(r, "hang@trn1")  # earlier cases ran it too: wait for this run's own start
    launched = start_run(r, request("ok", "hang"), "fault-operator-stop")
    wait_for(
        lambda: starts(r, "hang@trn1") > before and command_in_progress(r, trn1, "neuronpipe hang fault-operator-stop"),
        "the hang lane running on trn1",
        RUN_DEADLINE_S,
    )
    sfn(r).stop_execution(executionArn=launched.execution_arn, error="Operator.Stop", cause="stopped from the console")
    desc = conclude(r, say, "operator-stop", launched.execution_arn, "ABORTED")
    cleanups = [o for o in handled(r, "on_execution_status", "fault-operator-stop") if o.get("outcome") == "cleaned_up"]
    assert cleanups and trn1 in cleanups[0]["stopped"] and trn1 in cleanups[0]["released"], cleanups
    assert desc["name"] not in leases_held(r).values()
    assert standing(r, "fault-operator-stop")["ok@trn1"] == "succeeded"


def test_a_report_that_fails_fails_the_run_and_keeps_its_results(rehearsal, faults, say):
    """The finalize Lambda's layer lacks a package the report needs (duckdb, which every report imports): the run's
    failure is the report's (Report.Failed, the missing module named), its event is RunReportFailed, and the lanes'
    results stay committed for ``neuronpipe report`` to build again."""
    r = rehearsal
    faults.lambda_layer_without("finalize_run", ["duckdb"])
    launched = start_run(r, request("ok"), "fault-finalize")
    desc = conclude(r, say, "finalize-fails", launched.execution_arn, "FAILED")
    # the run's failure is the report's, with the function's own error; the lanes' outcome stands beside it
    assert desc["error"] == "Report.Failed", desc
    cause = json.loads(desc["cause"])
    assert cause["outcome"]["status"] == "succeeded"
    assert cause["report_error"]["error"] == "ModuleNotFoundError" and "duckdb" in cause["report_error"]["message"], (
        cause
    )
    events = [e for e in r.bus.of_type("RunReportFailed") if e["detail"]["run_id"] == "fault-finalize"]
    assert events and events[0]["detail"]["failure"]["Error"] == "Report.Failed"
    assert "duckdb" in events[0]["detail"]["failure"]["Cause"]
    assert not [e for e in r.bus.of_type("RunSucceeded") if e["detail"]["run_id"] == "fault-finalize"]
    assert committed(r, "fault-finalize") == {"ok@trn1": "succeeded", "ok@inf2": "succeeded"}


def test_second_run_refused_while_one_runs(rehearsal, faults, say):
    r = rehearsal
    first = start_run(r, request("boom"), "fault-lease-holder")  # a short run: one wave
    executions_before = len(sfn(r).list_executions(stateMachineArn=r.deployment.state_machine_arn)["executions"])
    # through plan_run, as the console or an event would ask
    fn = lambda_function(r, "plan_run")
    answer = client(r, "lambda").invoke(
        FunctionName=fn.name, Payload=json.dumps({"lanes": ["ok"], "profile": "tiny", "run_id": "fault-second"})
    )
    outcome = json.loads(answer["Payload"].read())
    assert outcome["outcome"] == "refused" and outcome["error"] == "BoxesLeasedError", outcome
    assert "held by run fault-lease-holder" in outcome["message"]
    # and through the operator's CLI path
    with pytest.raises(BoxesLeasedError, match="held by run fault-lease-holder"):
        start_run(r, request("ok"), "fault-second-cli")
    executions = sfn(r).list_executions(stateMachineArn=r.deployment.state_machine_arn)["executions"]
    assert len(executions) == executions_before  # 0 extra executions
    ended = conclude(r, say, "second-run-refused", first.execution_arn, "FAILED")
    assert ended["error"] == "Run.Failed" and outcome_of(ended)["why"] == "no lane succeeded"


def test_adapter_event_delivered_twice(rehearsal, faults, say):
    r = rehearsal
    bucket = r.deployment.results_bucket
    before = {e["name"] for e in sfn(r).list_executions(stateMachineArn=r.deployment.state_machine_arn)["executions"]}
    client(r, "s3").put_object(Bucket=bucket, Key="adapters/tiny/fault-adapter.tar.gz", Body=b"not an adapter")
    r.bus.drain(60)
    created = [
        e
        for e in r.bus.events
        if e.get("detail-type") == "Object Created"
        and e["detail"]["object"]["key"] == "adapters/tiny/fault-adapter.tar.gz"
    ]
    assert len(created) == 1
    r.bus.publish(created[0])  # EventBridge delivers at least once: the same event again
    r.bus.drain(60)
    outcomes = handled(r, "plan_run", "adapters/tiny/fault-adapter.tar.gz")
    assert [o.get("outcome") for o in outcomes] == ["started", "duplicate"], outcomes
    assert outcomes[0]["run_id"] == outcomes[1]["run_id"]
    after = {e["name"] for e in sfn(r).list_executions(stateMachineArn=r.deployment.state_machine_arn)["executions"]}
    assert after - before == {outcomes[0]["run_id"]}  # one run, 0 extra
    # the adapter's run is real work (finetune_serve): the operator stops it here, once it is under way (moto's
    # StopExecution fails on an execution whose worker has not set up yet)
    arn = outcomes[0]["execution_arn"]
    wait_for(lambda: any(e["type"].endswith("StateEntered") for e in r.history(arn)), "the adapter run to start", 60)
    sfn(r).stop_execution(executionArn=arn, error="Rehearsal.Done")
    conclude(r, say, "adapter-event-twice", outcomes[0]["execution_arn"], "ABORTED")


@pytest.mark.slow  # ~18-28 s: the lane runs twice on trn1
def test_box_reboots_mid_lane(rehearsal, faults, say):
    r = rehearsal
    trn1 = box(r, "trn1")
    before = starts(r, "nap@trn1")  # the graph case naps too: count this run's starts only
    launched = start_run(r, request("nap"), "fault-reboot")
    wait_for(
        lambda: starts(r, "nap@trn1") > before and command_in_progress(r, trn1, "neuronpipe nap fault-reboot"),
        "the nap lane running on trn1",
        RUN_DEADLINE_S,
    )
    boot = reboot(r, trn1)
    desc = conclude(r, say, "box-reboot", launched.execution_arn, "SUCCEEDED")
    boot.join(timeout=30)
    assert starts(r, "nap@trn1") == before + 2  # the agent ran the interrupted command again after the boot
    naps = [
        run
        for run in r.agents.runs
        if run.comment.startswith("neuronpipe nap fault-reboot") and run.instance_id == trn1
    ]
    assert len(naps) == 1, naps  # one invocation: the agent ran it again, SSM saw no second command
    # and finalize's record of the run's request fingerprint (the reserved lane `baseline`, docs/reference/history.md)
    assert committed(r, "fault-reboot") == {"nap@trn1": "succeeded", "nap@inf2": "succeeded", "baseline": "succeeded"}
    assert json.loads(desc["output"]).get("finalize")
