"""The rehearsal end to end: `neuronpipe rehearse` as a user runs it, and the proof that it catches what moto
alone cannot (the SSM agent's /bin/sh refusing the bash-only script line the hardening fixed)."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from control_plane.cli import main
from control_plane.models import RunRequest
from pipeline.lanes import request_lanes

pytestmark = pytest.mark.slow


def test_rehearse_command_runs_the_smoke_request_to_a_report_with_no_box_left_running(tmp_path, capsys):
    request = tmp_path / "run.json"
    request.write_text(json.dumps({"preset": "smoke"}))
    code = main(["rehearse", "--input", str(request), "--no-live", "--workdir", str(tmp_path / "w"),
                 "--build-dir", str(tmp_path / "build"), "--boot-delay-s", "0.5", "--timeout-s", "600"])
    err = capsys.readouterr().err
    assert code == 0, err[-4000:]
    assert "rehearsal of rehearsal-1: SUCCEEDED" in err
    assert "boxes running: 0" in err
    smoke = len(request_lanes(None, "smoke"))  # the preset's lanes, on each of the 2 boxes: one state each
    assert re.search(r"transitions per lane: \[(1, ){%d}1\]" % (2 * smoke - 1), err), err[-2000:]
    # each segment marked its start and pushed its compile cache before its stop
    assert re.search(r"states: .*MarkStart=2, .*PushCompileCache=2, ", err), err[-2000:]
    assert "run events on the bus: RunSucceeded" in err
    # pull + report from the mirror: the sections of the report the finalize Lambda wrote to the bucket
    assert re.search(r"report in the bucket: s3://\S+/reports/rehearsal-1/REPORT\.md; .*the same sections", err)
    report = (tmp_path / "w" / "report" / "REPORT.md").read_text()
    assert "## Machines and versions" in report and "rehearsal-1" in report
    # every lane of the plan ran on its box through the emulated agent, from the harness the boxes installed
    for role in ("trn1", "inf2"):
        sync_log = tmp_path / "w" / "boxes" / role / "var/log/rehearsal-first-boot.out"
        assert "harness installed" in sync_log.read_text()


def test_reverting_the_shell_fix_fails_at_harness_sync_with_the_shells_own_message(cfn_assembly, tmp_path):
    """What the hardening fixed (issue 13 point 1), put back: the commands list without the bash shebang, the
    script without the hand-over line. The SSM agent runs it through /bin/sh (dash) and the first phase fails at
    SyncHarness with dash's own words, delivered by the command-status rule to on_command_status."""
    from control_plane.aws import Executions, InstanceFleet, Leases
    from control_plane.launch import build_plan, committed_in_store
    from control_plane.plan import BASH_GUARD
    from rehearsal.run import Rehearsal

    with Rehearsal(tmp_path / "w", assembly=cfn_assembly, boot_delay_s=0.5, log=lambda _: None) as r:
        op = r.operator()
        sfn = r.world.client("stepfunctions", op)
        arn = r.deployment.state_machine_arn
        definition = sfn.describe_state_machine(stateMachineArn=arn)["definition"]
        assert "States.Array('#!/bin/bash', " in definition
        sfn.update_state_machine(stateMachineArn=arn,
                                 definition=definition.replace("States.Array('#!/bin/bash', ", "States.Array("))
        settings = r.settings()
        plan = build_plan(RunRequest(lanes=["provenance"], profile="tiny"), "old-shell", settings,
                          InstanceFleet(settings.project, r.world.client("ec2", op)),
                          committed_in_store(settings.results_uri, r.world.client("s3", op)))
        data = plan.execution_input()
        for phase in (seg for wave in data["waves"] for seg in wave["segments"]):
            assert phase["sync"]["script"].startswith(BASH_GUARD + "\n")
            phase["sync"]["script"] = phase["sync"]["script"].removeprefix(BASH_GUARD + "\n")
        leases = Leases(settings.lease_table, r.world.client("dynamodb", op))
        leases.take([b["instance_id"] for b in data["boxes"]], "old-shell", 3600)
        execution = Executions(sfn).start(arn, "old-shell", data)
        final = r.follow(execution, lambda _: None, deadline_s=300)
        r.settle()
        assert final.status == "FAILED" and final.outcome_status == "failed"
        assert final.error == "Command.Failed"  # the box's failure is the run's error
        cause = json.loads(final.cause)
        # both boxes work at once: each box's harness sync fails with dash's own message
        assert sorted(cause["box_failures"]) == ["inf2", "trn1"]
        for box_error in cause["box_failures"].values():
            assert '"lane": "sync-harness"' in box_error and "set: Illegal option -o pipefail" in box_error
        assert sorted(cause["outcome"]["skipped"]) == ["provenance@inf2", "provenance@trn1"]  # recorded: boxes failed
        history = r.history(execution)
        entered = [e["stateEnteredEventDetails"]["name"] for e in history if e["type"].endswith("StateEntered")]
        assert "RunLane" not in entered  # no lane ever ran
        assert "StopInstanceAfterFailure" in entered
        deadline = time.monotonic() + 30
        while r.running_boxes() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert r.running_boxes() == []
        # the agent really ran the file through /bin/sh: its output is in the bucket under the command's prefix
        run = next(run for run in r.agents.runs if run.comment.startswith("neuronpipe sync-harness"))
        assert run.status == "Failed" and run.response_code == 2
        assert Path(r.boxes[run.instance_id].root).is_dir()
