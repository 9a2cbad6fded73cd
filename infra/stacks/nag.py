"""cdk-nag acknowledgments, each with its reason next to the construct it covers.

cdk-nag 3 uses CDK's ``Validations``: a finding is acknowledged per rule, or per finding for
rules that report several (``AwsSolutions-IAM5[Resource::*]``). Reasons must say why the finding
is acceptable here; tests/infra check that each is a real sentence, not a placeholder.
"""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import Acknowledgment, CfnResource, Validations
from constructs import IConstruct

MIN_REASON_CHARS = 40


def acknowledge(construct: IConstruct, rule: str, reason: str, findings: Iterable[str] = ()) -> None:
    """Acknowledge AwsSolutions-``rule`` on ``construct`` (and below), for each finding if given."""
    if len(reason.strip()) < MIN_REASON_CHARS:
        raise ValueError(f"acknowledgment of {rule} needs a real reason (>= {MIN_REASON_CHARS} chars): {reason!r}")
    ids = [f"AwsSolutions-{rule}[{f}]" for f in findings] or [f"AwsSolutions-{rule}"]
    Validations.of(construct).acknowledge(*[Acknowledgment(id=i, reason=reason) for i in ids])


def cfn_lint_ignore(resource: IConstruct, reasons: dict[str, str]) -> None:
    """Tell cfn-lint (standalone, and CDK's validate plugin) that these checks are intended here.

    ``reasons`` maps a cfn-lint rule id to why it does not apply; the reasons stay in this code.
    """
    cfn = resource if isinstance(resource, CfnResource) else resource.node.default_child
    if not isinstance(cfn, CfnResource):
        raise TypeError(f"{resource.node.path} has no CloudFormation resource to annotate")
    existing = (cfn.get_metadata("cfn-lint") or {}).get("config", {}).get("ignore_checks", [])
    cfn.add_metadata("cfn-lint", {"config": {"ignore_checks": sorted(set(existing) | set(reasons))}})
    for rule, reason in reasons.items():
        Validations.of(resource).acknowledge(Acknowledgment(id=f"CloudFormation-Validate::{rule}", reason=reason))


PINNED_AZ = {
    "W3010": "availability zones are pinned in cdk.json: synth is offline (no lookups) and trn1/inf2 "
    "are offered only in some AZs"
}
PINNED_AMI = {
    "W9010": "the AMI id is pinned on purpose (cdk.json *_ami_id, or the inf2 vLLM 0.16 pin in "
    "infra/config.py): the recorded stock DLAMI (rule 2)"
}
RESOLVE_SSM_AMI = {
    "E1152": "the ImageId is EC2's launch-time form resolve:ssm:<public DLAMI parameter> (EC2 "
    "user guide, launch an instance with a Systems Manager parameter; the Neuron DLAMI guide "
    "launches with it): not an ami- id, on purpose, so no deploy re-resolves it"
}
CDK_DEPENDS_ON = {
    "W3005": "CDK adds this DependsOn so the role's policy exists before the function runs; "
    "the GetAtt alone would not order the policy"
}
