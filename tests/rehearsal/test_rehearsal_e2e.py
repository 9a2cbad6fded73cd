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
from rehearsal.run import DEFAULT_BUILD_DIR

pytestmark = pytest.mark.slow


def test_rehearse_command_runs_the_smoke_request_to_a_report_with_no_box_left_running(tmp_path, capsys):
    request = tmp_path / "run.json"
    # two predictions, one that holds and one that misses: registered by the control plane, carried into the results
    # store before the first wave, scored in the report the finalize Lambda builds
    predictions = [{"lane": "smoke", "expected": "works"}, {"lane": "provenance", "expected": "fails"}]
    request.write_text(json.dumps({"preset": "smoke", "predictions": predictions}))
    code = main(
        [
            "rehearse",
            "--input",
            str(request),
            "--no-live",
            "--workdir",
            str(tmp_path / "w"),
            # the shared build directory (the synthesized app and the layer, once per harness sha, as every other
            # rehearsal test uses them): a private one would synthesize and build the layer again
            "--build-dir",
            str(DEFAULT_BUILD_DIR),
            "--boot-delay-s",
            "0.5",
            "--timeout-s",
            "600",
        ]
    )
    err = capsys.readouterr().err
    assert code == 0, err[-4000:]
    assert "rehearsal of rehearsal-1: SUCCEEDED" in err
    assert "boxes running: 0" in err
    smoke = len(request_lanes(None, "smoke"))  # the preset's lanes, on each of the 2 boxes
    # a succeeded lane enters 4 states: RunLane, CommitLane (the control plane commits what the box proposed), the
    # commit's answer checked (LaneCommitted), LaneDone
    assert re.search(rf"transitions per lane: \[(4, ){{{2 * smoke - 1}}}4\]", err), err[-2000:]
    # each segment marked its start and pushed its compile cache before its stop
    assert re.search(r"states: .*MarkStart=2, .*PushCompileCache=2, ", err), err[-2000:]
    assert "run events on the bus: RunSucceeded" in err
    # pull + report from the mirror: the sections of the report the finalize Lambda wrote to the bucket
    assert re.search(r"report in the bucket: s3://\S+/reports/rehearsal-1/REPORT\.md; .*the same sections", err)
    report = (tmp_path / "w" / "report" / "REPORT.md").read_text()
    assert "## Machines and versions" in report and "rehearsal-1" in report
    assert "## Predicted vs observed" in report and "1 of 2" in report, report[-3000:]
    # finalize_run judged the run under its own role: the request it was planned from, read back from the control
    # data, fingerprinted and committed with the run (no baseline named: nothing compared)
    facts = json.loads((tmp_path / "w" / "report" / "comparison.json").read_text())["provenance"]["facts"]
    (fingerprint,) = [f for f in facts if (f["category"], f["name"]) == ("request", "fingerprint")]
    assert fingerprint["run_id"] == "rehearsal-1" and re.fullmatch(r"[0-9a-f]{16}", fingerprint["value"])
    # every lane of the plan ran on its box through the emulated agent, from the harness the boxes installed
    for role in ("trn1", "inf2"):
        sync_log = tmp_path / "w" / "boxes" / role / "var/log/rehearsal-first-boot.out"
        assert "harness installed" in sync_log.read_text()


def test_a_script_changed_in_the_execution_input_is_refused_and_the_hand_over_line_alone_runs_it_under_bash(
    cfn_assembly, tmp_path
):
    """The shell fix has two halves, the commands' bash shebang and each script's hand-over line. (1) An execution
    input whose sync script lost its hand-over line is control data the plan did not make: the scheduler refuses it,
    the run breaks (ControlDataError naming the segment and its script) before any box is started or sent a
    command, and its leases stay until on_execution_status has stopped the boxes. (2) With the shebang taken out of
    the state machine (an operator's edit), the SSM agent runs each file through /bin/sh (dash) and the hand-over
    line alone moves it to bash: the run succeeds."""
    from control_plane.aws import Executions, InstanceFleet, Leases
    from control_plane.box_scripts import BASH_GUARD
    from control_plane.launch import build_plan, committed_in_store
    from rehearsal.run import Rehearsal

    with Rehearsal(tmp_path / "w", assembly=cfn_assembly, boot_delay_s=0.5, log=lambda _: None) as r:
        op = r.operator()
        sfn = r.world.client("stepfunctions", op)
        arn = r.deployment.state_machine_arn
        settings = r.settings()
        leases = Leases(settings.lease_table, r.world.client("dynamodb", op))

        def planned(run_id: str) -> dict:
            plan = build_plan(
                RunRequest(lanes=["provenance"], profile="tiny"),
                run_id,
                settings,
                InstanceFleet(settings.project, r.world.client("ec2", op)),
                committed_in_store(settings.results_uri, r.world.client("s3", op)),
            )
            data = plan.execution_input()
            leases.take([b["instance_id"] for b in data["boxes"]], run_id, 3600)
            return data

        data = planned("tampered-shell")
        for phase in (seg for wave in data["waves"] for seg in wave["segments"]):
            assert phase["sync"]["script"].startswith(BASH_GUARD + "\n")
            phase["sync"]["script"] = phase["sync"]["script"].removeprefix(BASH_GUARD + "\n")
        execution = Executions(sfn).start(arn, "tampered-shell", data)
        final = r.follow(execution, lambda _: None, deadline_s=300)
        r.settle()
        assert final.status == "FAILED" and final.error == "ControlDataError", (final.error, final.cause)
        assert "sync" in final.cause and "wave 0 segment" in final.cause, final.cause
        entered = [
            e["stateEnteredEventDetails"]["name"] for e in r.history(execution) if e["type"].endswith("StateEntered")
        ]
        assert "RunBroke" in entered and "StartInstance" not in entered and "SyncHarness" not in entered
        assert not [run for run in r.agents.runs if "tampered-shell" in run.comment]  # no command reached a box
        assert r.running_boxes() == []
        deadline = time.monotonic() + 30  # on_execution_status (the failed execution's rule) releases the leases
        while leases.holders([b["instance_id"] for b in data["boxes"]]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert leases.holders([b["instance_id"] for b in data["boxes"]]) == {}

        definition = sfn.describe_state_machine(stateMachineArn=arn)["definition"]
        assert "States.Array('#!/bin/bash', " in definition
        sfn.update_state_machine(
            stateMachineArn=arn, definition=definition.replace("States.Array('#!/bin/bash', ", "States.Array(")
        )
        execution = Executions(sfn).start(arn, "hand-over", planned("hand-over"))
        final = r.follow(execution, lambda _: None, deadline_s=300)
        r.settle()
        assert final.status == "SUCCEEDED" and final.outcome_status == "succeeded", (final.error, final.cause)
        syncs = [run for run in r.agents.runs if run.comment.startswith("neuronpipe sync-harness")]
        assert len(syncs) == 2 and {run.status for run in syncs} == {"Success"}
        for run in syncs:  # the file the agent ran through /bin/sh had no shebang: its hand-over line moved it to bash
            script = next(Path(r.boxes[run.instance_id].root).rglob(f"{run.command_id}/**/_script.sh")).read_text()
            assert not script.startswith("#!") and BASH_GUARD in script.splitlines()
