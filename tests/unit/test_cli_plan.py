"""`neuronpipe plan`: prints the plan and its worst-case cost without AWS; invalid input exits 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from control_plane.cli import main
from control_plane.progress import progress_from_history

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("run-*.json"))


@pytest.fixture(autouse=True)
def no_aws(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "none")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "none")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_plan(path, capsys):
    assert main(["plan", "--input", str(path)]) == 0
    out = capsys.readouterr().out
    assert "worst case:" in out and "instance-hours" in out and "July 2026" in out


def test_plan_json_is_the_plan(tmp_path, capsys):
    req = tmp_path / "run.json"
    req.write_text(json.dumps({"preset": "smoke", "run_id": "abc"}))
    assert main(["plan", "--input", str(req), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["run_id"] == "abc" and [s["box_role"] for w in plan["waves"] for s in w["segments"]] == ["trn1", "inf2"]


def test_invalid_request_exits_2_with_field_and_reason(tmp_path, capsys):
    req = tmp_path / "run.json"
    req.write_text(json.dumps({"lanes": ["sft", "warp"], "max_cost_usd": -3}))
    assert main(["plan", "--input", str(req)]) == 2
    err = capsys.readouterr().err
    assert "lanes: unknown lane 'warp'" in err and "max_cost_usd: Input should be greater than 0" in err


def test_cost_ceiling_exits_2(tmp_path, capsys):
    req = tmp_path / "run.json"
    req.write_text(json.dumps({"preset": "full", "max_cost_usd": 1}))
    assert main(["plan", "--input", str(req)]) == 2
    assert "exceeds the ceiling $1.00" in capsys.readouterr().err


def test_unreadable_input_exits_2(tmp_path, capsys):
    assert main(["plan", "--input", str(tmp_path / "missing.json")]) == 2
    assert "input: cannot read" in capsys.readouterr().err


def test_progress_from_a_history_in_flight():
    plan = {
        "run_id": "r",
        "phases": [{"box_role": "trn1", "instance_id": "i-1", "lanes": [{"lane": "provenance"}, {"lane": "sft"}]}],
    }

    def cmd(what):
        return {
            "type": "TaskScheduled",
            "taskScheduledEventDetails": {
                "resource": "sendCommand.waitForTaskToken",
                "parameters": json.dumps({"Comment": f"neuronpipe {what} r"}),
            },
        }

    history = [
        {"type": "ExecutionStarted", "executionStartedEventDetails": {"input": json.dumps(plan)}},
        {"type": "MapIterationStarted", "mapIterationStartedEventDetails": {"name": "Phases", "index": 0}},
        {"type": "TaskScheduled", "taskScheduledEventDetails": {"resource": "startInstances"}},
        cmd("sync-harness"),
        {"type": "TaskSucceeded", "taskSucceededEventDetails": {"resource": "sendCommand"}},
        cmd("provenance"),
        {
            "type": "TaskSucceeded",
            "taskSucceededEventDetails": {
                "output": json.dumps({"status": "skipped", "skip_reason": "already committed"})
            },
        },
        cmd("sft"),
    ]
    progress = progress_from_history(history)
    assert progress.status == "RUNNING" and progress.phases[0].state == "running lanes"
    assert [(lp.lane, lp.status, lp.detail) for lp in progress.lanes] == [
        ("provenance", "skipped", "already committed"),
        ("sft", "running", ""),
    ]
    ended = progress_from_history(history + [{"type": "ExecutionAborted"}])
    assert ended.status == "ABORTED" and ended.lanes[1].status == "failed"


def test_plan_states_the_slo_every_serving_point_will_carry(tmp_path, capsys):
    req = tmp_path / "run.json"
    req.write_text(json.dumps({"preset": "smoke"}))
    assert main(["plan", "--input", str(req)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "(the profile default): mlperf-v5.1-llama3.1-8b-server (p99 TTFT <= 2000 ms, p99 TPOT <= 100 ms)" in out
    req.write_text(json.dumps({"preset": "smoke", "slo": {"ttft_ms": 500, "tpot_ms": 40}}))
    assert main(["plan", "--input", str(req)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "SLO of every serving point: custom (p99 TTFT <= 500 ms, p99 TPOT <= 40 ms)" in out
