"""Between the waves of an AWS run: what the last wave left, what the next wave runs, and the run's outcome.

The state machine calls this (through the ``schedule_wave`` Lambda) before each wave and once after the last:
Lambda → Map over the wave's box segments (both boxes at once) → Lambda, a bounded number of times, no Wait
state and no polling. Each call:

1. folds the last wave's segment results: a segment that ``failed`` (start, sync, heartbeat timeout, SSM
   errors) or whose stop failed (``stop_failed``) marks its box failed; ``gate_failed`` ends only that
   segment (the gate's failure is in the store); a lane whose command died without committing (the
   ``Command.*`` error of ``on_command_status``) is committed ``failed`` with that error;
2. records every lane of the last wave that left no attempt: ``skipped``, blocked by the failed box
   (``box:<role>``) or by the gate that ended its segment;
3. picks the next wave that has work: a lane that cannot run — its box failed, or a need from an earlier
   wave did not succeed (``pipeline.graph.blocked_reason``) — is committed ``skipped`` with the reason
   (``analytics.lane_records.commit_blocked_record``) and left out; a segment left empty is dropped, so a box is never
   started just to skip (needs within the wave are left to the lane's runner, which checks them itself);
4. when no wave is left: the run's outcome (``pipeline.graph.outcome``) and, for a failed run, the error the
   execution fails with (a stop that failed first: ``Instance.StopFailed``, so ``on_execution_status`` stops
   the box).

What it answers crosses Step Functions (256 KiB a state): every text it echoes is bounded — a box's failure
:data:`CAUSE_LIMIT`, a recorded lane's reason and each reason of the outcome :data:`REASON_LIMIT` (the whole text is
in the lane's record); ``tests/unit/test_asl_payload_bounds.py`` holds the worst case.

Pure over a :class:`analytics.store.ResultStore` (S3 in the Lambda, a directory in tests).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from control_plane.control_data import (
    Blobs,
    ControlDataError,
    canonical,
    check_segment_result,
    check_segments,
    control_key,
    read_verified,
    write_new,
)
from pipeline.graph import BOX_PREFIX, LaneStatus, Node, blocked_reason, outcome

STOP_FAILED_ERROR = "Instance.StopFailed"  # statemachine.build.STOP_FAILED_ERROR (kept import-free of it)
RUN_FAILED_ERROR = "Run.Failed"
CAUSE_LIMIT = 1000  # a box's failure, as the answer and the next call carry it
STOP_FAILED_LIMIT = 200  # a failed stop's mark (its whole text is the box's failure)
REASON_LIMIT = 300  # a recorded lane's reason, and each reason of the outcome (the record has the whole text)
# A matrix run has hundreds of lanes: what crosses the state is capped in count too (every lane's record is in the
# store; the report lists them all): lanes and reasons of the outcome, the records echoed by one answer, and the
# length of a cell's failure (carried from wave to wave for every failed cell).
OUTCOME_LANES_MAX = 60
OUTCOME_REASONS_MAX = 40
RECORDED_ECHO_MAX = 20
CELL_CAUSE_LIMIT = 240
NO_CAUSE = "its cause is not in the state: see the execution history"
# A wave whose segments exceed this runs as a Distributed Map (items in S3): the state holds the answer beside the
# execution's own data, within Step Functions' 256 KiB.
INLINE_SEGMENTS_MAX_BYTES = 48 * 1024


class ScheduleInputError(ValueError):
    """The scheduler's payload is not what the state machine sends (one line: what is wrong)."""


def nodes_from_json(items: Sequence[Mapping[str, Any]]) -> list[Node]:
    return [
        Node(
            n["lane"],
            n["box"],
            n["result_lane"],
            int(n["order"]),
            tuple(n.get("needs") or ()),
            bool(n.get("gate")),
            int(n.get("wave") or 0),
            tuple(n.get("gated_by") or ()),
        )
        for n in items
    ]


def _short(text: str, limit: int = CAUSE_LIMIT) -> str:
    """One line of at most ``limit`` printable characters (a control character would cost 6 bytes in JSON)."""
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in str(text or "")).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bounded_outcome(out: dict[str, Any]) -> dict[str, Any]:
    """The outcome as it crosses Step Functions: each lane's reason shortened (a failed lane's reason is its
    verbatim error, as long as the lane made it)."""
    reasons = out.get("reasons") or {}
    kept = dict(list(reasons.items())[:OUTCOME_REASONS_MAX])
    bounded = {**out, "reasons": {lane: _short(str(r), REASON_LIMIT) for lane, r in kept.items()}}
    for key in ("failed", "skipped"):  # a matrix's hundreds of lanes: the first ones, and how many more
        names = list(out.get(key) or [])
        if len(names) > OUTCOME_LANES_MAX:
            bounded[key] = names[:OUTCOME_LANES_MAX] + [f"… {len(names) - OUTCOME_LANES_MAX} more (see the report)"]
    if len(reasons) > OUTCOME_REASONS_MAX:
        bounded["why"] = _short(str(out.get("why") or ""), CAUSE_LIMIT * 4)
    return bounded


def _box_error(result: Mapping[str, Any]) -> str:
    error, cause = result.get("error") or "Error", result.get("cause") or ""
    return _short(f"{error}: {cause}".strip(": "), CAUSE_LIMIT)


def _write_items(run_id: str, wave: int, segments: list[dict[str, Any]], blobs: Blobs | None) -> dict[str, Any]:
    """A wave too large for the state: its segments go to an items file the Distributed Map reads (control data,
    create-only), each told where to write its result; the answer carries the file, its digest and those keys
    (bounded: a key per segment)."""
    if blobs is None:
        raise ScheduleInputError(
            f"wave {wave}: {len(segments)} segments exceed the state's inline limit and no "
            "bucket was given for a Distributed Map's items"
        )
    keys = {
        str(seg.get("box") or seg["box_role"]): control_key(
            run_id, f"wave-{wave}", "results", f"{seg.get('box') or seg['box_role']}.json"
        )
        for seg in segments
    }
    items = [{**seg, "results_key": keys[str(seg.get("box") or seg["box_role"])]} for seg in segments]
    key = control_key(run_id, f"wave-{wave}", "items.json")
    items_digest = write_new(blobs, key, canonical(items))
    return {"bucket": blobs.bucket, "key": key, "digest": items_digest, "wave": wave, "results": keys}


def commit_failed(
    store: Any, run_id: str, lane: str, error: str, cause: str, box_role: str | None = None
) -> LaneStatus:
    """A lane whose command died before its runner committed (``on_command_status``'s ``Command.*``): a
    ``failed`` attempt carrying that error, so the report and the outcome name it."""
    now = datetime.now(timezone.utc)
    writer = store.begin_attempt(run_id, lane)
    from analytics.lane_records import hostname

    row = {
        "started_at": now,
        "ended_at": now,
        "wall_s": 0.0,
        "backend": "none",
        "host": hostname(),
        "box_role": box_role,
        "status": "failed",
        "error_type": error,
        "error_message": _short(cause),
        "supersedes": True,
    }
    writer.add_rows("lane_runs", [row])
    writer.commit("failed", supersedes=True)
    return LaneStatus("failed", writer.attempt, f"{error}: {_short(cause, 300)}")


def load_plan(uri: str, expected_digest: str | None, blobs: Blobs, run_id: str) -> dict[str, Any]:
    """The waves and nodes of a plan kept in S3 (``plan_uri``): the control object of this run, its digest the one
    the execution input carries (:class:`ControlDataError` naming both otherwise)."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    if bucket != blobs.bucket or key != control_key(run_id, "plan.json"):
        raise ControlDataError(
            f"plan {uri}: not this run's control object s3://{blobs.bucket}/{control_key(run_id, 'plan.json')}"
        )
    body = read_verified(blobs, key, expected_digest, "plan")
    try:
        data = json.loads(body)
        return {"waves": list(data["waves"]), "nodes": list(data["nodes"])}
    except (ValueError, KeyError, TypeError) as exc:
        raise ScheduleInputError(f"schedule payload: plan {uri} is not a plan: {type(exc).__name__}: {exc}") from None


def _distributed_results(state: Mapping[str, Any], blobs: Blobs | None, run_id: str) -> list[dict[str, Any]]:
    """A Distributed Map wave's segment results, from the keys the scheduler gave its segments. The items file is
    read again and must still have the digest the scheduler wrote it with; each result must be its own box's (its
    status known, its lanes that box's). A segment that left none (its child execution ended before writing it) is
    a failed box, said so."""
    if blobs is None:
        raise ScheduleInputError("schedule payload: a distributed wave's results are in S3 but no bucket was given")
    items = json.loads(read_verified(blobs, str(state.get("key")), state.get("digest"), "wave items"))
    lanes_of = {
        str(i.get("box") or i.get("box_role")): [str(st.get("result_lane")) for st in i.get("lanes") or []]
        for i in items
        if isinstance(i, dict)
    }
    out = []
    for box, key in dict(state.get("results") or {}).items():
        if key != control_key(run_id, f"wave-{state.get('wave')}", "results", f"{box}.json"):
            raise ControlDataError(f"wave {state.get('wave')}: the result key {key!r} of {box} is not this run's")
        body = blobs.get(key)
        uri = f"s3://{blobs.bucket}/{key}"
        if body is None:
            out.append(
                {
                    "box": box,
                    "status": "failed",
                    "error": "Segment.NoResult",
                    "cause": f"the segment wrote no result to {uri}",
                }
            )
            continue
        try:
            res = json.loads(body)
        except ValueError:
            raise ControlDataError(f"segment result {uri}: not JSON") from None
        out.append(check_segment_result(res, box, lanes_of.get(box, []), uri))
    return out


def schedule(
    payload: Mapping[str, Any],
    store: Any,
    statuses_of: Any = None,
    blobs: Blobs | None = None,
    inline_max_bytes: int = INLINE_SEGMENTS_MAX_BYTES,
) -> dict[str, Any]:
    """The next wave's segments, or the run's outcome (see the module's steps). ``statuses_of(store, run_id)``
    reads the run's lane statuses (default ``analytics.lane_records.lane_statuses``); ``blobs``: the results
    bucket's control objects (a plan kept in S3, a Distributed Map wave's items and results: ``control_data``).

    Nothing read is trusted: a plan in S3 must have the execution input's digest, every segment is checked against
    the plan's models and bounds (``control_data.check_segments``), a distributed wave's items must still have their
    digest and its results must be their own boxes'. A refusal raises :class:`ControlDataError` (the run breaks,
    nothing more is started)."""
    run = _read_payload(payload, blobs)
    if run.next_wave == 0 and blobs is not None:  # before the first wave: the registered predictions into the store
        from control_plane.predictions import carry_control

        carry_control(store, blobs, run.run_id)
    if statuses_of is None:
        from analytics.lane_records import lane_statuses as statuses_of

    by_name = {n.result_lane: n for n in run.nodes}
    boxes = _fold_results(run.results, run.state)
    records = _Records(store, run.run_id, dict(statuses_of(store, run.run_id)))
    _record_last_wave(run, by_name, boxes, records)
    segments, wave = _next_wave(run, by_name, boxes.failures, records)
    if not segments:  # the plan's waves are done: an adaptive matrix's repeats (control_plane.adaptive_waves)
        segments, wave = _adaptive_wave(run, store, boxes.failures, records, wave)

    box_failures, stop_failed = boxes.failures, boxes.stop_failed
    for box in [b for b in box_failures if b in run.cells]:
        box_failures[box] = _short(box_failures[box], CELL_CAUSE_LIMIT)
    base = {
        "next_wave": wave,
        "box_failures": box_failures,
        "stop_failed": stop_failed,
        "recorded": records.recorded[:RECORDED_ECHO_MAX],
        "recorded_count": len(records.recorded),
        "distributed": None,
    }
    if segments:
        if len(json.dumps(segments).encode()) > inline_max_bytes:
            return {
                **base,
                "done": False,
                "wave": wave - 1,
                "segments": [],
                "distributed": _write_items(run.run_id, wave - 1, segments, blobs),
            }
        return {**base, "done": False, "wave": wave - 1, "segments": segments}
    result = outcome(run.nodes, records.statuses, box_failures, run.cells)
    out = _bounded_outcome(result.to_json())
    return {
        **base,
        "done": True,
        "outcome": out,
        "failure": _run_failure(result, out, boxes, by_name),
        "boxes": run.boxes,
    }


@dataclass
class _Payload:
    """What one call of the scheduler works from, read from its payload (and the plan in S3)."""

    run_id: str
    state: dict[str, Any]  # the previous answer's schedule
    waves: list[Any]
    nodes: list[Node]
    cells: list[str]
    results: list[dict[str, Any]]  # the last wave's segment results
    next_wave: int
    boxes: list[Any]


def _read_payload(payload: Mapping[str, Any], blobs: Blobs | None) -> _Payload:
    """The payload, its plan (from S3 when it is kept there) and segments checked, the last wave's results read
    (from S3 for a distributed wave); :class:`ScheduleInputError` for a payload that is not the state machine's."""
    try:
        run_id = str(payload["run_id"])
        state = dict(payload.get("schedule") or {})
        plan_uri = payload.get("plan_uri")
        source = "the execution input"
        if plan_uri:
            if blobs is None:
                raise ScheduleInputError("schedule payload: the plan is in S3 but no bucket was given")
            payload = {**payload, **load_plan(str(plan_uri), payload.get("plan_digest"), blobs, run_id)}
            source = f"plan {plan_uri} ({payload.get('plan_digest')})"
        waves = list(payload["waves"])
        boxes = list(payload.get("boxes") or [])
        check_segments(waves, run_id, boxes, source)
        nodes = nodes_from_json(payload["nodes"])
        cells = [str(c) for c in (payload.get("cells") or [])]
        results = [r for r in (payload.get("results") or []) if isinstance(r, dict)]
        if state.get("distributed"):
            results = _distributed_results(state["distributed"], blobs, run_id)
        next_wave = int(state.get("next_wave") or 0)
    except ControlDataError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ScheduleInputError(f"schedule payload: {type(exc).__name__}: {exc}") from None
    return _Payload(run_id, state, waves, nodes, cells, results, next_wave, boxes)


@dataclass
class _Boxes:
    """The boxes' state after the last wave: the run's failed boxes (and failed stops) so far, the segments a gate
    ended, the lanes whose command died before committing."""

    failures: dict[str, str]
    stop_failed: dict[str, str]
    ended_by_gate: dict[str, str]  # box -> the gate's failure (the gate's own record explains the rest)
    lane_failures: dict[str, tuple[str, str]]  # result lane -> (error, cause)


def _fold_results(results: list[dict[str, Any]], state: Mapping[str, Any]) -> _Boxes:
    """Step 1: the last wave's segment results folded into the failures the previous answers carried."""
    boxes = _Boxes(dict(state.get("box_failures") or {}), dict(state.get("stop_failed") or {}), {}, {})
    for res in results:
        role, status = str(res.get("box") or res.get("box_role")), res.get("status")
        if status in ("failed", "capacity_unavailable"):
            boxes.failures.setdefault(role, _box_error(res))
        elif status == "stop_failed":
            boxes.stop_failed.setdefault(role, _short(_box_error(res), STOP_FAILED_LIMIT))
            boxes.failures.setdefault(role, _box_error(res))
        elif status == "gate_failed":
            boxes.ended_by_gate[role] = _short(str(res.get("cause") or "the gate failed"))
        for lane in res.get("lanes") or []:
            if isinstance(lane, dict) and lane.get("result_lane"):
                boxes.lane_failures[str(lane["result_lane"])] = (
                    str(lane.get("error") or "Error"),
                    str(lane.get("cause") or ""),
                )
    return boxes


class _Records:
    """The run's lane statuses as this call leaves them, and the records it committed (echoed in the answer)."""

    def __init__(self, store: Any, run_id: str, statuses: dict[str, LaneStatus]):
        self.store, self.run_id, self.statuses = store, run_id, statuses
        self.recorded: list[dict[str, str]] = []

    def block(self, node: Node, by: str, reason: str) -> None:
        from analytics.lane_records import commit_blocked_record

        attempt = commit_blocked_record(self.store, self.run_id, node.result_lane, by, reason, {"box_role": node.box})
        self.statuses[node.result_lane] = LaneStatus("blocked", attempt, reason, by)
        self.recorded.append(
            {"lane": node.result_lane, "status": "skipped", "blocked_by": by, "reason": _short(reason, REASON_LIMIT)}
        )

    def fail(self, name: str, error: str, cause: str, box_role: str | None, reason: str) -> None:
        self.statuses[name] = commit_failed(self.store, self.run_id, name, error, cause, box_role)
        self.recorded.append({"lane": name, "status": "failed", "reason": _short(reason, REASON_LIMIT)})


def _record_last_wave(run: _Payload, by_name: Mapping[str, Node], boxes: _Boxes, records: _Records) -> None:
    """Step 2: every lane of the waves so far that left no attempt, recorded: failed (its command died, or its
    gate's), or skipped (blocked by its failed box, by a need, or by its segment's early end)."""
    waves = run.waves
    ran = {str(step["result_lane"]) for w in waves[: run.next_wave] for seg in w["segments"] for step in seg["lanes"]}
    for name in sorted(ran, key=lambda r: by_name[r].order if r in by_name else 0):
        if records.statuses.get(name, LaneStatus("missing")).status != "missing":
            continue
        node = by_name.get(name) or Node(name.split("@", 1)[0], "", name, 0)
        if name in boxes.lane_failures:
            error, cause = boxes.lane_failures[name]
            records.fail(name, error, cause or NO_CAUSE, node.box or None, f"{error}: {cause or NO_CAUSE}")
        elif node.box in boxes.failures:
            records.block(node, BOX_PREFIX + node.box, f"box {node.box} failed: {boxes.failures[node.box]}")
        elif node.gate and node.box in boxes.ended_by_gate:  # the gate's command died before it committed
            records.fail(name, "Gate.Failed", boxes.ended_by_gate[node.box], node.box, boxes.ended_by_gate[node.box])
        else:
            why = blocked_reason(node, records.statuses)
            if why is not None:
                records.block(node, *why)
            else:
                records.block(node, BOX_PREFIX + node.box, f"did not run: its segment on {node.box} ended early")


def _next_wave(
    run: _Payload, by_name: Mapping[str, Node], box_failures: Mapping[str, str], records: _Records
) -> tuple[list[dict[str, Any]], int]:
    """Step 3: the segments of the next wave with work (the lanes that cannot run recorded skipped, a segment left
    empty dropped), and the wave after it."""
    segments: list[dict[str, Any]] = []
    wave = run.next_wave
    while wave < len(run.waves) and not segments:
        for seg in run.waves[wave]["segments"]:
            role = str(seg.get("box") or seg["box_role"])
            kept = []
            pending: set[str] = set()  # this wave's lanes still to run: their runners check them
            for step in seg["lanes"]:
                node = by_name.get(str(step["result_lane"]))
                if node is None:
                    raise ScheduleInputError(f"lane {step['result_lane']} of wave {wave} is not a node of the plan")
                if role in box_failures:
                    records.block(
                        node, BOX_PREFIX + role, f"box {role} failed earlier in this run: {box_failures[role]}"
                    )
                    continue
                why = blocked_reason(
                    replace(node, needs=tuple(n for n in node.needs if n not in pending)), records.statuses
                )
                if why is not None:
                    records.block(node, *why)
                    continue
                kept.append(step)
                pending.add(node.result_lane)
            if kept:
                segments.append({**seg, "lanes": kept})
        wave += 1
    return segments, wave


def _adaptive_wave(
    run: _Payload, store: Any, box_failures: Mapping[str, str], records: _Records, wave: int
) -> tuple[list[dict[str, Any]], int]:
    """The repeat wave an adaptive matrix runs next (none: the plan's matrix is not adaptive, or it is decided)."""
    from control_plane.adaptive_waves import AdaptiveScheduleError, schedule_adaptive

    def skipped(result_lane: str, cell: str, reason: str) -> None:
        records.block(Node(result_lane.split("@", 1)[0], cell, result_lane, 0), BOX_PREFIX + cell, reason)

    try:
        segments = schedule_adaptive(store, run.run_id, run.waves, wave, records.statuses, box_failures, skipped)
    except AdaptiveScheduleError as exc:
        raise ScheduleInputError(f"adaptive matrix: {exc}") from None
    return (segments, wave + 1) if segments else ([], wave)


def _run_failure(result: Any, out: dict[str, Any], boxes: _Boxes, by_name: Mapping[str, Node]) -> dict[str, str]:
    """Step 4: the error and cause the execution fails with (none for a run that did not fail): a stop that failed
    first, else the first failed box's error unless a gate failed, else ``Run.Failed``."""
    box_failures, stop_failed = boxes.failures, boxes.stop_failed
    if stop_failed:
        # the stop's message first (it names the instance), then the same JSON a failed run's cause carries
        role = sorted(stop_failed)[0]
        return {
            "Error": STOP_FAILED_ERROR,
            "Cause": json.dumps(
                {"why": box_failures.get(role, stop_failed[role]), "box_failures": box_failures, "outcome": out},
                ensure_ascii=False,
            ),
        }
    if result.status == "failed":
        error = RUN_FAILED_ERROR
        first_box = sorted(box_failures)[0] if box_failures else None
        if first_box and not any(by_name[f].gate for f in result.failed if f in by_name):
            error = box_failures[first_box].split(":", 1)[0] or RUN_FAILED_ERROR
        # not ASCII-escaped: Step Functions counts a cause's characters (32,768 at most), not its escapes
        return {
            "Error": error,
            "Cause": json.dumps({"why": result.why, "box_failures": box_failures, "outcome": out}, ensure_ascii=False),
        }
    return {"Error": "", "Cause": ""}
