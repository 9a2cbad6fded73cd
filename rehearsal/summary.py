"""What a rehearsal shows at the end: states, transitions per lane, commands, deliveries, IAM per actor, boxes
running."""

from __future__ import annotations

from collections import Counter
from typing import Any


def states_entered(history: list[dict[str, Any]]) -> Counter:
    return Counter(e["stateEnteredEventDetails"]["name"] for e in history if e["type"].endswith("StateEntered"))


# a segment's own commands (their Comment's second word), not lanes: neuronpipe sync-harness|cache-push <run>
SEGMENT_COMMANDS = ("sync-harness", "cache-push")
MAP_ENDS = (
    "MapIterationSucceeded",
    "MapIterationFailed",
    "MapIterationAborted",
    "MapStateSucceeded",
    "MapStateFailed",
    "MapStateAborted",
    "MapStateExited",
)


def transitions_per_lane(history: list[dict[str, Any]]) -> list[int]:
    """States entered inside each iteration of the Lanes map, in the order the iterations started.

    Both boxes' Lanes maps run at once, so their events interleave: an event belongs to the iteration its
    ``previousEventId`` chain leads back to (each iteration chains its own events) without passing the end of a
    map (after a map ends its parent's events chain on from the map's last events)."""
    if any("previousEventId" not in e for e in history if e["type"].endswith("StateEntered")):
        return _sequential_transitions(history)
    by_id = {e.get("id"): e for e in history}
    roots = [
        e["id"]
        for e in history
        if e["type"] == "MapIterationStarted"
        and (e.get("mapIterationStartedEventDetails") or {}).get("name") == "Lanes"
    ]
    root_set, counts = set(roots), {r: 0 for r in roots}
    for e in history:
        if not e["type"].endswith("StateEntered"):
            continue
        prev, steps = e.get("previousEventId"), 0
        while prev is not None and steps < 10_000:
            if prev in root_set:
                counts[prev] += 1
                break
            before = by_id.get(prev)
            if before is None or before["type"] in MAP_ENDS:
                break
            prev, steps = before.get("previousEventId"), steps + 1
    return [counts[r] for r in roots]


def _sequential_transitions(history: list[dict[str, Any]]) -> list[int]:
    """A history without event ids (one map iteration at a time)."""
    counts, current = [], None
    for e in history:
        t = e["type"]
        details = (
            e.get("mapIterationStartedEventDetails")
            or e.get("mapIterationSucceededEventDetails")
            or e.get("mapIterationFailedEventDetails")
            or {}
        )
        if t == "MapIterationStarted" and details.get("name") == "Lanes":
            current = 0
        elif (
            t in ("MapIterationSucceeded", "MapIterationFailed")
            and details.get("name") == "Lanes"
            and current is not None
        ):
            counts.append(current)
            current = None
        elif t.endswith("StateEntered") and current is not None:
            current += 1
    return counts


def lane_intervals(history: list[dict[str, Any]], role_of: dict[str, str]) -> dict[str, tuple[Any, Any]]:
    """``box:lane`` -> (the lane's command scheduled, its task ended): from RunLane's TaskScheduled (the command's
    comment and instance) to the TaskSucceeded/TaskFailed chained to it."""
    import json

    by_id = {e.get("id"): e for e in history}
    opened: dict[Any, str] = {}
    out: dict[str, tuple[Any, Any]] = {}
    for e in history:
        if e["type"] == "TaskScheduled":
            d = e.get("taskScheduledEventDetails") or {}
            params = json.loads(d.get("parameters") or "{}")
            words = str(params.get("Comment") or "").split()
            ids = params.get("InstanceIds") or []
            lane_command = len(words) > 1 and words[1] not in SEGMENT_COMMANDS
            if d.get("resource", "").startswith("sendCommand") and lane_command:
                key = f"{role_of.get(ids[0], ids[0]) if ids else '?'}:{words[1]}"
                opened[e["id"]] = key
                out[key] = (e.get("timestamp"), None)
        elif e["type"] in ("TaskSucceeded", "TaskFailed", "TaskTimedOut"):
            prev, steps = e.get("previousEventId"), 0
            while prev is not None and prev not in opened and steps < 50:
                prev, steps = (by_id.get(prev) or {}).get("previousEventId"), steps + 1
            if prev in opened:
                key = opened.pop(prev)
                out[key] = (out[key][0], e.get("timestamp"))
    return out


def overlap_s(intervals: dict[str, tuple[Any, Any]], a: str, b: str) -> float:
    """Seconds during which a lane of box ``a`` and a lane of box ``b`` were both running."""

    def spans(role: str) -> list[tuple[Any, Any]]:
        return [(s, e) for k, (s, e) in intervals.items() if k.startswith(role + ":") and s and e]

    total = 0.0
    for s1, e1 in spans(a):
        for s2, e2 in spans(b):
            start, end = max(s1, s2), min(e1, e2)
            if end > start:
                total += (end - start).total_seconds()
    return total


def summarize(
    rehearsal: Any, execution_arn: str, history: list[dict[str, Any]], final: Any, running: list[str], wall_s: float
) -> str:
    lines = [
        f"rehearsal of {execution_arn.rsplit(':', 1)[-1]}: {final.status}"
        + (f" ({final.error}: {(final.cause or '')[:400]})" if final.error else "")
    ]
    lines.append("states: " + ", ".join(f"{k}={v}" for k, v in sorted(states_entered(history).items())))
    lines.append(f"transitions per lane: {transitions_per_lane(history)}")
    roles = {iid: box.identity.box_role for iid, box in getattr(rehearsal, "boxes", {}).items()}
    intervals = lane_intervals(history, roles)
    if intervals:
        lines.append(f"lanes of trn1 and inf2 running at the same time: {overlap_s(intervals, 'trn1', 'inf2'):.1f} s")
    outcome = getattr(final, "outcome", None)
    if outcome:
        lines.append(
            f"outcome: {outcome.get('status')}"
            + (f"; failed: {', '.join(outcome['failed'])}" if outcome.get("failed") else "")
            + (f"; skipped: {', '.join(outcome['skipped'])}" if outcome.get("skipped") else "")
        )
    runs = rehearsal.agents.runs if rehearsal.agents else []
    lines.append(
        f"commands sent: {len(runs)} ("
        + ", ".join(f"{s}={n}" for s, n in sorted(Counter(r.status for r in runs).items()))
        + ")"
    )
    closed = closed_before_failure(rehearsal)
    for r in runs:
        if r.status != "Success":
            note = (
                " (after its task had closed: the process was still exiting when the stop that follows a "
                "lane's callback killed it; on_command_status found the task closed)"
                if r.command_id in closed
                else ""
            )
            lines.append(
                f"  {r.comment} on {r.instance_id}: {r.status} rc={r.response_code}{note}: {r.stderr.strip()[-300:]}"
            )
    if rehearsal.bus:
        deliveries = Counter(
            (d.rule, d.target, "ok" if d.error is None else d.error.get("errorType")) for d in rehearsal.bus.deliveries
        )
        lines.append(
            "event deliveries: "
            + (", ".join(f"{r}->{t} {s} x{n}" for (r, t, s), n in sorted(deliveries.items())) or "none")
        )
        lines.append(
            "run events on the bus: "
            + ", ".join(e["detail-type"] for e in rehearsal.bus.events if e.get("source") == "neuronpipe")
        )
    for fn in rehearsal.fleet.functions.values():
        if fn.invocations:
            errors = [i["error"]["errorType"] for i in fn.invocations if i.get("error")]
            lines.append(
                f"lambda {fn.handler}: {len(fn.invocations)} invocation(s)" + (f", errors {errors}" if errors else "")
            )
    lines.extend(iam_lines(rehearsal))
    lines.append("timings: " + ", ".join(f"{k}={v:.1f}" for k, v in rehearsal.timings.items()))
    lines.append(f"boxes running: {len(running)}" + (f" ({', '.join(running)})" if running else ""))
    lines.append(f"wall time: {wall_s:.0f} s")
    return "\n".join(lines)


def closed_before_failure(rehearsal: Any) -> set[str]:
    """Command ids whose failure event reached on_command_status after the command's task had closed."""
    out: set[str] = set()
    for fn in rehearsal.fleet.functions.values():
        for inv in fn.invocations:
            result = inv.get("result")
            if isinstance(result, dict) and result.get("action") == "already_closed":
                out.add(str(result.get("command_id")))
    return out


def actor_table(recorder: Any) -> dict[str, list[str]]:
    """actor -> one entry per API it called: ``api xN`` with the IAM actions evaluated for it where they differ
    (``dynamodb:TransactWriteItems x1 (dynamodb:PutItem)``), ``DENIED`` marked. No square brackets: the CLI
    prints through rich, which would read them as markup."""
    checked: dict[tuple[str, str], Counter] = {}
    for c in list(recorder.calls):
        checked.setdefault((c.actor, c.api or c.action), Counter())[c.action + ("" if c.allowed else " DENIED")] += 1
    out: dict[str, list[str]] = {}
    for (actor, api), n in sorted(recorder.requests.items()):
        actions = checked.get((actor, api), Counter())
        denied = any(a.endswith(" DENIED") for a in actions)
        shown = sorted(a for a in actions if a.removesuffix(" DENIED") != api)
        out.setdefault(actor, []).append(
            f"{api} x{n}" + (f" ({', '.join(shown)})" if shown else "") + (" DENIED" if denied and not shown else "")
        )
    return out


def iam_lines(rehearsal: Any) -> list[str]:
    """The per-actor table, the static check of the state machine's Tasks, denials, what is not checked."""
    from rehearsal.iam import unchecked

    recorder = getattr(rehearsal, "iam", None)
    if recorder is None:
        return ["IAM: not enforced (every actor used the test key)"]
    denials = rehearsal.iam_denials()
    lines = [
        f"IAM enforced per actor: {sum(recorder.requests.values())} requests, "
        f"{len(recorder.calls)} checks, {sum(not c.allowed for c in recorder.calls)} denied"
    ]
    table = actor_table(recorder)
    width = max((len(a) for a in table), default=0)
    for actor, entries in sorted(table.items()):
        lines.append(f"  {actor:<{width}}  " + ", ".join(entries))
    evaluated = sorted(recorder.conditions_evaluated.items())
    if evaluated:
        lines.append(
            "IAM conditions evaluated from the requests: "
            + ", ".join(f"{actor} {label} x{n}" for (actor, label), n in evaluated)
        )
    static = rehearsal.iam_static
    bad = [(c, d) for c, d in static if not d.allowed]
    lines.append(
        f"IAM static check of the state machine's Tasks: {len(static)} calls, "
        + (f"{len(bad)} NOT granted" if bad else "all granted")
    )
    service = rehearsal.iam_service
    bad = [(c, d) for c, d in service if not d.allowed]
    lines.append(
        f"IAM static check of what AWS calls with the roles (Lambda logs and X-Ray, the SSM agent's own "
        f"calls): {len(service)} calls, " + (f"{len(bad)} NOT granted" if bad else "all granted")
    )
    if denials:
        lines.append(f"IAM DENIED ({len(denials)}):")
        lines.extend(f"  {d}" for d in denials)
    notes = unchecked(rehearsal.iam_model, recorder, static)
    lines.append(f"IAM not checked by moto or the rehearsal ({len(notes)}):")
    lines.extend(f"  - {n}" for n in notes)
    return lines
