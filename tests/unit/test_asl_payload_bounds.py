"""Issue 28: what a wave's failures add to the state stays under Step Functions' 256 KiB, worst case, computed from
the definition and the constants that bound each text at its source (a state over the limit ends the run with
States.DataLimitExceeded, which no Catch takes).

AWS's own error messages (EC2's, SSM's, Step Functions' States.*) are not ours to bound: they are assumed at most
``AWS_CAUSE_MAX_ASSUMED`` characters (a sentence or two); any other error's cause is not carried.

How a character is counted (Step Functions measures the UTF-8 JSON text): text our code renders (on_command_status's
JSON, the definition's formats, error names our agent and Lambda send) is ASCII, 2 bytes at most (a quote or a
backslash is escaped); free text from a lane (its error message, in the scheduler's reasons and box failures) 4 bytes
(UTF-8's most: ``waves._short`` replaces control characters, which JSON would write as 6-byte escapes)."""

from __future__ import annotations

import json
import re

from agents.callback import FAILURE_CAUSE_MAX
from agents.runner import CAUSE_MESSAGE_MAX
from control_plane.handlers.on_command_status import COMMAND_CAUSE_MAX, failure_cause
from control_plane.models import MAX_EXECUTION_INPUT_BYTES, PLACEHOLDER_INSTANCE_ID
from control_plane.waves import CAUSE_LIMIT, REASON_LIMIT, STOP_FAILED_LIMIT, _short
from pipeline.lanes import get_lane, lane_names, result_lane
from statemachine.build import (
    AWS_CAUSE_MAX_ASSUMED,
    AWS_ERROR_PATTERNS,
    ERROR_MAX_CHARS,
    SCHEDULE_CARRIED,
    STATE_PAYLOAD_MAX_BYTES,
    build_definition,
)

OURS, FREE = 2, 4  # bytes per character (see the module's docstring)
ROLES = ("trn1", "inf2")
LANES_OF = {r: [n for n in lane_names() if r in get_lane(n).boxes] for r in ROLES}
NODES = sum(len(v) for v in LANES_OF.values())  # the most lanes a run plans (every lane on every box it runs on)
MAX_RESULT_LANE = max(len(result_lane(n, r)) for r in ROLES for n in LANES_OF[r])
SEGMENT = build_definition()["States"]["Segments"]["ItemProcessor"]["States"]
LANE = SEGMENT["Lanes"]["ItemProcessor"]["States"]

# the most bytes each path a Pass reads can hold (a JSON value's own encoding: quotes included)
PATH_BYTES = {
    "$.lane.result_lane": MAX_RESULT_LANE + 2,
    "$.lane.lane": MAX_RESULT_LANE + 2,
    "$.lane.heartbeat_s": 6,
    "$.lane.timeout_s": 6,
    "$.sync.timeout_s": 6,
    "$.failure.Error": ERROR_MAX_CHARS * OURS + 2,
    "$.stop_error.Error": ERROR_MAX_CHARS * OURS + 2,
    "$.stop_error.Cause": AWS_CAUSE_MAX_ASSUMED * FREE + 2,  # stopInstances' own error
    "$.box_role": 6,
    "$.instance_id": len(PLACEHOLDER_INSTANCE_ID) + 2,
    "$.wave": 4,
    "$.box": 8,
    "$.results_key": 4,  # a pinned box's name; no results key outside a Distributed Map (null)
}
CAUSE_BYTES = {  # $.failure.Cause, by the error that reached the Pass
    "Command.*": COMMAND_CAUSE_MAX * OURS + 2,
    # AWS's own messages (an assumption, stated in statemachine.build), free text
    **{p: AWS_CAUSE_MAX_ASSUMED * FREE + 2 for p in AWS_ERROR_PATTERNS},
}


def format_bytes(expr: str, cause: int) -> int:
    """States.Format('template', args...): the template's characters plus each argument's most."""
    m = re.fullmatch(r"States\.Format\('((?:[^']|\\')*)',\s*(.*)\)", expr)
    assert m, expr
    template, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
    assert template.count("{}") == len(args)
    return (
        (len(template) - 2 * len(args)) * OURS
        + 2
        + sum(cause if a == "$.failure.Cause" else PATH_BYTES[a] for a in args)
    )


def pass_bytes(params: dict, cause: int = 0, lanes: int = 0) -> int:
    """The most bytes a Pass's Parameters render to (``lanes``: the bytes of ``$.lane_results``)."""
    total = 2
    for key, value in params.items():
        name = key.removesuffix(".$")
        total += len(name) + 4  # "name": and a comma
        if not key.endswith(".$"):
            total += len(json.dumps(value)) * OURS
        elif value == "$.lane_results":
            total += lanes
        elif value == "$.failure.Cause":
            total += cause
        elif value.startswith("States.Format("):
            total += format_bytes(value, cause)
        else:
            total += PATH_BYTES[value]
    return total


def lane_result_bytes() -> int:
    """The most one lane leaves in the Lanes map's result: its name (succeeded), LaneFailed, CommandFailed."""
    return (
        max(
            PATH_BYTES["$.lane.result_lane"],
            pass_bytes(LANE["LaneFailed"]["Parameters"]),
            pass_bytes(LANE["CommandFailed"]["Parameters"], CAUSE_BYTES["Command.*"]),
        )
        + 1
    )


def failure_cause_bytes(error: str) -> int:
    """$.failure.Cause of a segment failure that FailureKind lets through with its cause."""
    if error == "Lane.TimedOut":
        return format_bytes(LANE["LaneTimedOut"]["CausePath"], 0)
    if error == "Harness.TimedOut":
        return format_bytes(SEGMENT["HarnessSyncTimedOut"]["Parameters"]["Cause.$"], 0)
    if error == "Gate.Failed":  # the gate's own cause: the agent's (a lane failure) or on_command_status's
        return format_bytes(
            LANE["GateFailed"]["CausePath"], max(FAILURE_CAUSE_MAX * FREE + 2, CAUSE_BYTES["Command.*"])
        )
    return CAUSE_BYTES[error]


def segment_result_bytes(role: str) -> int:
    lanes = 2 + len(LANES_OF[role]) * lane_result_bytes()
    kinds = SEGMENT["FailureKind"]["Choices"][1]["Or"]
    bounded = [c.get("StringEquals") or c.get("StringMatches") for c in kinds]
    return max(
        [
            pass_bytes(SEGMENT["SegmentCompleted"]["Parameters"], lanes=lanes),
            pass_bytes(SEGMENT["SegmentStopFailed"]["Parameters"]),
            pass_bytes(SEGMENT["SegmentGateFailed"]["Parameters"], failure_cause_bytes("Gate.Failed")),
            pass_bytes(SEGMENT["SegmentFailedCauseInHistory"]["Parameters"]),
        ]
        + [pass_bytes(SEGMENT["SegmentFailed"]["Parameters"], failure_cause_bytes(e)) for e in bounded]
    )


def wave_results_bytes() -> int:
    """A wave's segment results: at most one segment per box."""
    return 2 + sum(segment_result_bytes(r) + 1 for r in ROLES)


def carried_bytes() -> int:
    """What the scheduler gets back of its previous answer (SCHEDULE_CARRIED): a box failure per box, its
    stop's mark."""
    return 64 + 20 + len(ROLES) * ((CAUSE_LIMIT + STOP_FAILED_LIMIT) * FREE + 2 * 12)  # "distributed": null


def test_a_wave_of_failures_and_the_scheduler_s_state_fit_beside_the_largest_plan():
    """The ScheduleWave payload is the plan (its waves, nodes, boxes: at most MAX_EXECUTION_INPUT_BYTES with its
    largest wave counted twice) + the wave's results + the carried answer: under 256 KiB."""
    assert SCHEDULE_CARRIED == ("next_wave", "box_failures", "stop_failed", "distributed")
    envelope = 1024  # run_id, results_uri, the keys
    worst = MAX_EXECUTION_INPUT_BYTES + wave_results_bytes() + carried_bytes() + envelope
    assert worst <= STATE_PAYLOAD_MAX_BYTES, (worst, wave_results_bytes(), carried_bytes())


def test_the_state_after_a_wave_fits_with_the_scheduler_s_answer():
    """After the Segments map the state holds the scheduler's answer (the wave's segments: at most half the plan's
    cap, every lane recorded with a reason, the box failures) and the wave's results."""
    recorded = NODES * (REASON_LIMIT * FREE + 2 * MAX_RESULT_LANE + 80)
    answer = MAX_EXECUTION_INPUT_BYTES // 2 + recorded + carried_bytes() + 256
    worst = answer + wave_results_bytes() + 1024
    assert worst <= STATE_PAYLOAD_MAX_BYTES, worst


def test_the_outcome_s_reasons_and_the_failure_fit_and_the_cause_stays_under_step_functions_32k():
    reasons = NODES * (REASON_LIMIT * FREE + MAX_RESULT_LANE + 8)
    lists = 2 * NODES * (MAX_RESULT_LANE + 4)
    outcome = reasons + lists + 2 * len(ROLES) * 200 * FREE
    cause_chars = NODES * (REASON_LIMIT + MAX_RESULT_LANE + 8) + lists + len(ROLES) * (CAUSE_LIMIT + 20) + 2000
    assert cause_chars <= 32768  # RunFailed's CausePath: Step Functions' cause limit (characters)
    recorded = NODES * (REASON_LIMIT * FREE + 2 * MAX_RESULT_LANE + 80)
    assert outcome + cause_chars * FREE + recorded + carried_bytes() + 4096 <= STATE_PAYLOAD_MAX_BYTES


def test_each_bound_is_kept_at_its_source():
    """The constants above are what the sources do: on_command_status's cause (adversarial stderr), the agent's
    failure cause, the scheduler's shortening (control characters out)."""
    for tail in ('"' * 10_000, "\\" * 5000, "é" * 5000, "\x01\n" * 4000, ""):
        cause = failure_cause(
            {
                "lane": "smoke",
                "command_id": "c" * 36,
                "instance_id": PLACEHOLDER_INSTANCE_ID,
                "status": "TimedOut",
                "output_uri": "s3://b/" + "k" * 200,
            },
            tail,
        )
        assert len(cause) <= COMMAND_CAUSE_MAX and cause.isascii() and json.loads(cause)["lane"] == "smoke"
    long = failure_cause({"output_uri": "u" * 5000, "lane": "x"}, "boom")
    assert len(long) <= COMMAND_CAUSE_MAX and json.loads(long)["lane"] == "x"
    assert CAUSE_MESSAGE_MAX + 512 <= FAILURE_CAUSE_MAX  # the runner's cut message fits the callback's cap
    shortened = _short("a\x01b\x7f" + "€" * 5000, REASON_LIMIT)
    assert len(shortened) <= REASON_LIMIT and shortened.isprintable()


def test_an_execution_that_planned_itself_carries_only_its_plan_s_reference():
    """Started with a run request, the execution keeps its plan in S3: the state carries the planned input without
    waves, nodes or the request (control_plane.launch.planned_input), at most a few KiB for the largest matrix (its
    cells' names), so the planned scheduler's payload and the state after a wave stay as bounded as the plan path's."""
    from control_plane.launch import PreparedRun, planned_input
    from pipeline.matrix import MAX_CELLS

    cells = [f"c{i:0{len(str(MAX_CELLS))}d}" for i in range(MAX_CELLS)]
    execution_input = {
        "run_id": "r" * 80,
        "results_uri": "s3://" + "b" * 63 + "/results",
        "boxes": [{"box_role": r, "instance_id": PLACEHOLDER_INSTANCE_ID} for r in ROLES],
        "cells": cells,
        "max_concurrency": MAX_CELLS,
        "plan_uri": "s3://" + "b" * 63 + "/control/" + "r" * 80 + "/plan.json",
        "plan_digest": "sha256:" + "0" * 64,
        "nodes": [],
        "waves": [],
        "request": {"lane_config": {"x": "y" * MAX_EXECUTION_INPUT_BYTES}},
    }
    carried = planned_input(PreparedRun(None, execution_input, []))
    assert "request" not in carried and carried["waves"] == [] and carried["nodes"] == []
    reference = len(json.dumps(carried).encode())
    assert reference <= 4 * 1024, reference
    # the planned path's state: the run, its boxes, the reference (twice: the scheduler's payload reads it from the
    # state), the wave's results and the carried answer, beside the wave the scheduler answered
    worst = 2 * reference + MAX_EXECUTION_INPUT_BYTES // 2 + wave_results_bytes() + carried_bytes() + 1024
    assert worst <= STATE_PAYLOAD_MAX_BYTES, worst
