"""What a rehearsal shows at the end: states, transitions per lane, commands, deliveries, IAM per actor, boxes
running."""
from __future__ import annotations

from collections import Counter
from typing import Any


def states_entered(history: list[dict[str, Any]]) -> Counter:
    return Counter(e["stateEnteredEventDetails"]["name"] for e in history if e["type"].endswith("StateEntered"))


def transitions_per_lane(history: list[dict[str, Any]]) -> list[int]:
    """States entered inside each iteration of the Lanes map."""
    counts, current = [], None
    for e in history:
        t = e["type"]
        details = e.get("mapIterationStartedEventDetails") or e.get("mapIterationSucceededEventDetails") or \
            e.get("mapIterationFailedEventDetails") or {}
        if t == "MapIterationStarted" and details.get("name") == "Lanes":
            current = 0
        elif t in ("MapIterationSucceeded", "MapIterationFailed") and details.get("name") == "Lanes" \
                and current is not None:
            counts.append(current)
            current = None
        elif t.endswith("StateEntered") and current is not None:
            current += 1
    return counts


def summarize(rehearsal: Any, execution_arn: str, history: list[dict[str, Any]], final: Any,
              running: list[str], wall_s: float) -> str:
    lines = [f"rehearsal of {execution_arn.rsplit(':', 1)[-1]}: {final.status}"
             + (f" ({final.error}: {(final.cause or '')[:400]})" if final.error else "")]
    lines.append("states: " + ", ".join(f"{k}={v}" for k, v in sorted(states_entered(history).items())))
    lines.append(f"transitions per lane: {transitions_per_lane(history)}")
    runs = rehearsal.agents.runs if rehearsal.agents else []
    lines.append(f"commands sent: {len(runs)} (" + ", ".join(
        f"{s}={n}" for s, n in sorted(Counter(r.status for r in runs).items())) + ")")
    closed = closed_before_failure(rehearsal)
    for r in runs:
        if r.status != "Success":
            note = (" (after its task had closed: the process was still exiting when the stop that follows a "
                    "lane's callback killed it; on_command_status found the task closed)"
                    if r.command_id in closed else "")
            lines.append(f"  {r.comment} on {r.instance_id}: {r.status} rc={r.response_code}{note}: "
                         f"{r.stderr.strip()[-300:]}")
    if rehearsal.bus:
        deliveries = Counter((d.rule, d.target, "ok" if d.error is None else d.error.get("errorType"))
                             for d in rehearsal.bus.deliveries)
        lines.append("event deliveries: " + (", ".join(f"{r}->{t} {s} x{n}" for (r, t, s), n in
                                                       sorted(deliveries.items())) or "none"))
        lines.append("run events on the bus: " + ", ".join(
            e["detail-type"] for e in rehearsal.bus.events if e.get("source") == "neuronpipe"))
    for fn in rehearsal.fleet.functions.values():
        if fn.invocations:
            errors = [i["error"]["errorType"] for i in fn.invocations if i.get("error")]
            lines.append(f"lambda {fn.handler}: {len(fn.invocations)} invocation(s)"
                         + (f", errors {errors}" if errors else ""))
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
        out.setdefault(actor, []).append(f"{api} x{n}" + (f" ({', '.join(shown)})" if shown else "")
                                         + (" DENIED" if denied and not shown else ""))
    return out


def iam_lines(rehearsal: Any) -> list[str]:
    """The per-actor table, the static check of the state machine's Tasks, denials, what is not checked."""
    from infra.rehearsal.iam import unchecked

    recorder = getattr(rehearsal, "iam", None)
    if recorder is None:
        return ["IAM: not enforced (every actor used the test key)"]
    denials = rehearsal.iam_denials()
    lines = [f"IAM enforced per actor: {sum(recorder.requests.values())} requests, "
             f"{len(recorder.calls)} checks, {sum(not c.allowed for c in recorder.calls)} denied"]
    table = actor_table(recorder)
    width = max((len(a) for a in table), default=0)
    for actor, entries in sorted(table.items()):
        lines.append(f"  {actor:<{width}}  " + ", ".join(entries))
    evaluated = sorted(recorder.conditions_evaluated.items())
    if evaluated:
        lines.append("IAM conditions evaluated from the requests: " + ", ".join(
            f"{actor} {label} x{n}" for (actor, label), n in evaluated))
    static = rehearsal.iam_static
    bad = [(c, d) for c, d in static if not d.allowed]
    lines.append(f"IAM static check of the state machine's Tasks: {len(static)} calls, "
                 + (f"{len(bad)} NOT granted" if bad else "all granted"))
    service = rehearsal.iam_service
    bad = [(c, d) for c, d in service if not d.allowed]
    lines.append(f"IAM static check of what AWS calls with the roles (Lambda logs and X-Ray, the SSM agent's own "
                 f"calls): {len(service)} calls, " + (f"{len(bad)} NOT granted" if bad else "all granted"))
    if denials:
        lines.append(f"IAM DENIED ({len(denials)}):")
        lines.extend(f"  {d}" for d in denials)
    notes = unchecked(rehearsal.iam_model, recorder, static)
    lines.append(f"IAM not checked by moto or the rehearsal ({len(notes)}):")
    lines.extend(f"  - {n}" for n in notes)
    return lines
