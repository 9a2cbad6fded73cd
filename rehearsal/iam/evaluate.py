"""IAM's identity-policy logic over the rehearsal's policy documents: statements, their evaluation, the decision."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


class IamDeniedError(Exception):
    """An actor called an action no statement of its role allows (or one denies)."""

    def __init__(self, actor: str, action: str, resource: str | None, role: str, denied_by: str | None = None):
        target = resource or "a resource the rehearsal cannot name"
        why = (
            f"statement {denied_by} denies it"
            if denied_by
            else f"no statement of its role {role} allows it (missing: Allow {action} on {resource or '*'})"
        )
        super().__init__(f"AccessDenied: {actor} called {action} on {target}: {why}")
        self.actor, self.action, self.resource, self.role, self.denied_by = actor, action, resource, role, denied_by


@dataclass(frozen=True)
class PolicyDoc:
    name: str
    source: str  # "<stack>/<logical id>" or "aws-managed:<name>" or "operator"
    document: dict[str, Any]


@dataclass(frozen=True)
class Statement:
    label: str
    effect: str
    actions: tuple[str, ...] = ()
    not_actions: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    not_resources: tuple[str, ...] = ()
    condition: dict[str, Any] = field(default_factory=dict)


def _tuple(v: Any) -> tuple[str, ...]:
    return tuple(v) if isinstance(v, list) else (v,) if v is not None else ()


def statements(doc: PolicyDoc) -> list[Statement]:
    raw = doc.document.get("Statement", [])
    out = []
    for i, s in enumerate(raw if isinstance(raw, list) else [raw]):
        out.append(
            Statement(
                f"{doc.name}/{s.get('Sid') or i}",
                s["Effect"],
                _tuple(s.get("Action")),
                _tuple(s.get("NotAction")),
                _tuple(s.get("Resource")),
                _tuple(s.get("NotResource")),
                dict(s.get("Condition", {})),
            )
        )
    return out


def _like(pattern: str, value: str, fold: bool) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.IGNORECASE if fold else 0) is not None


@dataclass(frozen=True)
class Decision:
    allowed: bool
    allowed_by: str | None = None
    denied_by: str | None = None
    assumed_conditions: tuple[str, ...] = ()  # labels of matching statements whose Condition was not evaluated
    evaluated_conditions: tuple[str, ...] = ()  # labels of statements whose Condition was evaluated from context


def _condition_holds(condition: Mapping[str, Any], context: Mapping[str, str | None]) -> bool | None:
    """Whether a Condition holds for the request's context keys (a None value: the key is absent); None when
    it cannot be evaluated here (an operator other than String{Equals,Like}[IfExists], or a key not in context)."""
    results = []
    for op, spec in condition.items():
        base = op.removesuffix("IfExists")
        if base not in ("StringEquals", "StringLike") or not isinstance(spec, Mapping):
            return None
        for key, patterns in spec.items():
            if key not in context:
                return None
            value = context[key]
            if value is None:
                results.append(op.endswith("IfExists"))
            else:
                pats = patterns if isinstance(patterns, list) else [patterns]
                results.append(any(p == value if base == "StringEquals" else _like(p, value, False) for p in pats))
    return all(results)


def evaluate(
    stmts: Iterable[Statement], action: str, resource: str | None, context: Mapping[str, str | None] | None = None
) -> Decision:
    """IAM's identity-policy logic: an explicit Deny wins, else any Allow. ``resource=None``: action-only check.

    Actions match case-insensitively with ``*``/``?`` wildcards, resources case-sensitively. A Condition is
    evaluated when every key it names is in ``context`` (string operators only, e.g. ``s3:prefix`` of a list
    request); otherwise it is assumed to hold (listed in the decision).
    """
    allow, deny, assumed, evaluated = None, None, [], []
    for s in stmts:
        if s.actions and not any(_like(p, action, True) for p in s.actions):
            continue
        if s.not_actions and any(_like(p, action, True) for p in s.not_actions):
            continue
        if resource is not None:
            if s.resources and not any(_like(p, resource, False) for p in s.resources):
                continue
            if s.not_resources and any(_like(p, resource, False) for p in s.not_resources):
                continue
        if s.condition:
            held = _condition_holds(s.condition, context or {})
            if held is None:
                assumed.append(s.label)
            else:
                evaluated.append(s.label)
                if not held:
                    continue
        if s.effect == "Deny":
            deny = deny or s.label
        elif s.effect == "Allow":
            allow = allow or s.label
    return Decision(deny is None and allow is not None, allow, deny, tuple(assumed), tuple(evaluated))
