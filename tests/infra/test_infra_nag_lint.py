"""cdk-nag AwsSolutions: no unacknowledged finding, every acknowledgment justified; cfn-lint clean."""

from __future__ import annotations

from infra.config import STACK_NAMES
from infra.stacks.nag import MIN_REASON_CHARS


def test_no_unacknowledged_cdk_nag_finding(synthesized):
    assert synthesized.error is None, str(synthesized.error)
    violations = [
        (v["ruleName"], [r["constructPath"] for r in v["violatingResources"]])
        for p in (synthesized.report or {}).get("pluginReports", [])
        for v in p.get("violations", [])
        if v.get("severity") == "error"
    ]
    assert violations == []


def test_every_acknowledgment_carries_a_reason(synthesized):
    seen = 0
    for stack in STACK_NAMES:
        for logical_id, res in synthesized.templates[stack]["Resources"].items():
            for rule in res.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", []):
                seen += 1
                assert len(rule["reason"].strip()) >= MIN_REASON_CHARS or rule["id"].startswith(
                    "CloudFormation-Validate::"
                ), (stack, logical_id, rule)
                assert rule["reason"].strip()
    assert seen > 0


def test_cfn_lint_is_clean(synthesized):
    from cfnlint.api import ManualArgs, lint_file

    region = synthesized.settings.region
    problems = {}
    for stack in STACK_NAMES:
        matches = lint_file(synthesized.outdir / f"{stack}.template.json", config=ManualArgs(regions=[region]))
        if matches:
            problems[stack] = [str(m) for m in matches]
    assert problems == {}


def test_endpoints_mode_keeps_inbound_to_https_from_the_boxes(tmp_path, synth_variant):
    """ssm_connectivity=nat_and_endpoints: the one inbound rule in the account is 443 to the endpoint ENIs
    from the boxes' security group. Synthesized separately (Base stack checked), nag and cfn-lint clean."""
    from cfnlint.api import ManualArgs, lint_file

    from infra.config import STACK_BASE

    template = synth_variant(tmp_path, ssm_connectivity="nat_and_endpoints")[STACK_BASE]
    res = template["Resources"]
    assert len([r for r in res.values() if r["Type"] == "AWS::EC2::NatGateway"]) == 1
    endpoints = [r for r in res.values() if r["Type"] == "AWS::EC2::VPCEndpoint"]
    assert len(endpoints) == 7  # S3 gateway + 6 interface endpoints
    (ingress,) = [r["Properties"] for r in res.values() if r["Type"] == "AWS::EC2::SecurityGroupIngress"]
    assert (ingress["IpProtocol"], ingress["FromPort"], ingress["ToPort"]) == ("tcp", 443, 443)
    assert "SourceSecurityGroupId" in ingress and "CidrIp" not in ingress
    box_sg = next(r for k, r in res.items() if k.startswith("BoxSecurityGroup"))
    assert "SecurityGroupIngress" not in box_sg["Properties"]
    assert lint_file(tmp_path / f"{STACK_BASE}.template.json", config=ManualArgs(regions=["us-west-2"])) == []
