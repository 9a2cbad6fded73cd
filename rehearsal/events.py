"""EventBridge as the deployed rules behave: pattern matching, target input modes, the input transformer.

moto stores rules but neither delivers to Lambda/Step Functions targets nor applies input transformers, so the
rehearsal routes events itself, from the rules of the synthesized templates. The semantics follow the
EventBridge user guide ("Content filtering in Amazon EventBridge event patterns", "Comparison operators",
"Amazon EventBridge input transformation"):

* a pattern is an object whose leaves are arrays (OR of the values); keys AND; nested objects nest; an array in
  the event matches when any element matches; a field the pattern names must be present unless the pattern says
  ``{"exists": false}``; ``$or`` takes a list of sub-patterns;
* operators: exact values (strings, numbers, null), ``prefix``/``suffix`` (optionally ``equals-ignore-case``),
  ``equals-ignore-case``, ``wildcard`` (``*``, ``\\*`` a literal star), ``anything-but`` (value, list, prefix,
  suffix, equals-ignore-case, wildcard), ``numeric`` ranges (JSON numbers only), ``exists``, ``cidr``;
* input transformer: each ``<var>`` of the template replaced by the value at its JSON path; inside a JSON string a
  string value is inserted raw (not escaped), outside quotes the value is inserted as JSON; a path missing from the
  event gives ``null`` outside quotes and an empty string inside; ``aws.events.rule-arn``, ``aws.events.rule-name``,
  ``aws.events.event.ingestion-time``, ``aws.events.event`` (the event without ``detail``) and
  ``aws.events.event.json`` (the whole event) are predefined.
"""

from __future__ import annotations

import ipaddress
import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from rehearsal.cfn import Resolver, Template

RULE_TYPE = "AWS::Events::Rule"
FUNCTION_TYPE = "AWS::Lambda::Function"
SCHEDULED_EVENT = "Scheduled Event"


class EventPatternError(Exception):
    """A pattern EventBridge would refuse (PutRule answers InvalidEventPatternException)."""


class InputTransformerError(Exception):
    """An input transformer or InputPath EventBridge would refuse."""


class _Missing:
    pass


MISSING = _Missing()


# --- patterns ------------------------------------------------------------------------------------------------


def matches(pattern: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    """True when ``event`` matches the EventBridge ``pattern``."""
    validate_pattern(pattern)
    return _match_object(pattern, event if isinstance(event, Mapping) else {}, "")


def validate_pattern(pattern: Any, path: str = "") -> None:
    """Raises :class:`EventPatternError` for a pattern EventBridge would refuse, whatever the event."""
    if not isinstance(pattern, Mapping):
        raise EventPatternError(
            f"{path or 'pattern'}: an event pattern is a JSON object, got {json.dumps(pattern)[:80]}"
        )
    for key, sub in pattern.items():
        where = f"{path}.{key}" if path else key
        if key == "$or":
            if not isinstance(sub, list) or len(sub) < 2:
                raise EventPatternError(f"{where}: $or takes a list of at least two patterns")
            for alternative in sub:
                validate_pattern(alternative, where)
        elif isinstance(sub, Mapping):
            validate_pattern(sub, where)
        elif not isinstance(sub, list):
            raise EventPatternError(f"{where}: a pattern leaf must be an array, got {json.dumps(sub)[:80]}")
        elif not sub:
            raise EventPatternError(f"{where}: an empty array matches nothing")
        else:
            for alt in sub:  # each matcher's own checks run against a probe of every JSON type
                for probe in ("probe", 0, None, True):
                    _match_leaf([alt], probe, where)


def _match_object(pattern: Mapping[str, Any], obj: Mapping[str, Any], path: str) -> bool:
    for key, sub in pattern.items():
        where = f"{path}.{key}" if path else key
        if key == "$or":
            if not isinstance(sub, list) or len(sub) < 2 or not all(isinstance(s, Mapping) for s in sub):
                raise EventPatternError(f"{where}: $or takes a list of at least two patterns")
            if not any(_match_object(s, obj, path) for s in sub):
                return False
            continue
        value = obj.get(key, MISSING)
        if isinstance(sub, Mapping):
            candidates = value if isinstance(value, list) else [value]
            objects = [c for c in candidates if isinstance(c, Mapping)]
            if value is MISSING:
                objects = [{}]  # only exists:false leaves can match below a missing field
            if not any(_match_object(sub, o, where) for o in objects):
                return False
        elif isinstance(sub, list):
            if not _match_leaf(sub, value, where):
                return False
        else:
            raise EventPatternError(f"{where}: a pattern leaf must be an array, got {json.dumps(sub)[:80]}")
    return True


def _match_leaf(alternatives: list[Any], value: Any, where: str) -> bool:
    if not alternatives:
        raise EventPatternError(f"{where}: an empty array matches nothing")
    values = value if isinstance(value, list) else [value]
    for alt in alternatives:
        if isinstance(alt, Mapping) and "exists" in alt:
            if len(alt) != 1 or not isinstance(alt["exists"], bool):
                raise EventPatternError(f"{where}: exists takes true or false")
            present = value is not MISSING and not isinstance(value, Mapping)
            if present == alt["exists"]:
                return True
            continue
        if value is MISSING:
            continue
        if any(_match_value(alt, v, where) for v in values):
            return True
    return False


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _wildcard(pattern: str, value: str) -> bool:
    if "**" in pattern:
        raise EventPatternError(f"wildcard {pattern!r}: consecutive wildcard characters are not allowed")
    parts, buf, i = [], "", 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern) and pattern[i + 1] in "*\\":
            buf += pattern[i + 1]
            i += 2
            continue
        if c == "*":
            parts.append(re.escape(buf) + ".*")
            buf = ""
        else:
            buf += c
        i += 1
    return re.fullmatch("".join(parts) + re.escape(buf), value, re.DOTALL) is not None


def _numeric(spec: Any, value: Any, where: str) -> bool:
    if not isinstance(spec, list) or len(spec) not in (2, 4):
        raise EventPatternError(f"{where}: numeric takes [op, n] or [op, n, op, n]")
    if not _is_number(value):
        return False
    ops = {"=": value.__eq__, "<": value.__lt__, "<=": value.__le__, ">": value.__gt__, ">=": value.__ge__}
    for op, bound in zip(spec[::2], spec[1::2]):
        if op not in ops or not _is_number(bound):
            raise EventPatternError(f"{where}: bad numeric comparison {op!r} {bound!r}")
        if not ops[op](bound):
            return False
    return True


def _string_op(op: str, arg: Any, value: Any, where: str) -> bool:
    """prefix/suffix/equals-ignore-case/wildcard on string values (each may be ignore-case for prefix/suffix)."""
    if not isinstance(value, str):
        return False
    fold = False
    if isinstance(arg, Mapping) and op in ("prefix", "suffix") and set(arg) == {"equals-ignore-case"}:
        arg, fold = arg["equals-ignore-case"], True
    if not isinstance(arg, str):
        raise EventPatternError(f"{where}: {op} takes a string")
    if op == "equals-ignore-case" or fold:
        value, arg = value.casefold(), arg.casefold()
    if op == "prefix":
        return value.startswith(arg)
    if op == "suffix":
        return value.endswith(arg)
    if op == "equals-ignore-case":
        return value == arg
    return _wildcard(arg, value)


def _match_value(alt: Any, value: Any, where: str) -> bool:
    if alt is None or isinstance(alt, (str, bool)):
        return type(value) is type(alt) and value == alt
    if _is_number(alt):
        return _is_number(value) and value == alt
    if not isinstance(alt, Mapping) or len(alt) != 1:
        raise EventPatternError(f"{where}: unknown matcher {json.dumps(alt)[:80]}")
    ((op, arg),) = alt.items()
    if op in ("prefix", "suffix", "equals-ignore-case", "wildcard"):
        return _string_op(op, arg, value, where)
    if op == "numeric":
        return _numeric(arg, value, where)
    if op == "cidr":
        try:
            return isinstance(value, str) and ipaddress.ip_address(value) in ipaddress.ip_network(arg, strict=False)
        except ValueError:
            return False
    if op == "anything-but":
        return _anything_but(arg, value, where)
    raise EventPatternError(f"{where}: unknown matcher {op!r}")


def _anything_but(arg: Any, value: Any, where: str) -> bool:
    if isinstance(arg, Mapping):
        if len(arg) != 1:
            raise EventPatternError(f"{where}: anything-but takes one operator")
        ((op, inner),) = arg.items()
        if op not in ("prefix", "suffix", "equals-ignore-case", "wildcard"):
            raise EventPatternError(f"{where}: anything-but does not take {op!r}")
        if not isinstance(value, str):
            return False
        options = inner if isinstance(inner, list) and op in ("equals-ignore-case", "wildcard") else [inner]
        return not any(_string_op(op, o, value, where) for o in options)
    options = arg if isinstance(arg, list) else [arg]
    if not all(isinstance(o, str) for o in options) and not all(_is_number(o) for o in options):
        raise EventPatternError(f"{where}: anything-but takes strings only or numbers only")
    return not any(_match_value(o, value, where) for o in options)


# --- input -------------------------------------------------------------------------------------------------------

_PATH_TOKEN = re.compile(r"\.([A-Za-z0-9_\-/:@$ ]+|\*)|\[(\d+|\*)\]")


def json_path(path: str, event: Any) -> Any:
    """The value at an EventBridge JSON path (``$.detail.object.key``, ``$.resources[0]``, ``*``); MISSING if none."""
    if not isinstance(path, str) or not path.startswith("$"):
        raise InputTransformerError(f"JSON path {path!r} must start with $")
    rest, pos, current = path[1:], 0, [event]
    wildcard = False
    while pos < len(rest):
        m = _PATH_TOKEN.match(rest, pos)
        if m is None:
            raise InputTransformerError(f"JSON path {path!r}: unsupported syntax at {rest[pos:]!r}")
        pos = m.end()
        key = m.group(1) if m.group(1) is not None else m.group(2)
        nxt: list[Any] = []
        for node in current:
            if key == "*":
                wildcard = True
                nxt.extend(node.values() if isinstance(node, dict) else node if isinstance(node, list) else [])
            elif m.group(2) is not None and isinstance(node, list) and int(key) < len(node):
                nxt.append(node[int(key)])
            elif m.group(1) is not None and isinstance(node, dict) and key in node:
                nxt.append(node[key])
        current = nxt
    if wildcard:
        return current
    return current[0] if current else MISSING


_PLACEHOLDER = re.compile(r"<([A-Za-z0-9_.\-]+)>")


def apply_input_transformer(
    input_paths_map: Mapping[str, str] | None,
    input_template: str,
    event: Mapping[str, Any],
    *,
    rule_name: str = "",
    rule_arn: str = "",
    ingestion_time: str | None = None,
) -> Any:
    """The payload the target receives: parsed JSON when the filled template is JSON, else the text itself."""
    paths = dict(input_paths_map or {})
    for name in paths:
        if name.startswith("aws."):
            raise InputTransformerError(f"InputPathsMap: variable names starting with 'aws.' are reserved: {name}")
    values: dict[str, Any] = {name: json_path(p, event) for name, p in paths.items()}
    values["aws.events.rule-name"] = rule_name
    values["aws.events.rule-arn"] = rule_arn
    values["aws.events.event.ingestion-time"] = ingestion_time or event.get("time", "")
    values["aws.events.event"] = {k: v for k, v in event.items() if k != "detail"}
    values["aws.events.event.json"] = dict(event)

    # A JSON template (an object or array) gets quote-aware substitution; a text template gets every value raw.
    json_mode = input_template.lstrip()[:1] in ("{", "[")
    out: list[str] = []
    in_string, escaped, i = False, False, 0
    while i < len(input_template):
        c = input_template[i]
        m = _PLACEHOLDER.match(input_template, i) if c == "<" else None
        if m and m.group(1) in values:
            out.append(_render(values[m.group(1)], in_string or not json_mode))
            i = m.end()
            continue
        if in_string and escaped:
            escaped = False
        elif in_string and c == "\\":
            escaped = True
        elif c == '"':
            in_string = not in_string
        out.append(c)
        i += 1
    text = "".join(out)
    try:
        return json.loads(text)
    except ValueError:
        return text


def _render(value: Any, in_string: bool) -> str:
    if value is MISSING:
        return "" if in_string else "null"
    if in_string and isinstance(value, str):
        return value  # EventBridge does not escape values it inserts
    return json.dumps(value, separators=(",", ":"))


# --- rules -------------------------------------------------------------------------------------------------------

InputMode = Literal["event", "input", "input_path", "input_transformer"]


@dataclass(frozen=True)
class Target:
    target_id: str
    arn: str
    function_logical_id: str | None  # the template's Lambda function the ARN names, if any
    mode: InputMode = "event"
    input: str | None = None
    input_path: str | None = None
    input_paths_map: dict[str, str] | None = None
    input_template: str | None = None
    retry_attempts: int | None = None


@dataclass(frozen=True)
class Rule:
    name: str
    logical_id: str
    arn: str
    state: Literal["ENABLED", "DISABLED"]
    pattern: dict[str, Any] | None = None
    schedule: str | None = None
    targets: tuple[Target, ...] = field(default_factory=tuple)
    event_bus: str = "default"

    @property
    def enabled(self) -> bool:
        return self.state == "ENABLED"


def rules_from_template(template: Template, resolver: Resolver) -> list[Rule]:
    """Every ``AWS::Events::Rule`` of the template, intrinsics resolved, targets mapped to function logical ids."""
    stack = template.stack_name
    functions = {str(resolver.get_att(stack, lid, "Arn")): lid for lid in template.of_type(FUNCTION_TYPE)}
    rules = []
    for lid in template.of_type(RULE_TYPE):
        if not resolver.is_active(stack, lid):
            continue
        props = resolver.properties(stack, lid)
        if "EventPattern" not in props and "ScheduleExpression" not in props:
            raise EventPatternError(f"{stack}: {lid}: a rule needs an EventPattern or a ScheduleExpression")
        pattern = props.get("EventPattern")
        if isinstance(pattern, str):
            pattern = json.loads(pattern)
        targets = tuple(_target(t, functions, f"{stack}: {lid}") for t in props.get("Targets", []))
        bus = props.get("EventBusName", "default")
        rules.append(
            Rule(
                name=resolver.physical_id(stack, lid),
                logical_id=lid,
                arn=str(resolver.get_att(stack, lid, "Arn")),
                state=props.get("State", "ENABLED"),
                pattern=pattern,
                schedule=props.get("ScheduleExpression"),
                targets=targets,
                event_bus=str(bus).rsplit("/", 1)[-1],
            )
        )
    return rules


def _target(spec: Mapping[str, Any], functions: Mapping[str, str], where: str) -> Target:
    modes = [k for k in ("Input", "InputPath", "InputTransformer") if k in spec]
    if len(modes) > 1:
        raise InputTransformerError(
            f"{where}: target {spec.get('Id')}: Input, InputPath and InputTransformer are mutually exclusive"
        )
    retry = spec.get("RetryPolicy", {}).get("MaximumRetryAttempts")
    base = dict(
        target_id=spec["Id"], arn=spec["Arn"], function_logical_id=functions.get(spec["Arn"]), retry_attempts=retry
    )
    if "Input" in spec:
        json.loads(spec["Input"])  # EventBridge requires valid JSON text
        return Target(**base, mode="input", input=spec["Input"])
    if "InputPath" in spec:
        return Target(**base, mode="input_path", input_path=spec["InputPath"])
    if "InputTransformer" in spec:
        tr = spec["InputTransformer"]
        return Target(
            **base,
            mode="input_transformer",
            input_paths_map=dict(tr.get("InputPathsMap", {})),
            input_template=tr["InputTemplate"],
        )
    return Target(**base)


def deliver(rule: Rule, target: Target, event: Mapping[str, Any], *, ingestion_time: str | None = None) -> Any:
    """The payload ``target`` receives for ``event``, per its input mode."""
    if target.mode == "input":
        return json.loads(target.input or "null")
    if target.mode == "input_path":
        value = json_path(target.input_path or "$", event)
        return None if value is MISSING else value
    if target.mode == "input_transformer":
        return apply_input_transformer(
            target.input_paths_map,
            target.input_template or "",
            event,
            rule_name=rule.name,
            rule_arn=rule.arn,
            ingestion_time=ingestion_time,
        )
    return dict(event)


def _schedule_hit(rule: Rule, event: Mapping[str, Any]) -> bool:
    return (
        rule.schedule is not None
        and event.get("source") == "aws.events"
        and event.get("detail-type") == SCHEDULED_EVENT
        and rule.arn in event.get("resources", [])
    )


def route(
    event: Mapping[str, Any], rules: Iterable[Rule], *, include_disabled: bool = False, event_bus: str = "default"
) -> list[tuple[Rule, Target, Any]]:
    """(rule, target, payload) for every target of every rule the event reaches on ``event_bus``.

    A pattern rule is reached when its pattern matches; a schedule rule by the "Scheduled Event" naming its ARN
    (see :func:`scheduled_event`). Disabled rules deliver nothing unless ``include_disabled``.
    """
    hits = []
    for rule in rules:
        if rule.event_bus != event_bus or not (rule.enabled or include_disabled):
            continue
        reached = _schedule_hit(rule, event) if rule.schedule else matches(rule.pattern or {}, event)
        if reached:
            hits.extend((rule, t, deliver(rule, t, event)) for t in rule.targets)
    return hits


def _iso(when: datetime | None) -> str:
    return (when or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def envelope(
    source: str,
    detail_type: str,
    detail: Mapping[str, Any],
    *,
    account: str,
    region: str,
    resources: Iterable[str] = (),
    time: datetime | None = None,
    event_id: str | None = None,
) -> dict[str, Any]:
    """An event as EventBridge delivers it (the envelope PutEvents and AWS services produce)."""
    return {
        "version": "0",
        "id": event_id or str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": source,
        "account": account,
        "time": _iso(time),
        "region": region,
        "resources": list(resources),
        "detail": dict(detail),
    }


def scheduled_event(rule: Rule, *, account: str, region: str, time: datetime | None = None) -> dict[str, Any]:
    """The event a schedule rule fires with (``detail-type`` "Scheduled Event", the rule's ARN in resources)."""
    if rule.schedule is None:
        raise EventPatternError(f"rule {rule.name} has no schedule")
    return envelope("aws.events", SCHEDULED_EVENT, {}, account=account, region=region, resources=[rule.arn], time=time)
