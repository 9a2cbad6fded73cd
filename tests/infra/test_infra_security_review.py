"""The security review's infrastructure items: a box is not trusted with what the control plane decides; the clean-up
path pages someone; the budget counts this project; the network lets out only what the boxes need; every cdk-nag
acknowledgment says what its grant covers."""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest

from infra.config import (
    BOX_PRINCIPAL,
    COMMIT_KEY_PATTERNS,
    CONTROL_KEY_PATTERN,
    PRINCIPAL_TAG_KEY,
    PROJECT_TAG_KEY,
    STACK_BASE,
    STACK_CONTROL_PLANE,
    STACK_FLEET,
    STACK_INFERENTIA,
    STACK_NAMES,
    STACK_TRAINIUM,
)
from tests.support.cfn import as_list, flat

ROOT = Path(__file__).resolve().parents[2]
BOX_ACTORS = ("box:trn1", "box:inf2", "box:fleet")
BOX_STACKS = (STACK_TRAINIUM, STACK_INFERENTIA, STACK_FLEET)


def _model(outdir):
    from rehearsal.cfn import Resolver, load_assembly
    from rehearsal.iam import iam_model

    assembly = load_assembly(outdir)
    res = Resolver(assembly)
    for stack, iid in ((STACK_TRAINIUM, "i-0trn1"), (STACK_INFERENTIA, "i-0inf2")):
        (lid,) = assembly.template(stack).of_type("AWS::EC2::Instance")
        res.set_physical_id(stack, lid, iid)
    bucket = next(
        res.physical_id(STACK_BASE, lid)
        for lid in assembly.template(STACK_BASE).of_type("AWS::S3::Bucket")
        if lid.startswith("Results")
    )
    return iam_model(assembly, res), bucket


@pytest.fixture(scope="module")
def decide(synthesized):
    """``decide(actor, action, key)``: the actor's identity policies evaluated (rehearsal.iam) for one S3 request on
    the results bucket; ``key=None``: the bucket itself (``prefix``: ListBucket's s3:prefix)."""
    from rehearsal.iam import evaluate

    model, bucket = _model(synthesized.outdir)

    def run(actor: str, action: str, key: str | None, prefix: str | None = None):
        resource = f"arn:aws:s3:::{bucket}" + (f"/{key}" if key else "")
        return evaluate(
            model.actors[actor].statements, action, resource, {"s3:prefix": prefix} if action == "s3:ListBucket" else {}
        )

    return run


def _statements(synthesized, stack: str, prefix: str = "") -> dict[str, dict[str, Any]]:
    policies = synthesized.resources(stack, "AWS::IAM::Policy")
    return {
        st.get("Sid", f"{k}/{i}"): st
        for k, p in policies.items()
        if k.startswith(prefix)
        for i, st in enumerate(p["Properties"]["PolicyDocument"]["Statement"])
    }


def _bucket_statements(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (policy,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::S3::BucketPolicy" and "DenyOverwriteOfResults" in json.dumps(r["Properties"])
    ]
    return {st.get("Sid", str(i)): st for i, st in enumerate(policy["PolicyDocument"]["Statement"])}


def _keys(statement: dict[str, Any]) -> list[str]:
    """The key patterns of a bucket-policy statement's resources (what follows the bucket)."""
    return sorted(re.search(r"(?:\}|-results-[^/]+)/(.+)$", flat(r)).group(1) for r in as_list(statement["Resource"]))


def _function_ids(synthesized) -> dict[str, str]:
    fns = synthesized.resources(STACK_CONTROL_PLANE, "AWS::Lambda::Function")
    return {f["Properties"]["Handler"].split(".")[-2]: k for k, f in fns.items()}


# --- A. control data the box cannot touch -----------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["fresh", "imported"])
def test_control_data_is_create_only_and_no_box_role_may_write_it_in_the_bucket_policy(synthesized, redeploy, variant):
    template = synthesized.templates[STACK_BASE] if variant == "fresh" else redeploy[STACK_BASE]
    statements = _bucket_statements(template)
    append_only = statements["DenyOverwriteOfResults"]
    assert CONTROL_KEY_PATTERN == "control/*" and "control/*" in _keys(append_only)
    deny = statements["DenyBoxWritesOfControlPlaneKeys"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"}
    assert sorted(as_list(deny["Action"])) == ["s3:DeleteObject", "s3:PutObject"]
    assert _keys(deny) == sorted(["control/*", "results/v1/_commits/*", "results/v1/_quarantine/*"])
    assert deny["Condition"] == {"StringEquals": {f"aws:PrincipalTag/{PRINCIPAL_TAG_KEY}": BOX_PRINCIPAL}}


def test_every_box_role_carries_the_box_principal_tag_and_no_other_role_does(synthesized):
    for stack in STACK_NAMES:
        for lid, role in synthesized.resources(stack, "AWS::IAM::Role").items():
            tags = {t["Key"]: t["Value"] for t in role["Properties"].get("Tags", [])}
            is_box = stack in BOX_STACKS
            assert (tags.get(PRINCIPAL_TAG_KEY) == BOX_PRINCIPAL) == is_box, (stack, lid)
    assert len([1 for stack in BOX_STACKS for _ in synthesized.resources(stack, "AWS::IAM::Role")]) == 3


@pytest.mark.parametrize("actor", BOX_ACTORS)
def test_no_box_role_may_write_or_delete_control_data(decide, synthesized, actor):
    for key in ("control/run-1/plan.json", "control/run-1/wave-0/items.json", "control/run-1/wave-0/results/c01.json"):
        for action in ("s3:PutObject", "s3:DeleteObject"):
            decision = decide(actor, action, key)
            assert not decision.allowed, (actor, action, key)
    for stack in BOX_STACKS:
        deny = _statements(synthesized, stack, "BoxPolicy")["DenyControlData"]
        assert deny["Effect"] == "Deny" and sorted(as_list(deny["Action"])) == ["s3:DeleteObject", "s3:PutObject"]
        assert flat(deny["Resource"]).endswith("/control/*")


def test_the_control_plane_reads_and_writes_control_data(decide):
    sm = "state-machine:neuron-pipelines"
    items, result, plan = (
        "control/run-1/wave-0/items.json",
        "control/run-1/wave-0/results/c01.json",
        "control/run-1/plan.json",
    )
    assert decide(sm, "s3:GetObject", items).allowed  # the Distributed Map's ItemReader
    assert decide(sm, "s3:PutObject", result).allowed  # each child execution writes its segment's result
    assert decide("lambda:plan_run", "s3:PutObject", plan).allowed
    assert decide("lambda:plan_execution", "s3:PutObject", plan).allowed  # an execution that planned itself
    assert decide("lambda:plan_execution", "s3:GetObject", plan).allowed  # read back on a retried invocation
    for key in (plan, items, result):
        assert decide("lambda:schedule_wave", "s3:GetObject", key).allowed
        assert decide("lambda:schedule_wave", "s3:PutObject", key).allowed
    # plan_run and plan_execution write no control data under results/ (where the boxes write)
    for planner in ("lambda:plan_run", "lambda:plan_execution"):
        assert not decide(planner, "s3:PutObject", "results/fleet/run-1/plan.json").allowed


# --- B. commit markers only the control plane writes -----------------------------------------------------------


@pytest.mark.parametrize("actor", BOX_ACTORS)
def test_boxes_propose_their_commit_but_never_write_a_commit_or_quarantine_marker(decide, actor):
    assert decide(actor, "s3:PutObject", "results/v1/_proposed/run_id=r1/lane=sft/00000001.json").allowed
    assert decide(actor, "s3:PutObject", "results/v1/_seq/run_id=r1/lane=sft/00000001").allowed
    assert decide(actor, "s3:PutObject", "results/v1/lane_runs/run_id=r1/part-0.parquet").allowed
    for key in (
        "results/v1/_commits/run_id=r1/lane=sft/00000001.json",
        "results/v1/_quarantine/run_id=r1/lane=sft/00000001.json",
    ):
        decision = decide(actor, "s3:PutObject", key)
        assert not decision.allowed, (actor, key)
    assert COMMIT_KEY_PATTERNS == ("results/v1/_commits/*", "results/v1/_quarantine/*")


def test_commit_lane_reads_results_lists_results_and_writes_commit_markers_only(synthesized, decide):
    from infra.stacks.control import HANDLERS

    spec = HANDLERS["commit_lane"]
    assert (spec.memory_mb, spec.timeout_s) == (512, 120)
    assert spec.handler == "control_plane.handlers.commit_lane.handler"
    statements = _statements(synthesized, STACK_CONTROL_PLANE, "CommitLaneRole")
    s3 = {sid: st for sid, st in statements.items() if any(a.startswith("s3:") for a in as_list(st["Action"]))}
    assert sorted(
        (as_list(st["Action"])[0], flat(st["Resource"]).rsplit("-us-west-2", 1)[-1]) for st in s3.values()
    ) == [("s3:GetObject", "/results/*"), ("s3:ListBucket", ""), ("s3:PutObject", "/results/v1/_commits/*")]
    (listing,) = [st for st in s3.values() if st["Action"] == "s3:ListBucket"]
    assert listing["Condition"] == {"StringLikeIfExists": {"s3:prefix": ["results", "results/*"]}}
    commit = "results/v1/_commits/run_id=r1/lane=sft/00000001.json"
    assert decide("lambda:commit_lane", "s3:PutObject", commit).allowed
    assert not decide("lambda:commit_lane", "s3:PutObject", "results/v1/lane_runs/run_id=r1/x.parquet").allowed
    assert not decide("lambda:commit_lane", "s3:PutObject", "control/run-1/plan.json").allowed
    assert decide("lambda:commit_lane", "s3:GetObject", "results/v1/_proposed/run_id=r1/lane=sft/00000001.json").allowed


def test_the_state_machine_may_invoke_commit_lane_and_its_arn_is_a_substitution(synthesized):
    ids = _function_ids(synthesized)
    sm = _statements(synthesized, STACK_CONTROL_PLANE, "StateMachinePolicy")
    assert sm["CommitLanes"]["Action"] == "lambda:InvokeFunction"
    assert sm["CommitLanes"]["Resource"] == {"Fn::GetAtt": [ids["commit_lane"], "Arn"]}
    stack = synthesized.app.control_plane
    values = stack.substitution_values()
    assert stack.resolve(values["CommitLaneFunctionArn"]) == {"Fn::GetAtt": [ids["commit_lane"], "Arn"]}
    from statemachine.build import SUBSTITUTIONS

    (machine,) = synthesized.resources(STACK_CONTROL_PLANE, "AWS::StepFunctions::StateMachine").values()
    if "CommitLaneFunctionArn" in SUBSTITUTIONS:  # the ASL names it: the template passes it
        assert machine["Properties"]["DefinitionSubstitutions"]["CommitLaneFunctionArn"] == {
            "Fn::GetAtt": [ids["commit_lane"], "Arn"]
        }


def test_the_box_results_grant_acknowledgment_says_what_it_covers_and_what_it_does_not(synthesized):
    for stack in BOX_STACKS:
        reasons = {
            r["reason"]
            for res in synthesized.templates[stack]["Resources"].values()
            for r in res.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
            if r["id"].endswith("/results/*]")
        }
        (reason,) = reasons
        for covered in (
            "results/v1/",
            "results/v1/_proposed/",
            "results/v1/_seq/",
            "results/models/",
            "results/logs/",
            "results/v1/_commits/",
            "results/v1/_quarantine/",
        ):
            assert covered in reason, (stack, covered)
        assert "per run, lane and attempt" in reason and "denies" in reason


# --- C. alarms and destinations --------------------------------------------------------------------------------


def _alarms(synthesized) -> list[dict[str, Any]]:
    return [a["Properties"] for a in synthesized.resources(STACK_CONTROL_PLANE, "AWS::CloudWatch::Alarm").values()]


def _fires_on_first(alarm: dict[str, Any]) -> bool:
    return (
        alarm["Threshold"] == 0
        and alarm["ComparisonOperator"] == "GreaterThanThreshold"
        and alarm["EvaluationPeriods"] == 1
        and alarm["TreatMissingData"] == "notBreaching"
    )


def test_every_clean_up_function_pages_on_errors_and_throttles(synthesized):
    from infra.stacks.alarms import ALARMED_FUNCTIONS

    assert set(ALARMED_FUNCTIONS) == {
        "on_execution_status",
        "idle_reaper",
        "on_command_status",
        "finalize_run",
        "schedule_wave",
        "commit_lane",
    }
    ids = _function_ids(synthesized)
    found = {
        (a["MetricName"], a["Dimensions"][0]["Value"]["Ref"])
        for a in _alarms(synthesized)
        if a.get("Namespace") == "AWS/Lambda"
    }
    assert found == {(m, ids[name]) for name in ALARMED_FUNCTIONS for m in ("Errors", "Throttles")}
    assert all(
        _fires_on_first(a) and a["Statistic"] == "Sum"
        for a in _alarms(synthesized)
        if a.get("Namespace") == "AWS/Lambda"
    )


def test_runs_that_end_badly_and_boxes_left_after_a_bad_end_page(synthesized):
    from infra.stacks.alarms import BAD_END_METRICS

    states = {a["MetricName"]: a for a in _alarms(synthesized) if a.get("Namespace") == "AWS/States"}
    assert set(states) == {"ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted"}
    for alarm in states.values():
        assert alarm["Dimensions"] == [{"Name": "StateMachineArn", "Value": {"Fn::GetAtt": ["RunStateMachine", "Arn"]}}]
        assert _fires_on_first(alarm)
    # the metrics on_execution_status emits (EMF, the project's namespace, dimension service)
    source = (ROOT / "control_plane" / "handlers" / "on_execution_status.py").read_text()
    assert set(re.findall(r'emit_metric\("(\w+)"', source)) == set(BAD_END_METRICS)
    custom = {a["MetricName"]: a for a in _alarms(synthesized) if a.get("Namespace") == "NeuronPipelines"}
    assert set(custom) == set(BAD_END_METRICS) == {"InstancesStoppedAfterBadEnd", "InstancesTerminatedAfterBadEnd"}
    for alarm in custom.values():
        assert alarm["Dimensions"] == [{"Name": "service", "Value": "neuronpipe"}] and _fires_on_first(alarm)


def test_async_clean_up_failures_land_in_an_encrypted_queue_that_pages(synthesized):
    from infra.stacks.alarms import ASYNC_FUNCTIONS

    ids = _function_ids(synthesized)
    ((queue_lid, queue),) = synthesized.resources(STACK_CONTROL_PLANE, "AWS::SQS::Queue").items()
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    (queue_policy,) = synthesized.resources(STACK_CONTROL_PLANE, "AWS::SQS::QueuePolicy").values()
    statements = queue_policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        st["Effect"] == "Deny" and st["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for st in statements
    )  # enforceSSL
    queue_arn = {"Fn::GetAtt": [queue_lid, "Arn"]}
    configs = synthesized.resources(STACK_CONTROL_PLANE, "AWS::Lambda::EventInvokeConfig").values()
    assert {
        c["Properties"]["FunctionName"]["Ref"]
        for c in configs
        if c["Properties"]["DestinationConfig"]["OnFailure"]["Destination"] == queue_arn
    } == {ids[n] for n in ASYNC_FUNCTIONS}
    targets = [
        t
        for r in synthesized.resources(STACK_CONTROL_PLANE, "AWS::Events::Rule").values()
        for t in r["Properties"]["Targets"]
    ]
    dead_lettered = {t["Arn"]["Fn::GetAtt"][0] for t in targets if t.get("DeadLetterConfig") == {"Arn": queue_arn}}
    assert dead_lettered == {ids[n] for n in ASYNC_FUNCTIONS}
    (alarm,) = [a for a in _alarms(synthesized) if a.get("Namespace") == "AWS/SQS"]
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible" and _fires_on_first(alarm)
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_lid, "QueueName"]}}]


def test_every_alarm_goes_to_the_alert_topic_and_the_budget_email_subscribes_to_it(synthesized, redeploy):
    base = synthesized.templates[STACK_BASE]["Resources"]
    (topic_lid,) = [k for k, r in base.items() if r["Type"] == "AWS::SNS::Topic"]
    alarms = _alarms(synthesized)
    assert len(alarms) == 6 * 2 + 3 + 2 + 1
    for alarm in alarms:
        (action,) = alarm["AlarmActions"]
        assert "Fn::ImportValue" in action and topic_lid in json.dumps(action), alarm
    (budget,) = [r for r in base.values() if r["Type"] == "AWS::Budgets::Budget"]
    # the budget notifies the same topic
    for n in budget["Properties"]["NotificationsWithSubscribers"]:
        assert n["Subscribers"] == [{"SubscriptionType": "SNS", "Address": {"Ref": topic_lid}}]
    res = redeploy[STACK_BASE]["Resources"]
    (subscription,) = [r["Properties"] for r in res.values() if r["Type"] == "AWS::SNS::Subscription"]
    assert subscription["Protocol"] == "email" and subscription["Endpoint"] == "ops@example.com"
    assert not [r for r in base.values() if r["Type"] == "AWS::SNS::Subscription"]  # no address: no subscriber


# --- D. the budget counts this project -------------------------------------------------------------------------


def test_the_budget_counts_only_what_carries_the_project_tag_and_the_runbook_says_to_activate_it(synthesized):
    (budget,) = synthesized.resources(STACK_BASE, "AWS::Budgets::Budget").values()
    project = synthesized.settings.project
    assert budget["Properties"]["Budget"]["CostFilters"] == {"TagKeyValue": [f"user:{PROJECT_TAG_KEY}${project}"]}
    # the tag the budget filters on is the one every resource carries
    (vpc,) = synthesized.resources(STACK_BASE, "AWS::EC2::VPC").values()
    assert {"Key": PROJECT_TAG_KEY, "Value": project} in vpc["Properties"]["Tags"]
    runbook = (ROOT / "docs" / "guides" / "deploy-and-operate.md").read_text()
    assert "cost allocation tag" in runbook.lower() and f"`{PROJECT_TAG_KEY}`" in runbook


# --- E. smaller items ------------------------------------------------------------------------------------------


def test_the_fleet_launches_only_images_of_amazon_or_a_configured_owner(synthesized):
    from infra.config import DeploymentSettings, SettingsError

    image = _statements(synthesized, STACK_CONTROL_PLANE, "StateMachinePolicy")["FleetLaunchImage"]
    assert image["Condition"] == {"StringEquals": {"ec2:Owner": ["amazon"]}}
    assert DeploymentSettings(ami_owner_accounts=("123456789012",)).image_owners == ["amazon", "123456789012"]
    with pytest.raises(SettingsError, match="ami_owner_accounts: .*12-digit"):
        DeploymentSettings.from_context({"ami_owner_accounts": ["12345"]})


def test_an_unpriced_type_gets_no_launch_template(synthesized):
    from infra.config import DeploymentSettings
    from infra.stacks.fleet import fleet_specs
    from pipeline.instance_types import CATALOGUE

    region = synthesized.settings.region
    names = {
        t["Properties"]["LaunchTemplateData"]["InstanceType"]
        for t in synthesized.resources(STACK_FLEET, "AWS::EC2::LaunchTemplate").values()
    }
    unpriced = {t.name for t in CATALOGUE.values() if region not in t.prices_usd_per_hour}
    assert "trn2.48xlarge" in unpriced and not names & unpriced
    assert names == set(CATALOGUE) - unpriced
    elsewhere = DeploymentSettings(
        region="eu-west-1", availability_zones=("eu-west-1a",), trainium_az="eu-west-1a", inferentia_az="eu-west-1a"
    )
    assert fleet_specs(elsewhere) == []  # nothing is priced there


def test_the_s3_endpoint_admits_only_the_project_buckets_and_the_aws_owned_ones_the_agent_reads(synthesized):
    from infra.stacks.base import AWS_OWNED_BUCKETS

    (endpoint,) = synthesized.resources(STACK_BASE, "AWS::EC2::VPCEndpoint").values()
    statements = {st["Sid"]: st for st in endpoint["Properties"]["PolicyDocument"]["Statement"]}
    assert set(statements) == {"ProjectBuckets", "AwsOwnedBuckets"}
    own = [flat(r) for r in statements["ProjectBuckets"]["Resource"]]
    assert len(own) == 4 and any("Results" in r or "-results-" in r for r in own)
    assert any("cdk-hnb659fds-assets" in r for r in own)  # the harness asset's bucket
    aws_owned = statements["AwsOwnedBuckets"]
    assert aws_owned["Action"] == "s3:GetObject"
    region = synthesized.settings.region
    assert sorted(flat(r).split(":::", 1)[1] for r in aws_owned["Resource"]) == sorted(
        f"{b.format(region=region)}/*" for b in AWS_OWNED_BUCKETS
    )
    assert all(st["Effect"] == "Allow" and st["Principal"] == {"AWS": "*"} for st in statements.values())


def test_boxes_let_out_https_only(synthesized):
    base = synthesized.templates[STACK_BASE]["Resources"]
    (sg,) = [r for k, r in base.items() if k.startswith("BoxSecurityGroup")]
    assert sg["Properties"]["SecurityGroupEgress"] == [
        {
            "CidrIp": "0.0.0.0/0",
            "Description": "HTTPS out: AWS APIs, S3, PyPI, the Hugging Face Hub",
            "FromPort": 443,
            "IpProtocol": "tcp",
            "ToPort": 443,
        }
    ]
    assert not [r for r in base.values() if r["Type"] == "AWS::EC2::SecurityGroupEgress"]


def test_the_adapter_rule_matches_every_archive_plan_run_accepts(synthesized):
    from control_plane.handlers.plan_run import ADAPTER_SUFFIXES

    (rule,) = [
        r
        for r in synthesized.resources(STACK_CONTROL_PLANE, "AWS::Events::Rule").values()
        if r["Properties"].get("EventPattern", {}).get("source") == ["aws.s3"]
    ]
    keys = rule["Properties"]["EventPattern"]["detail"]["object"]["key"]
    assert (
        keys
        == [{"wildcard": f"adapters/*{s}"} for s in ADAPTER_SUFFIXES]
        == [{"wildcard": "adapters/*.tar.gz"}, {"wildcard": "adapters/*.tgz"}]
    )


def test_the_imported_bucket_keeps_tls_only_and_tls_1_2(redeploy):
    statements = _bucket_statements(redeploy[STACK_BASE])
    assert statements["DenyInsecureTransport"]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    tls = statements["DenyOutdatedTls"]
    assert tls["Effect"] == "Deny" and tls["Action"] == "s3:*"
    assert tls["Condition"] == {"NumericLessThan": {"s3:TlsVersion": 1.2}}
    assert len(as_list(tls["Resource"])) == 2  # the bucket and its objects


def test_finalize_lists_results_only(synthesized, decide):
    (listing,) = [
        st
        for st in _statements(synthesized, STACK_CONTROL_PLANE, "FinalizeRunRole").values()
        if "s3:ListBucket" in as_list(st["Action"])
    ]
    assert listing["Condition"] == {"StringLikeIfExists": {"s3:prefix": ["results", "results/*"]}}
    assert decide("lambda:finalize_run", "s3:ListBucket", None, "results/v1/").allowed
    assert not decide("lambda:finalize_run", "s3:ListBucket", None, "control/").allowed


def test_plan_run_may_call_the_default_quota_its_fallback_reads(synthesized):
    source = (ROOT / "control_plane" / "quotas.py").read_text()
    assert "get_aws_default_service_quota" in source and "get_service_quota" in source
    plan = _statements(synthesized, STACK_CONTROL_PLANE, "PlanRunRole")
    actions = {a for st in plan.values() for a in as_list(st["Action"])}
    assert {"servicequotas:GetServiceQuota", "servicequotas:GetAWSDefaultServiceQuota"} <= actions
    assert plan["FleetDefaultQuotas"]["Resource"] == "*"


# --- every acknowledgment's reason is true ---------------------------------------------------------------------

BUCKET_ROOTS = ("results/", "control/", "reports/", "adapters/", "neuron-cache/", "athena-results/")
NAMED_PREFIX = re.compile(r"(?<![\w/.-])((?:" + "|".join(map(re.escape, BUCKET_ROOTS)) + r")[^\s,;:()]*)")
S3_FINDING = re.compile(r"\[Resource::arn:<AWS::Partition>:s3:::[^/\]]+/([^\]]+)\]$")


def _acknowledgments(synthesized) -> dict[tuple[str, str, str], list[str]]:
    """(stack, logical id, reason) -> the findings acknowledged with that reason."""
    out: dict[tuple[str, str, str], list[str]] = {}
    for stack in STACK_NAMES:
        for lid, res in synthesized.templates[stack]["Resources"].items():
            for rule in res.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", []):
                out.setdefault((stack, lid, rule["reason"]), []).append(rule["id"])
    return out


def _literal_prefix(token: str) -> str:
    """The literal part of a prefix a reason names: up to its last '/' before a placeholder or wildcard."""
    literal = re.split(r"[<*{]", token, maxsplit=1)[0]
    return literal[: literal.rfind("/") + 1]


def test_every_acknowledgment_names_exactly_the_prefixes_its_grant_covers(synthesized):
    """Each acknowledged bucket pattern's prefix is named in its reason, and each bucket prefix the reason names lies
    under one of the acknowledged patterns (a reason naming results/fleet/ for a grant on control/* fails)."""
    checked = 0
    for (stack, lid, reason), findings in _acknowledgments(synthesized).items():
        patterns = [m.group(1) for f in findings if (m := S3_FINDING.search(f))]
        if not patterns:
            continue
        checked += 1
        named = {_literal_prefix(t) for t in NAMED_PREFIX.findall(reason)} - {""}
        for pattern in patterns:
            literal = pattern.removesuffix("*")  # a pattern with a wildcard inside: the reason names its literal part
            literal = _literal_prefix(literal) if re.search(r"[<*{]", literal) else literal
            assert literal in named, (stack, lid, pattern, reason)
        for prefix in named:
            assert any(fnmatchcase(prefix + "x", p) for p in patterns), (stack, lid, prefix, patterns, reason)
    assert checked >= 8


def test_every_resource_star_acknowledgment_names_what_its_role_holds_on_star(synthesized):
    """A role's Resource::* finding is acknowledged once (cdk-nag keeps the first reason): that reason names every
    action of the role granted on '*'."""
    for stack in STACK_NAMES:
        resources = synthesized.templates[stack]["Resources"]
        for lid, res in resources.items():
            if res["Type"] != "AWS::IAM::Policy":
                continue
            star = {
                a
                for st in res["Properties"]["PolicyDocument"]["Statement"]
                if st["Effect"] == "Allow" and st["Resource"] == "*"
                for a in as_list(st["Action"])
            }
            if not star:
                continue
            (reason,) = [
                r["reason"]
                for r in res.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
                if r["id"] == "AwsSolutions-IAM5[Resource::*]"
            ]
            for action in star:
                service, name = action.split(":", 1)
                words = {
                    "xray": "X-Ray",
                    "states": "SendTask",
                    "logs": "Log delivery",
                    "ssm": name,
                    "ssmmessages": "SSM agent",
                    "ec2messages": "SSM agent",
                }
                needle = words.get(service, name)
                if service == "ssm" and name in ("ListCommands", "GetCommandInvocation"):
                    needle = "ListCommands"
                elif service == "ssm":
                    needle = "SSM agent"
                assert needle in reason, (stack, lid, action, reason)
