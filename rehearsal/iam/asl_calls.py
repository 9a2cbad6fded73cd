"""The state machine's own calls, checked statically: every AWS action the ASL's Task states call, every branch,
with the resources their static parameters name, against the state machine's role."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rehearsal.iam.evaluate import Decision, IamDeniedError, evaluate
from rehearsal.iam.model import Actor
from rehearsal.iam.requests import request_checks

SDK_SERVICE_PREFIX = {"sfn": "states", "eventbridge": "events", "cloudwatchlogs": "logs"}


@dataclass(frozen=True)
class AslCall:
    state: str
    action: str
    resource: str | None  # None: given at run time (a ".$" parameter)


def asl_calls(
    definition: str | Mapping[str, Any], substitutions: Mapping[str, str] | None = None, *, region: str, account: str
) -> list[AslCall]:
    """Every AWS action the definition's Task states call, with the resources their static parameters name."""
    text = definition if isinstance(definition, str) else json.dumps(definition)
    for k, v in (substitutions or {}).items():
        text = text.replace("${" + k + "}", str(v))
    calls: list[AslCall] = []

    def walk(states: Mapping[str, Any]) -> None:
        for name, st in states.items():
            for branch in st.get("Branches", []):
                walk(branch["States"])
            for key in ("ItemProcessor", "Iterator"):
                if key in st:
                    walk(st[key]["States"])
            if st.get("Type") == "Task":
                calls.extend(_task_calls(name, st, region, account))

    walk(json.loads(text)["States"])
    return calls


def _task_calls(name: str, st: Mapping[str, Any], region: str, account: str) -> list[AslCall]:
    res = re.sub(r"\.(waitForTaskToken|sync(:2)?)$", "", st["Resource"])
    params = st.get("Parameters") or st.get("Arguments") or {}
    m = re.fullmatch(r"arn:[\w-]+:states:::(?:aws-sdk:)?([\w-]+):(\w+)", res)
    if m is None:
        if ":function:" in res:
            return [AslCall(name, "lambda:InvokeFunction", res)]
        return [AslCall(name, f"unknown:{res}", None)]
    service = SDK_SERVICE_PREFIX.get(m.group(1), m.group(1))
    action = f"{service}:{m.group(2)[0].upper()}{m.group(2)[1:]}"
    if action == "lambda:Invoke":
        action = "lambda:InvokeFunction"
        fn = params.get("FunctionName")
        return [
            AslCall(
                name,
                action,
                None
                if fn is None
                else fn
                if fn.startswith("arn:")
                else f"arn:aws:lambda:{region}:{account}:function:{fn}",
            )
        ]
    arns = request_checks(
        action,
        "*",
        {},
        json.dumps({k: v for k, v in params.items() if not k.endswith(".$")}).encode(),
        "",
        region,
        account,
    )
    if service == "ec2" and "InstanceIds" not in params:
        arns = [(action, None)]
    if action == "ssm:SendCommand" and "InstanceIds" not in params:
        arns.append((action, None))
    return [AslCall(name, a, r) for a, r in arns]


def check_state_machine(
    actor: Actor, definition: str | Mapping[str, Any], substitutions: Mapping[str, str], *, region: str, account: str
) -> list[tuple[AslCall, Decision]]:
    return [
        (c, evaluate(actor.statements, c.action, c.resource))
        for c in asl_calls(definition, substitutions, region=region, account=account)
    ]


def state_machine_denials(
    actor: Actor, definition: str | Mapping[str, Any], substitutions: Mapping[str, str], *, region: str, account: str
) -> list[IamDeniedError]:
    return [
        IamDeniedError(actor.name, c.action, c.resource, actor.role, d.denied_by)
        for c, d in check_state_machine(actor, definition, substitutions, region=region, account=account)
        if not d.allowed
    ]
