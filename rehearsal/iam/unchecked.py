"""What neither moto nor the rehearsal's IAM enforcement checks, one line each, for the rehearsal's summary."""

from __future__ import annotations

from collections.abc import Iterable

from rehearsal.iam.asl_calls import AslCall
from rehearsal.iam.enforce import IamRecorder
from rehearsal.iam.evaluate import Decision
from rehearsal.iam.model import IamModel


def unchecked(
    model: IamModel, recorder: IamRecorder | None = None, static: Iterable[tuple[AslCall, Decision]] = ()
) -> list[str]:
    """One line per thing the rehearsal's IAM enforcement cannot vouch for."""
    lines = []
    for actor in model.actors.values():
        for s in actor.statements:
            if s.condition:
                keys = ", ".join(f"{op} {k}" for op, spec in s.condition.items() for k in spec)
                n = recorder.conditions_evaluated[(actor.name, s.label)] if recorder else 0
                if n and not recorder.conditions_assumed[(actor.name, s.label)]:
                    continue  # evaluated from the request on every call it applied to (shown by the summary)
                lines.append(
                    f"{actor.name}: statement {s.label}: condition not evaluated ({keys}); "
                    "treated as if it held (moto ignores IAM conditions too)"
                )
    seen = set()
    for c in recorder.calls if recorder else []:
        if c.resource is None and (c.actor, c.action) not in seen:
            seen.add((c.actor, c.action))
            lines.append(f"{c.actor}: {c.action}: resource not derivable from the request; only the action was checked")
    for c, _ in static:
        if c.resource is None and ("state machine", c.action) not in seen:
            seen.add(("state machine", c.action))
            lines.append(
                f"state machine: {c.action} (state {c.state}): resource given at run time; only the action was checked"
            )
    lines.extend(model.notes)
    lines.extend(
        [
            "trust policies (which service may assume each role) and instance-profile bindings: not evaluated",
            "the state machine's calls are enforced when they run (moto's interpreter key bound to its actor) and "
            "checked statically for every Task of the ASL; Step Functions' own service-integration permissions "
            "(e.g. .sync's events:PutRule) are not modelled",
            "EventBridge -> Lambda and Step Functions -> Lambda invocations: service paths, not evaluated by moto",
            "the real SSM agent's own calls (ssm:UpdateInstanceInformation, ssmmessages:*, ec2messages:*, CloudWatch "
            "output) and the Lambda runtime's (log delivery, X-Ray) are not made in the rehearsal: their grants are "
            "checked statically against the roles (rehearsal.service_calls), not enforced",
            "SCPs, permission boundaries, session policies and KMS key policies: none modelled",
        ]
    )
    return lines
