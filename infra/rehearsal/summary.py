"""What a rehearsal shows at the end: states, transitions per lane, commands, deliveries, boxes running."""
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
    for r in runs:
        if r.status != "Success":
            lines.append(f"  {r.comment} on {r.instance_id}: {r.status} rc={r.response_code}: "
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
    lines.append(f"timings: " + ", ".join(f"{k}={v:.1f}" for k, v in rehearsal.timings.items()))
    lines.append(f"boxes running: {len(running)}" + (f" ({', '.join(running)})" if running else ""))
    lines.append(f"wall time: {wall_s:.0f} s")
    return "\n".join(lines)
