"""Calls AWS makes with an actor's role that the rehearsal does not make: checked against the role statically.

A Lambda's runtime writes its logs to the function's log group (``logs:CreateLogStream``/``PutLogEvents``) and,
with active tracing, sends X-Ray segments, all with the execution role; the real SSM agent on a box registers
and polls (``ssm:UpdateInstanceInformation``, ``ec2messages:*``, ``ssmmessages:*``) and, when a command asks for
``CloudWatchOutputConfig``, streams its output to that log group, with the instance profile's role. The
rehearsal's workers and emulated agent make none of these calls, so enforcement never sees them; each is
evaluated here against the actor's statements with the resource AWS would name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rehearsal.iam import Decision, IamModel, evaluate

LAMBDA_LOG_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents")
XRAY_ACTIONS = ("xray:PutTraceSegments", "xray:PutTelemetryRecords")
SSM_AGENT_CALLS = (
    "ssm:UpdateInstanceInformation",
    "ec2messages:GetMessages",
    "ec2messages:AcknowledgeMessage",
    "ec2messages:SendReply",
    "ssmmessages:CreateControlChannel",
    "ssmmessages:OpenControlChannel",
)
COMMAND_LOG_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams")


@dataclass(frozen=True)
class ServiceCall:
    actor: str
    action: str
    resource: str | None
    why: str


def _log_stream(region: str, account: str, group: str) -> str:
    return f"arn:aws:logs:{region}:{account}:log-group:{group}:log-stream:rehearsal-stream"


def service_calls(deployment: Any, region: str, account: str) -> list[ServiceCall]:
    """What AWS calls with each deployed actor's role on its behalf (see the module docstring)."""
    calls: list[ServiceCall] = []
    res = deployment.resolver
    for module, fn in deployment.functions.items():
        props = res.properties(fn.stack, fn.logical_id)
        group = (props.get("LoggingConfig") or {}).get("LogGroup") or f"/aws/lambda/{fn.name}"
        calls += [
            ServiceCall(
                f"lambda:{module}",
                a,
                _log_stream(region, account, str(group)),
                f"the Lambda runtime writes the function's logs to {group}",
            )
            for a in LAMBDA_LOG_ACTIONS
        ]
        if (props.get("TracingConfig") or {}).get("Mode") == "Active":
            calls += [
                ServiceCall(f"lambda:{module}", a, "*", "active tracing: the runtime sends X-Ray segments")
                for a in XRAY_ACTIONS
            ]
    groups = sorted(set(re.findall(r'"CloudWatchLogGroupName"\s*:\s*"([^"]+)"', deployment.state_machine_definition)))
    for role, rec in deployment.instances.items():
        instance = f"arn:aws:ec2:{region}:{account}:instance/{rec.instance_id}"
        calls += [
            ServiceCall(
                f"box:{role}",
                a,
                instance if a.startswith("ssm:") else "*",
                "the SSM agent registers and polls for commands",
            )
            for a in SSM_AGENT_CALLS
        ]
        for group in groups:
            calls += [
                ServiceCall(
                    f"box:{role}",
                    a,
                    _log_stream(region, account, group),
                    f"the SSM agent streams command output to {group} (CloudWatchOutputConfig)",
                )
                for a in COMMAND_LOG_ACTIONS
            ]
            calls.append(
                ServiceCall(
                    f"box:{role}",
                    "logs:DescribeLogGroups",
                    f"arn:aws:logs:{region}:{account}:log-group:*",
                    "the SSM agent looks the output log group up before streaming",
                )
            )
    return calls


def check_service_calls(model: IamModel, calls: list[ServiceCall]) -> list[tuple[ServiceCall, Decision]]:
    out = []
    for c in calls:
        actor = model.actors.get(c.actor)
        out.append((c, evaluate(actor.statements, c.action, c.resource) if actor else Decision(False)))
    return out
