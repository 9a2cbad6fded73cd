"""The Lambdas' grants: the lease table and who may touch it, on_execution_status, and the narrowed
Lambda grants; plus a second synth with the re-deploy / dataset / AMI-pin settings."""

from __future__ import annotations

import json
from typing import Any

from infra.config import PROJECT_TAG_KEY, STACK_BASE, STACK_CONTROL_PLANE, STACK_INFERENTIA, STACK_TRAINIUM
from tests.support.cfn import as_list


def _role_statements(synthesized, prefix: str) -> list[dict[str, Any]]:
    policies = synthesized.resources(STACK_CONTROL_PLANE, "AWS::IAM::Policy")
    return [
        st for k, p in policies.items() if k.startswith(prefix) for st in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    return {a for st in statements for a in as_list(st["Action"])}


def _table_arn(synthesized) -> dict[str, Any]:
    (table_id,) = synthesized.resources(STACK_CONTROL_PLANE, "AWS::DynamoDB::Table")
    return {"Fn::GetAtt": [table_id, "Arn"]}


def test_lease_table_as_agreed(synthesized):
    """INTERFACES B: <state machine>-leases, key instance_id (S), TTL expires_at, on demand, PITR."""
    (table,) = synthesized.resources(STACK_CONTROL_PLANE, "AWS::DynamoDB::Table").values()
    p = table["Properties"]
    assert p["TableName"] == f"{synthesized.settings.state_machine_name}-leases" == synthesized.settings.lease_table
    assert p["KeySchema"] == [{"AttributeName": "instance_id", "KeyType": "HASH"}]
    assert p["AttributeDefinitions"] == [{"AttributeName": "instance_id", "AttributeType": "S"}]
    assert p["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert p["BillingMode"] == "PAY_PER_REQUEST"
    assert p["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["DeletionPolicy"] == "Delete"


def test_who_may_touch_the_leases(synthesized):
    table = _table_arn(synthesized)

    def lease_actions(prefix: str) -> set[str]:
        return {
            a for st in _role_statements(synthesized, prefix) if st["Resource"] == table for a in as_list(st["Action"])
        }

    # the ASL releases after stopping, and marks the lease of a box whose stop failed
    assert lease_actions("StateMachinePolicy") == {"dynamodb:DeleteItem", "dynamodb:UpdateItem"}
    assert lease_actions("PlanRunRole") == {"dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:DeleteItem"}
    assert lease_actions("PlanExecutionRole") == {"dynamodb:PutItem", "dynamodb:GetItem"}  # it releases nothing
    assert lease_actions("OnExecutionStatusRole") == {"dynamodb:GetItem", "dynamodb:DeleteItem"}
    for prefix in ("FinalizeRunRole", "OnCommandStatusRole", "IdleReaperRole", "ScheduleWaveRole"):
        assert not lease_actions(prefix), prefix
    # nothing anywhere holds a DynamoDB action on another resource
    for prefix in ("StateMachinePolicy", "PlanRunRole", "PlanExecutionRole", "OnExecutionStatusRole"):
        for st in _role_statements(synthesized, prefix):
            if any(a.startswith("dynamodb:") for a in as_list(st["Action"])):
                assert st["Resource"] == table, st


def test_on_execution_status_stops_only_project_boxes(synthesized):
    statements = _role_statements(synthesized, "OnExecutionStatusRole")
    assert _actions(statements) == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
        "ec2:StopInstances",
        "states:DescribeExecution",
        # what an execution started with a run request planned (its history)
        "states:GetExecutionHistory",
        "dynamodb:GetItem",
        "dynamodb:DeleteItem",
        # the ended run's ephemeral boxes (tests/infra/test_infra_fleet.py)
        "ec2:DescribeInstances",
        "ec2:TerminateInstances",
        # its on-failure destination (tests/infra/test_infra_security_review.py)
        "sqs:SendMessage",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
    }
    (stop,) = [st for st in statements if "ec2:StopInstances" in as_list(st["Action"])]
    assert stop["Condition"] == {"StringEquals": {f"aws:ResourceTag/{PROJECT_TAG_KEY}": synthesized.settings.project}}
    (describe,) = [st for st in statements if "states:DescribeExecution" in as_list(st["Action"])]
    assert f":execution:{synthesized.settings.state_machine_name}:*" in json.dumps(describe["Resource"])


def test_narrowed_lambda_grants(synthesized):
    """The over-broad grants: each one gone, or scoped to what the code calls."""
    finalize = _role_statements(synthesized, "FinalizeRunRole")
    for st in finalize:
        resources = json.dumps(st["Resource"])
        if "s3:PutObject" in as_list(st["Action"]) and st.get("Sid") != "CommitJudgement":
            assert "/reports/*" in resources and "/results/" not in resources, st  # writes reports only
        if "s3:PutObject" in as_list(st["Action"]) and st.get("Sid") == "CommitJudgement":
            # and the run's judgement: the reserved lane's tables and marker, nothing else under results/
            keys = [json.dumps(r).split("/results/", 1)[1].rstrip('"]}') for r in as_list(st["Resource"])]
            assert keys == ["v1/*/run_id=*/lane=baseline/*", "v1/_commits/run_id=*/lane=baseline/*"], st
        if "s3:GetObject" in as_list(st["Action"]) and st.get("Sid") != "ReadHistoryControl":
            assert "/results/*" in resources and "/reports/" not in resources, st  # reads results only
    assert {"s3:GetObject", "s3:PutObject"} <= _actions(finalize)
    assert "ssm:ListCommandInvocations" not in _actions(_role_statements(synthesized, "OnCommandStatusRole"))
    assert {"ssm:ListCommands", "ssm:GetCommandInvocation"} <= _actions(
        _role_statements(synthesized, "OnCommandStatusRole")
    )
    plan = _role_statements(synthesized, "PlanRunRole")
    assert "ec2:DescribeInstances" not in _actions(plan)  # both instance ids come from the environment
    assert {"states:StartExecution", "states:DescribeExecution"} <= _actions(plan)
    (listing,) = [st for st in plan if "s3:ListBucket" in as_list(st["Action"])]
    assert listing["Condition"] == {"StringLikeIfExists": {"s3:prefix": ["results", "results/*"]}}


def test_finalize_may_write_every_report_file_it_uploads_the_page_included(synthesized):
    """finalize_run uploads <reports>/<run id>/{REPORT.md, REPORT.html, comparison.json}: its PutObject grant matches
    each key, and no append-only rule of the bucket (a PUT without If-None-Match denied) covers them."""
    from fnmatch import fnmatch

    from control_plane.handlers.finalize_run import REQUIRED_FILES
    from infra.config import APPEND_ONLY_KEY_PATTERNS, REPORTS_PREFIX

    (put,) = [
        st
        for st in _role_statements(synthesized, "FinalizeRunRole")
        if "s3:PutObject" in as_list(st["Action"]) and st.get("Sid") != "CommitJudgement"
    ]
    patterns = [json.dumps(r).split("/", 1)[1].rstrip('"]}') for r in as_list(put["Resource"])]
    assert "REPORT.html" in REQUIRED_FILES
    for name in REQUIRED_FILES:
        key = f"{REPORTS_PREFIX}run-1/{name}"
        assert any(fnmatch(key, p) for p in patterns), (key, patterns)
        assert not any(fnmatch(key, p) for p in APPEND_ONLY_KEY_PATTERNS), key


def test_schedule_wave_reads_and_commits_results_only_and_the_state_machine_may_invoke_it(synthesized):
    """The scheduler between waves reads a run's results and commits skipped attempts under results/, and reads and
    writes a matrix's control data under control/: nothing else."""
    statements = _role_statements(synthesized, "ScheduleWaveRole")
    assert _actions(statements) == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
        "s3:GetObject",
        "s3:PutObject",
        "s3:ListBucket",
    }
    for st in statements:
        actions = as_list(st["Action"])
        if "s3:PutObject" in actions or "s3:GetObject" in actions:
            resource = json.dumps(st["Resource"])
            assert ("/results/*" in resource or "/control/*" in resource) and "/reports/" not in resource, st
        if "s3:ListBucket" in actions:
            assert st["Condition"] == {"StringLikeIfExists": {"s3:prefix": ["results", "results/*"]}}
    fns = synthesized.resources(STACK_CONTROL_PLANE, "AWS::Lambda::Function")
    scheduler = next(k for k, f in fns.items() if f["Properties"]["Handler"].endswith("schedule_wave.handler"))
    invoke = [
        st
        for st in _role_statements(synthesized, "StateMachinePolicy")
        if "lambda:InvokeFunction" in as_list(st["Action"])
    ]
    assert {"Fn::GetAtt": [scheduler, "Arn"]} in [r for st in invoke for r in as_list(st["Resource"])]


def test_plan_execution_plans_for_the_execution_that_invokes_it_and_starts_nothing(synthesized):
    """The first task of an execution started with a run request: the planning grants of plan_run (commit markers
    read under results/, leases taken, the EC2 quotas, the plan written and read back as control data) and nothing
    of Step Functions or EC2: it starts no execution and touches no box. The state machine may invoke it."""
    statements = _role_statements(synthesized, "PlanExecutionRole")
    assert _actions(statements) == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
        "s3:GetObject",
        "s3:ListBucket",
        "s3:PutObject",
        "dynamodb:PutItem",
        "dynamodb:GetItem",
        "servicequotas:GetServiceQuota",
        "servicequotas:GetAWSDefaultServiceQuota",
    }
    for st in statements:
        actions, resource = as_list(st["Action"]), json.dumps(st["Resource"])
        if "s3:PutObject" in actions:
            assert "/control/*" in resource and "/results/" not in resource, st  # control data only
        if "s3:GetObject" in actions:
            assert "/results/*" in resource or "/control/*" in resource, st
        if "s3:ListBucket" in actions:
            assert st["Condition"] == {"StringLikeIfExists": {"s3:prefix": ["results", "results/*"]}}
    fns = synthesized.resources(STACK_CONTROL_PLANE, "AWS::Lambda::Function")
    planner = next(k for k, f in fns.items() if f["Properties"]["Handler"].endswith("plan_execution.handler"))
    invoke = [
        st
        for st in _role_statements(synthesized, "StateMachinePolicy")
        if "lambda:InvokeFunction" in as_list(st["Action"])
    ]
    assert {"Fn::GetAtt": [planner, "Arn"]} in [r for st in invoke for r in as_list(st["Resource"])]


def test_the_clean_up_functions_may_read_what_an_execution_planned(synthesized):
    """on_execution_status and the idle reaper find the boxes of an execution started with a run request in its
    history (the PlanRequest state's answer): GetExecutionHistory on the machine's executions only."""
    for prefix in ("OnExecutionStatusRole", "IdleReaperRole"):
        (history,) = [
            st for st in _role_statements(synthesized, prefix) if "states:GetExecutionHistory" in as_list(st["Action"])
        ]
        assert f":execution:{synthesized.settings.state_machine_name}:*" in json.dumps(history["Resource"]), prefix


def test_redeploy_imports_the_retained_bucket(synthesized, redeploy):
    fresh = synthesized.templates[STACK_BASE]["Resources"]
    (bucket,) = [r for r in fresh.values() if r["Type"] == "AWS::S3::Bucket" and "BucketName" in r["Properties"]]
    assert bucket["DeletionPolicy"] == "Retain"  # why a second deploy would collide with its name
    res = redeploy[STACK_BASE]["Resources"]
    named = [r for r in res.values() if r["Type"] == "AWS::S3::Bucket" and "BucketName" in r["Properties"]]
    assert named == []  # imported by name, not created
    policies = [r["Properties"] for r in res.values() if r["Type"] == "AWS::S3::BucketPolicy"]
    results_policy = [p for p in policies if "neuron-pipelines-results-" in json.dumps(p["Bucket"])]
    assert len(results_policy) == 1  # TLS-only (and append-only) is put back on the imported bucket
    deny, tls, append_only, box_deny = results_policy[0]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert tls["Sid"] == "DenyOutdatedTls" and tls["Effect"] == "Deny"
    assert append_only["Sid"] == "DenyOverwriteOfResults" and append_only["Effect"] == "Deny"
    assert box_deny["Sid"] == "DenyBoxWritesOfControlPlaneKeys" and box_deny["Effect"] == "Deny"
    # everything that names the bucket still does, by the same fixed name
    outputs = json.dumps(redeploy[STACK_BASE]["Outputs"])
    assert "neuron-pipelines-results-" in outputs


def test_dataset_outside_results_is_readable_when_configured(redeploy):
    for stack in (STACK_TRAINIUM, STACK_INFERENTIA):
        (policy,) = [r for r in redeploy[stack]["Resources"].values() if r["Type"] == "AWS::IAM::Policy"]
        by_sid = {st["Sid"]: st for st in policy["Properties"]["PolicyDocument"]["Statement"]}
        read, listing = by_sid["DatasetRead"], by_sid["DatasetList"]
        assert read["Action"] == "s3:GetObject"
        assert json.dumps(read["Resource"]).endswith(':s3:::team-datasets/sft/alpaca/*"]]}')
        assert listing["Action"] == "s3:ListBucket"
        assert json.dumps(listing["Resource"]).endswith(':s3:::team-datasets"]]}')
        assert listing["Condition"] == {"StringLike": {"s3:prefix": ["sft/alpaca/", "sft/alpaca/*"]}}


def test_explicit_ami_pins_override_the_parameters(redeploy):
    for stack, ami in ((STACK_TRAINIUM, "ami-0123456789abcdef0"), (STACK_INFERENTIA, "ami-0fedcba9876543210")):
        (instance,) = [r for r in redeploy[stack]["Resources"].values() if r["Type"] == "AWS::EC2::Instance"]
        assert instance["Properties"]["ImageId"] == ami
        assert "AmiParameter" not in redeploy[stack].get("Parameters", {})


def test_redeploy_templates_are_cfn_lint_clean(redeploy, tmp_path):
    from cfnlint.api import ManualArgs, lint_file

    problems = {}
    for stack, template in redeploy.items():
        path = tmp_path / f"{stack}.template.json"
        path.write_text(json.dumps(template))
        matches = lint_file(path, config=ManualArgs(regions=["us-west-2"]))
        if matches:
            problems[stack] = [str(m) for m in matches]
    assert problems == {}


def test_cost_ceiling_setting_reaches_every_lambda(redeploy):
    """INTERFACES D: cdk.json max_cost_usd_ceiling -> NEURONPIPE_MAX_COST_USD_CEILING."""
    import json as _json
    from pathlib import Path

    cdk_json = _json.loads((Path(__file__).resolve().parents[2] / "cdk.json").read_text())
    assert cdk_json["context"]["neuronpipe"]["max_cost_usd_ceiling"] == 50
    fns = [r for r in redeploy[STACK_CONTROL_PLANE]["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    from infra.stacks.control import HANDLERS

    assert len(fns) == len(HANDLERS) == 8
    assert {f["Properties"]["Environment"]["Variables"]["NEURONPIPE_MAX_COST_USD_CEILING"] for f in fns} == {"12.5"}
