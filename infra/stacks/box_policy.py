"""What a box's role may do: one function for the pinned boxes (NeuronPipelinesTrainium / ...Inferentia) and the
fleet's ephemeral boxes (NeuronPipelinesFleet), so the grants cannot drift apart.

:func:`box_policy` builds the ``iam.Policy`` (its statements and their cdk-nag acknowledgments): the SSM agent's
own APIs, the results prefix, the shared compile cache ``neuron-cache/``, the adapters (read, when asked), the task
callbacks, the harness zip and its one parameter, the HF token secret, the SSM command log group, the dataset when
one is configured, and, for a pinned box only, the bootstrap tag on its own instance (an ephemeral box's first boot
never tags itself: the fleet's boxes are found by their launch tags).

A box is not trusted with what the control plane decides: explicit Deny statements (:data:`BOX_DENIES`) keep it from
the control data (``control/``) and from the commit and quarantine markers (a box proposes its commit under
``results/v1/_proposed/``; ``commit_lane`` commits). :func:`mark_box_role` tags the role so the results bucket's
policy denies the same whatever the role is granted.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack, Tags
from aws_cdk import aws_iam as iam
from constructs import Construct

from control_plane.lean import TAG_BOOTSTRAP as BOOTSTRAP_TAG
from infra.config import (
    ADAPTERS_PREFIX,
    BOX_PRINCIPAL,
    COMMIT_KEY_PATTERNS,
    CONTROL_KEY_PATTERN,
    NEURON_CACHE_PREFIX,
    PRINCIPAL_TAG_KEY,
    PROJECT_TAG_KEY,
    RESULTS_PREFIX,
    ROLE_TAG_KEY,
    DeploymentSettings,
)
from infra.stacks.base import BaseStack, nag_results_arn, results_arn
from infra.stacks.nag import acknowledge

# What the SSM agent calls: AWS's AmazonSSMManagedInstanceCore minus ssm:GetParameter(s) on '*' (the
# box reads one parameter, granted by its ARN below) and ssm:PutConfigurePackageResult (Distributor
# packages, unused). Everything else of the managed policy is kept, action for action.
SSM_AGENT_ACTIONS = (
    "ssm:DescribeAssociation",
    "ssm:GetDeployablePatchSnapshotForInstance",
    "ssm:GetDocument",
    "ssm:DescribeDocument",
    "ssm:GetManifest",
    "ssm:ListAssociations",
    "ssm:ListInstanceAssociations",
    "ssm:PutInventory",
    "ssm:PutComplianceItems",
    "ssm:UpdateAssociationStatus",
    "ssm:UpdateInstanceAssociationStatus",
    "ssm:UpdateInstanceInformation",
)
SSM_MESSAGES_ACTIONS = (
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
)
EC2_MESSAGES_ACTIONS = (
    "ec2messages:AcknowledgeMessage",
    "ec2messages:DeleteMessage",
    "ec2messages:FailMessage",
    "ec2messages:GetEndpoint",
    "ec2messages:GetMessages",
    "ec2messages:SendReply",
)
TASK_CALLBACK_ACTIONS = ("states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat")
# Why the task callbacks are granted on Resource '*'. The Service Authorization
# Reference, "Actions, resources, and condition keys for AWS Step Functions"
# (docs.aws.amazon.com/service-authorization/latest/reference/list_awsstepfunctions.html), lists NO
# resource type and no condition key for states:SendTaskSuccess / SendTaskFailure / SendTaskHeartbeat:
# such actions must be granted on "*" (the IAM policy simulator says the same: "This action does not
# support resource-level permissions", aws/aws-cdk PR #8486). In practice AWS has been seen to name the
# state machine ARN in the AccessDenied of a callback (NOAA-OWP/hydrovis issue #837), so a grant on the
# machine's ARN alone rests on undocumented behaviour; '*' is honoured either way. What limits the
# grant is the task token: a box can only complete tasks whose unguessable token it was sent.
TASK_CALLBACK_RESOURCES = ("*",)
TASK_CALLBACK_REASON = (
    "states:SendTaskSuccess/Failure/Heartbeat support no resource type and no condition key (Service "
    "Authorization Reference for AWS Step Functions), so they cannot be scoped to the state machine; the "
    "per-task token the caller must hold is what limits them."
)


# What a box may never do, whatever else it is granted: (sid, actions, key patterns of the results bucket).
BOX_DENIES = (
    ("DenyControlData", ("s3:PutObject", "s3:DeleteObject"), (CONTROL_KEY_PATTERN,)),
    ("DenyCommitMarkers", ("s3:PutObject",), COMMIT_KEY_PATTERNS),
)


def mark_box_role(role: iam.IRole) -> None:
    """Tag a box role ``neuronpipe:principal=box``: the results bucket's policy denies that principal tag the keys
    only the control plane writes (:func:`infra.stacks.base.box_write_deny_statement`)."""
    Tags.of(role).add(PRINCIPAL_TAG_KEY, BOX_PRINCIPAL)


def box_policy(
    scope: Construct,
    construct_id: str,
    *,
    settings: DeploymentSettings,
    base: BaseStack,
    adapters: bool,
    bootstrap_tag_role: str | None,
) -> iam.Policy:
    """The box policy (not attached: the caller attaches it to its role), acknowledged for cdk-nag.

    ``adapters``: the box reads adapters under ``adapters/`` (the serving boxes). ``bootstrap_tag_role``: the pinned
    box's role, whose first boot tags its own instance ``neuronpipe:bootstrap``; None for an ephemeral box.
    """
    stack = Stack.of(scope)
    results_objects = results_arn(settings, f"{RESULTS_PREFIX}/*")
    cache_objects = results_arn(settings, f"{NEURON_CACHE_PREFIX}*")
    # What the box may list: results/ (the store), neuron-cache/ (the shared compile cache), and on a serving box
    # adapters/ (a directory adapter URI s3://<bucket>/adapters/<prefix>/ is read by listing it).
    list_prefixes = [RESULTS_PREFIX, f"{RESULTS_PREFIX}/*", NEURON_CACHE_PREFIX.rstrip("/"), f"{NEURON_CACHE_PREFIX}*"]
    if adapters:
        list_prefixes += [ADAPTERS_PREFIX.rstrip("/"), f"{ADAPTERS_PREFIX}*"]
    statements = [
        iam.PolicyStatement(sid="SsmAgent", actions=list(SSM_AGENT_ACTIONS), resources=["*"]),
        iam.PolicyStatement(
            sid="SsmAgentChannels", actions=[*SSM_MESSAGES_ACTIONS, *EC2_MESSAGES_ACTIONS], resources=["*"]
        ),
        iam.PolicyStatement(
            sid="ResultsReadWrite",
            resources=[results_objects],
            actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
        ),
        # The shared compile cache: read, and append (the bucket policy refuses a PUT without If-None-Match
        # there as under results/); no delete.
        iam.PolicyStatement(
            sid="NeuronCacheReadWrite",
            resources=[cache_objects],
            actions=["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
        ),
        # Listing is limited to list_prefixes. "IfExists": S3 answers HeadObject/GetObject on a missing
        # key with 404 only if the caller may s3:ListBucket, and that implicit check carries no
        # s3:prefix; a plain StringLike would fail it and turn the store's 404 (exists() -> False)
        # into a 403. A list request naming any other prefix is refused.
        iam.PolicyStatement(
            sid="ResultsList",
            resources=[results_arn(settings)],
            actions=["s3:ListBucket"],
            conditions={"StringLikeIfExists": {"s3:prefix": list_prefixes}},
        ),
        iam.PolicyStatement(
            sid="ResultsEncryption", resources=[results_arn(settings)], actions=["s3:GetEncryptionConfiguration"]
        ),
        iam.PolicyStatement(
            sid="TaskCallbacks", resources=list(TASK_CALLBACK_RESOURCES), actions=list(TASK_CALLBACK_ACTIONS)
        ),
        iam.PolicyStatement(
            sid="HarnessZip",
            actions=["s3:GetObject"],
            resources=[base.harness.bucket.arn_for_objects(base.harness.s3_object_key)],
        ),
        iam.PolicyStatement(
            sid="HarnessParameter", actions=["ssm:GetParameter"], resources=[base.harness_param.parameter_arn]
        ),
        iam.PolicyStatement(
            sid="HfToken",
            actions=["secretsmanager:GetSecretValue"],
            resources=[
                stack.format_arn(
                    service="secretsmanager",
                    resource="secret",
                    resource_name=f"{settings.hf_token_secret_name}-??????",
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                )
            ],
        ),
        iam.PolicyStatement(
            sid="CommandOutputLogs",
            resources=[f"{base.command_log_group.log_group_arn}"],
            actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
        ),
        iam.PolicyStatement(
            sid="CommandOutputLogGroups",
            actions=["logs:DescribeLogGroups"],
            resources=[
                stack.format_arn(
                    service="logs", resource="log-group", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME
                )
            ],
        ),
    ]
    statements += [
        iam.PolicyStatement(
            sid=sid, effect=iam.Effect.DENY, actions=list(actions), resources=[results_arn(settings, k) for k in keys]
        )
        for sid, actions, keys in BOX_DENIES
    ]
    if bootstrap_tag_role is not None:
        # The first boot's last step tags its own instance neuronpipe:bootstrap=done (the idle reaper spares
        # an untagged box during its first boot): only that tag key, only on this project's box of this role.
        statements.append(
            iam.PolicyStatement(
                sid="BootstrapTag",
                actions=["ec2:CreateTags"],
                resources=[stack.format_arn(service="ec2", resource="instance", resource_name="*")],
                conditions={
                    "StringEquals": {
                        f"aws:ResourceTag/{ROLE_TAG_KEY}": bootstrap_tag_role,
                        f"aws:ResourceTag/{PROJECT_TAG_KEY}": settings.project,
                    },
                    "ForAllValues:StringEquals": {"aws:TagKeys": [BOOTSTRAP_TAG]},
                },
            )
        )
    if adapters:
        statements.append(
            iam.PolicyStatement(
                sid="AdaptersRead", actions=["s3:GetObject"], resources=[results_arn(settings, f"{ADAPTERS_PREFIX}*")]
            )
        )
    dataset = settings.dataset_location
    if dataset is not None:
        bucket, prefix = dataset
        statements.append(
            iam.PolicyStatement(
                sid="DatasetRead",
                actions=["s3:GetObject"],
                resources=[f"arn:{stack.partition}:s3:::{bucket}/{prefix}*"],
            )
        )
        statements.append(
            iam.PolicyStatement(
                sid="DatasetList",
                actions=["s3:ListBucket"],
                resources=[f"arn:{stack.partition}:s3:::{bucket}"],
                conditions={"StringLike": {"s3:prefix": [prefix, f"{prefix}*"]}},
            )
        )
    policy = iam.Policy(scope, construct_id, statements=statements)
    _acknowledge(policy, settings, adapters=adapters, bootstrap_tag=bootstrap_tag_role is not None)
    return policy


def _acknowledge(policy: iam.Policy, settings: DeploymentSettings, *, adapters: bool, bootstrap_tag: bool) -> None:
    acknowledge(
        policy,
        "IAM5",
        "The SSM agent's own APIs (instance information, associations, documents, "
        "inventory, message channels) are the actions of AWS's AmazonSSMManagedInstanceCore, which "
        "grants them on Resource '*'; the agent is the only way into the box. " + TASK_CALLBACK_REASON,
        ["Resource::*"],
    )
    acknowledge(
        policy,
        "IAM5",
        "A box reads and writes under results/ only: results/v1/ table rows, its proposed "
        "commit markers under results/v1/_proposed/, sequence claims under results/v1/_seq/, merged models "
        "under results/models/ and command logs under results/logs/, keyed per run, lane and attempt, not "
        "known in advance. Explicit denies keep it from the commit and quarantine markers "
        "(results/v1/_commits/, results/v1/_quarantine/: the control plane commits); the control data "
        "lies outside results/ and is denied too.",
        [nag_results_arn(settings, f"{RESULTS_PREFIX}/*")],
    )
    acknowledge(
        policy,
        "IAM5",
        "The shared compile cache neuron-cache/<compiler version>/<entry> is keyed by "
        "the compiler's own graph hashes, not known in advance; read and create only (the bucket "
        "policy refuses an overwrite).",
        [nag_results_arn(settings, f"{NEURON_CACHE_PREFIX}*")],
    )
    if bootstrap_tag:
        acknowledge(
            policy,
            "IAM5",
            "ec2:CreateTags on instance/* is conditioned on the instance carrying this "
            "project's tag and this box's role tag, and on the one tag key neuronpipe:bootstrap: the box "
            "tags itself when its first boot is done (instance ids are not known before the stack).",
            [f"Resource::arn:<AWS::Partition>:ec2:{settings.region}:<AWS::AccountId>:instance/*"],
        )
    acknowledge(
        policy,
        "IAM5",
        "The SSM agent writes command output into log streams it names per command, "
        "inside the one command log group; DescribeLogGroups has no narrower resource.",
        [f"Resource::arn:<AWS::Partition>:logs:{settings.region}:<AWS::AccountId>:log-group:*"],
    )
    acknowledge(
        policy,
        "IAM5",
        "Secrets Manager appends six random characters to a secret's ARN; '-??????' "
        "matches exactly the HF token secret and nothing else.",
        [
            f"Resource::arn:<AWS::Partition>:secretsmanager:{settings.region}:<AWS::AccountId>:secret:"
            f"{settings.hf_token_secret_name}-??????"
        ],
    )
    if adapters:
        acknowledge(
            policy,
            "IAM5",
            "A serving box reads adapters people upload under adapters/ (the "
            "finetune_serve trigger); their names are not known in advance.",
            [nag_results_arn(settings, f"{ADAPTERS_PREFIX}*")],
        )
    dataset = settings.dataset_location
    if dataset is not None:
        acknowledge(
            policy,
            "IAM5",
            "The boxes read the configured dataset (cdk.json dataset_uri): every "
            "object under its prefix, read only; listing is limited to that prefix.",
            [f"Resource::arn:<AWS::Partition>:s3:::{dataset[0]}/{dataset[1]}*"],
        )
