"""rehearsal.events: EventBridge pattern matching, target inputs and rules as the synthesized templates deploy."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from rehearsal.cfn import Assembly, Resolver
from rehearsal.events import (
    EventPatternError,
    InputTransformerError,
    Rule,
    Target,
    apply_input_transformer,
    deliver,
    envelope,
    json_path,
    matches,
    route,
    rules_from_template,
    scheduled_event,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "events"

# Events shaped as the AWS documentation shows them (S3 EventBridge notifications, SSM command status, Step
# Functions execution status), with this project's names.
S3_OBJECT_CREATED: dict[str, Any] = {
    "version": "0",
    "id": "17793124-05d4-b198-2fde-7ededc63b103",
    "detail-type": "Object Created",
    "source": "aws.s3",
    "account": "123456789012",
    "time": "2024-05-01T06:00:12Z",
    "region": "us-west-2",
    "resources": ["arn:aws:s3:::neuron-pipelines-results-123456789012-us-west-2"],
    "detail": {
        "version": "0",
        "bucket": {"name": "neuron-pipelines-results-123456789012-us-west-2"},
        "object": {
            "key": "adapters/qwen/lora-a.tar.gz",
            "size": 5,
            "etag": "b1946ac92492d2347c6235b4d2611184",
            "version-id": "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e",
            "sequencer": "00617F08299329D189",
        },
        "request-id": "N4N7GDK58NMKJ12R",
        "requester": "123456789012",
        "source-ip-address": "10.0.1.5",
        "reason": "PutObject",
    },
}
SSM_COMMAND_STATUS: dict[str, Any] = {
    "version": "0",
    "id": "51c0891d-0e34-45b1-b7b3-2b2b2a1b2c3d",
    "detail-type": "EC2 Command Invocation Status-change Notification",
    "source": "aws.ssm",
    "account": "123456789012",
    "time": "2024-05-01T06:10:00Z",
    "region": "us-west-2",
    "resources": ["arn:aws:ec2:us-west-2:123456789012:instance/i-0trn1"],
    "detail": {
        "command-id": "e8d3c0e4-71f7-4491-898f-c9b35bee5f3b",
        "document-name": "AWS-RunShellScript",
        "instance-id": "i-0trn1",
        "requested-date-time": "2024-05-01T06:09:30.049Z",
        "status": "Failed",
    },
}
SFN_STATUS: dict[str, Any] = {
    "version": "0",
    "id": "315c1398-40ff-a850-213b-158f73e60175",
    "detail-type": "Step Functions Execution Status Change",
    "source": "aws.states",
    "account": "123456789012",
    "time": "2024-05-01T07:00:00Z",
    "region": "us-west-2",
    "resources": ["arn:aws:states:us-west-2:123456789012:execution:neuron-pipelines:run-1"],
    "detail": {
        "executionArn": "arn:aws:states:us-west-2:123456789012:execution:neuron-pipelines:run-1",
        "stateMachineArn": "arn:aws:states:us-west-2:123456789012:stateMachine:neuron-pipelines",
        "name": "run-1",
        "status": "ABORTED",
        "startDate": 1714546800000,
        "stopDate": 1714550400000,
        "input": "{}",
        "output": None,
    },
}
EVENT: dict[str, Any] = {
    "source": "aws.ec2",
    "detail-type": "EC2 Instance State-change Notification",
    "resources": ["arn:a", "arn:b"],
    "detail": {
        "state": "running",
        "count": 5,
        "ratio": 0.5,
        "flag": True,
        "nothing": None,
        "empty": "",
        "ip": "10.0.0.17",
        "tags": ["gpu", "neuron"],
        "file": "dir/lib/x.PNG",
        "Region": "us-west-2",
        "nested": {"a": {"b": "deep"}},
        "items": [{"k": "v1"}, {"k": "v2"}],
    },
}


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ({"source": ["aws.ec2"]}, True),
        ({"source": ["aws.s3", "aws.ec2"]}, True),  # array = OR
        ({"source": ["aws.s3"]}, False),
        ({"source": ["aws.ec2"], "detail": {"state": ["stopped"]}}, False),  # keys AND
        ({"detail": {"nested": {"a": {"b": ["deep"]}}}}, True),  # nested objects
        ({"detail": {"nested": {"a": ["deep"]}}}, False),  # a leaf pattern never matches an object
        ({"resources": ["arn:b"]}, True),  # event arrays: any element
        ({"detail": {"tags": ["neuron"]}}, True),
        ({"detail": {"items": {"k": ["v2"]}}}, True),  # arrays of objects
        ({"detail": {"count": [5]}}, True),
        ({"detail": {"count": ["5"]}}, False),  # a string never equals a number
        ({"detail": {"flag": [True]}}, True),
        ({"detail": {"nothing": [None]}}, True),
        ({"detail": {"empty": [""]}}, True),
        ({"detail": {"missing": [None]}}, False),  # null is not absence
        ({"detail": {"state": [{"prefix": "run"}]}}, True),
        ({"detail": {"state": [{"prefix": {"equals-ignore-case": "RUN"}}]}}, True),
        ({"detail": {"count": [{"prefix": "5"}]}}, False),  # prefix only on strings
        ({"detail": {"file": [{"suffix": ".png"}]}}, False),
        ({"detail": {"file": [{"suffix": {"equals-ignore-case": ".png"}}]}}, True),
        ({"detail": {"state": [{"equals-ignore-case": "RUNNING"}]}}, True),
        ({"detail": {"file": [{"wildcard": "dir/*/x.PNG"}]}}, True),
        ({"detail": {"file": [{"wildcard": "*.png"}]}}, False),
        ({"detail": {"file": [{"wildcard": "dir/lib\\*"}]}}, False),  # \* is a literal star
        ({"detail": {"state": [{"anything-but": "stopped"}]}}, True),
        ({"detail": {"state": [{"anything-but": ["running", "stopped"]}]}}, False),
        ({"detail": {"count": [{"anything-but": [1, 2]}]}}, True),
        ({"detail": {"Region": [{"anything-but": {"prefix": "us-"}}]}}, False),
        ({"detail": {"file": [{"anything-but": {"suffix": ".txt"}}]}}, True),
        ({"detail": {"state": [{"anything-but": {"equals-ignore-case": ["RUNNING"]}}]}}, False),
        ({"detail": {"file": [{"anything-but": {"wildcard": "*/lib/*"}}]}}, False),
        ({"detail": {"missing": [{"anything-but": "x"}]}}, False),  # anything-but needs the field
        ({"detail": {"count": [{"numeric": [">", 0, "<=", 5]}]}}, True),
        ({"detail": {"count": [{"numeric": ["<", 5]}]}}, False),
        ({"detail": {"ratio": [{"numeric": ["=", 0.5]}]}}, True),
        ({"detail": {"state": [{"numeric": [">", 0]}]}}, False),  # numeric only on numbers
        ({"detail": {"state": [{"exists": True}]}}, True),
        ({"detail": {"missing": [{"exists": False}]}}, True),
        ({"detail": {"state": [{"exists": False}]}}, False),
        ({"detail": {"nested": [{"exists": True}]}}, False),  # exists works on leaves only
        ({"absent": {"x": [{"exists": False}]}}, True),
        ({"detail": {"ip": [{"cidr": "10.0.0.0/24"}]}}, True),
        ({"detail": {"ip": [{"cidr": "10.0.1.0/24"}]}}, False),
        ({"$or": [{"source": ["aws.s3"]}, {"detail": {"count": [5]}}]}, True),
        ({"source": ["aws.ec2"], "$or": [{"source": ["aws.s3"]}, {"detail": {"state": ["stopped"]}}]}, False),
        ({"detail": {"$or": [{"state": ["x"]}, {"Region": [{"prefix": "us-"}]}]}}, True),
    ],
)
def test_pattern_matching(pattern: dict[str, Any], expected: bool) -> None:
    assert matches(pattern, EVENT) is expected


@pytest.mark.parametrize(
    "pattern",
    [
        {"source": "aws.ec2"},
        {"source": []},
        {"detail": {"x": [{"numeric": [">>", 1]}]}},
        {"detail": {"x": [{"unknown-op": 1}]}},
        {"$or": [{"source": ["a"]}]},
        {"x": [{"anything-but": ["a", 1]}]},
        {"x": [{"wildcard": "a**b"}]},
    ],
)
def test_invalid_patterns_are_refused(pattern: dict[str, Any]) -> None:
    with pytest.raises(EventPatternError):
        matches(pattern, {"source": "aws.ec2", "x": "a**b"})


def test_json_paths() -> None:
    assert json_path("$.detail.object.key", S3_OBJECT_CREATED) == "adapters/qwen/lora-a.tar.gz"
    assert json_path("$.resources[0]", S3_OBJECT_CREATED).startswith("arn:aws:s3:::")
    assert json_path("$.detail-type", S3_OBJECT_CREATED) == "Object Created"
    assert json_path("$.detail.items[*].k", EVENT) == ["v1", "v2"]
    assert json_path("$", EVENT) is EVENT
    with pytest.raises(InputTransformerError):
        json_path("detail.x", EVENT)


def test_transformer_strings_raw_inside_quotes_json_outside() -> None:
    paths = {
        "key": "$.detail.object.key",
        "size": "$.detail.object.size",
        "obj": "$.detail.bucket",
        "missing": "$.detail.nope",
    }
    template = (
        '{"uri": "s3://b/<key>", "key": <key>, "size": <size>, "bucket": <obj>, "in": "<size>",'
        ' "m1": <missing>, "m2": "<missing>", "rule": "<aws.events.rule-name>"}'
    )
    out = apply_input_transformer(paths, template, S3_OBJECT_CREATED, rule_name="R")
    assert out == {
        "uri": "s3://b/adapters/qwen/lora-a.tar.gz",
        "key": "adapters/qwen/lora-a.tar.gz",
        "size": 5,
        "bucket": {"name": "neuron-pipelines-results-123456789012-us-west-2"},
        "in": "5",
        "m1": None,
        "m2": "",
        "rule": "R",
    }


def test_transformer_does_not_escape_strings_and_plain_text_stays_text() -> None:
    event = {"detail": {"msg": 'say "hi"'}}
    assert apply_input_transformer({"m": "$.detail.msg"}, '{"x": "<m>"}', event) == '{"x": "say "hi""}'
    assert apply_input_transformer({"m": "$.detail.msg"}, "<m> now", event) == 'say "hi" now'
    assert apply_input_transformer({}, '{"x": "<undefined>"}', event) == {"x": "<undefined>"}
    with pytest.raises(InputTransformerError, match="reserved"):
        apply_input_transformer({"aws.mine": "$.x"}, "<aws.mine>", event)


def test_transformer_predefined_variables() -> None:
    template = (
        '{"e": <aws.events.event>, "j": <aws.events.event.json>, "t": "<aws.events.event.ingestion-time>",'
        ' "arn": "<aws.events.rule-arn>"}'
    )
    out = apply_input_transformer(
        {}, template, SSM_COMMAND_STATUS, rule_arn="arn:r", ingestion_time="2024-05-01T06:10:01Z"
    )
    assert "detail" not in out["e"] and out["e"]["source"] == "aws.ssm"
    assert out["j"] == SSM_COMMAND_STATUS
    assert (out["t"], out["arn"]) == ("2024-05-01T06:10:01Z", "arn:r")


def test_schedule_transformer_of_interfaces_c() -> None:
    """INTERFACES C: NightlySmokeSchedule -> plan_run with {"time": "$.time"} and the request inline."""
    template = (
        '{"schedule": "nightly-smoke", "time": <time>, '
        '"request": {"preset": "smoke", "trigger": "schedule:nightly-smoke"}}'
    )
    rule = Rule(
        "nightly",
        "Nightly",
        "arn:aws:events:us-west-2:123456789012:rule/nightly",
        "ENABLED",
        schedule="cron(0 6 * * ? *)",
        targets=(
            Target(
                "T0",
                "arn:fn",
                "PlanRun",
                "input_transformer",
                input_paths_map={"time": "$.time"},
                input_template=template,
            ),
        ),
    )
    event = scheduled_event(
        rule, account="123456789012", region="us-west-2", time=datetime(2024, 5, 1, 6, 0, 3, tzinfo=timezone.utc)
    )
    assert event["detail-type"] == "Scheduled Event" and event["resources"] == [rule.arn] and event["detail"] == {}
    ((hit_rule, target, payload),) = route(event, [rule])
    assert hit_rule is rule and target.function_logical_id == "PlanRun"
    assert payload == {
        "schedule": "nightly-smoke",
        "time": "2024-05-01T06:00:03Z",
        "request": {"preset": "smoke", "trigger": "schedule:nightly-smoke"},
    }


def test_input_and_input_path_targets() -> None:
    rule = Rule(
        "r",
        "R",
        "arn:r",
        "ENABLED",
        pattern={"source": ["aws.ssm"]},
        targets=(
            Target("a", "arn:fa", None, "input", input='{"const": 1}'),
            Target("b", "arn:fb", None, "input_path", input_path="$.detail"),
            Target("c", "arn:fc", None),
        ),
    )
    payloads = [p for _, _, p in route(SSM_COMMAND_STATUS, [rule])]
    assert payloads == [{"const": 1}, SSM_COMMAND_STATUS["detail"], SSM_COMMAND_STATUS]
    assert deliver(rule, Target("d", "arn", None, "input_path", input_path="$.nope"), SSM_COMMAND_STATUS) is None


def test_disabled_rules_and_other_buses_deliver_nothing() -> None:
    rule = Rule("r", "R", "arn:r", "DISABLED", pattern={"source": ["aws.ssm"]}, targets=(Target("a", "arn", None),))
    assert route(SSM_COMMAND_STATUS, [rule]) == []
    assert len(route(SSM_COMMAND_STATUS, [rule], include_disabled=True)) == 1
    other = Rule(
        "o",
        "O",
        "arn:o",
        "ENABLED",
        pattern={"source": ["aws.ssm"]},
        targets=(Target("a", "arn", None),),
        event_bus="custom",
    )
    assert route(SSM_COMMAND_STATUS, [other]) == []


def test_envelope_is_the_delivered_shape() -> None:
    ev = envelope(
        "neuronpipe",
        "RunSucceeded",
        {"run_id": "r1"},
        account="123456789012",
        region="us-west-2",
        time=datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
    )
    assert set(ev) == {"version", "id", "detail-type", "source", "account", "time", "region", "resources", "detail"}
    assert (ev["time"], ev["detail"]) == ("2024-01-02T03:04:05Z", {"run_id": "r1"})


# --- the project's rules, from the synthesized ControlPlane template --------------------------------------------

CP = "NeuronPipelinesControlPlane"


@pytest.fixture(scope="module")
def real_rules(cfn_assembly: Assembly) -> dict[str, Rule]:
    res = Resolver(cfn_assembly)
    for stack, iid in (("NeuronPipelinesTrainium", "i-0trn1"), ("NeuronPipelinesInferentia", "i-0inf2")):
        (lid,) = cfn_assembly.template(stack).of_type("AWS::EC2::Instance")
        res.set_physical_id(stack, lid, iid)
    rules = rules_from_template(cfn_assembly.template(CP), res)
    return {r.logical_id.rstrip("0123456789ABCDEF"): r for r in rules}


BUCKET = "neuron-pipelines-results-123456789012-us-west-2"


def _shapes(fixture: str, sample: dict[str, Any]) -> list[dict[str, Any]]:
    """Our sample, plus the shared fixture of the same event (tests/fixtures/events) when there is one."""
    path = FIXTURES / fixture
    return [copy.deepcopy(sample)] + ([json.loads(path.read_text())] if path.is_file() else [])


def _on_box(event: dict[str, Any], instance_id: str = "i-0trn1") -> dict[str, Any]:
    event["detail"]["instance-id"] = instance_id
    return event


@pytest.mark.slow
@pytest.mark.parametrize("shape", _shapes("ssm_command_invocation_failed.json", SSM_COMMAND_STATUS))
def test_real_command_failed_rule(real_rules: dict[str, Rule], shape: dict[str, Any]) -> None:
    rule = real_rules["CommandFailedRule"]
    assert rule.enabled and rule.targets[0].function_logical_id.startswith("OnCommandStatus")
    for status, hit in (("Failed", True), ("TimedOut", True), ("Cancelled", True), ("Success", False)):
        ev = _on_box(copy.deepcopy(shape), "i-0inf2")
        ev["detail"]["status"] = status
        assert bool(route(ev, [rule])) is hit, status
    # an ephemeral cell's box (no id known at deploy time) is routed too; another document's command is not (the
    # handler ignores a routed command without a task token: test_handlers_moto)
    assert route(_on_box(copy.deepcopy(shape), "i-0ephemeralcell"), [rule])
    other = _on_box(copy.deepcopy(shape), "i-0inf2")
    other["detail"]["document-name"] = "AWS-RunPatchBaseline"
    assert route(other, [rule]) == []
    ev = _on_box(copy.deepcopy(shape))
    ((_, _, payload),) = route(ev, [rule])
    assert payload == ev  # the native event, no transformer


@pytest.mark.slow
@pytest.mark.parametrize("shape", _shapes("s3_object_created.json", S3_OBJECT_CREATED))
def test_real_adapter_rule(real_rules: dict[str, Rule], shape: dict[str, Any]) -> None:
    rule = real_rules["AdapterUploadedRule"]
    shape["detail"]["bucket"]["name"] = BUCKET
    ((_, target, payload),) = route(shape, [rule])
    assert target.function_logical_id.startswith("PlanRun")
    if target.mode == "event":  # INTERFACES C: the native event reaches plan_run
        assert payload == shape
    else:  # the pre-C transformer builds a request
        assert payload["adapter_uri"] == f"s3://{BUCKET}/{shape['detail']['object']['key']}"
    for key in ("results/run/x.tar.gz", "adapters/qwen/lora-a.zip"):
        ev = copy.deepcopy(shape)
        ev["detail"]["object"]["key"] = key
        assert route(ev, [rule]) == [], key
    ev = copy.deepcopy(shape)
    ev["detail"]["bucket"]["name"] = "another-bucket"
    assert route(ev, [rule]) == []


@pytest.mark.slow
def test_real_schedules(real_rules: dict[str, Rule]) -> None:
    nightly, reaper = real_rules["NightlySmokeSchedule"], real_rules["IdleReaperSchedule"]
    when = datetime(2024, 5, 1, 6, 0, tzinfo=timezone.utc)
    for ev in [
        scheduled_event(nightly, account="123456789012", region="us-west-2", time=when),
        *[{**e, "resources": [nightly.arn]} for e in _shapes("scheduled_event.json", {})[1:]],
    ]:
        assert route(ev, [nightly, reaper]) == []  # disabled by default
        ((_, _, payload),) = route(ev, [nightly, reaper], include_disabled=True)
        request = payload.get("request", payload)
        assert (request["preset"], request["trigger"]) == ("smoke", "schedule:nightly-smoke")
        if "time" in payload:  # INTERFACES C: the schedule's time reaches plan_run
            assert payload["time"] == ev["time"]
    ev = scheduled_event(reaper, account="123456789012", region="us-west-2", time=when)
    ((rule, _, payload),) = route(ev, [nightly, reaper])
    assert rule is reaper and payload == ev


@pytest.mark.slow
@pytest.mark.parametrize("shape", _shapes("sfn_execution_status_aborted.json", SFN_STATUS))
def test_real_execution_status_rule_when_deployed(real_rules: dict[str, Rule], shape: dict[str, Any]) -> None:
    rule = real_rules.get("ExecutionEndedRule")
    if rule is None:
        pytest.skip("ExecutionEndedRule not in the template yet (INTERFACES C, H2)")
    for status, hit in (("ABORTED", True), ("FAILED", True), ("TIMED_OUT", True), ("SUCCEEDED", False)):
        ev = copy.deepcopy(shape)
        ev["detail"]["status"] = status
        assert bool(route(ev, [rule])) is hit, status
    ev = copy.deepcopy(shape)
    ev["detail"]["stateMachineArn"] = "arn:aws:states:us-west-2:123456789012:stateMachine:other"
    assert route(ev, [rule]) == []
