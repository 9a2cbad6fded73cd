"""NeuronPipelinesBase: network with zero ingress, the results bucket, the budget alarm, the harness.

* VPC: private subnets only for the boxes; SSM reached through a NAT gateway (in the boxes' AZ) or interface
  endpoints (``ssm_connectivity``); an S3 gateway endpoint always (free, and keeps multi-GB weight
  transfers off the NAT's per-GB charge), whose policy admits only this project's buckets and the AWS-owned ones
  the SSM agent reads (:data:`AWS_OWNED_BUCKETS`). The box security group has no inbound rule and lets out HTTPS
  only (:data:`BOX_EGRESS_PORTS`); the default security group is stripped of its rules. Flow logs go to the
  access-log bucket.
* Results bucket: versioned, SSE-S3, public access blocked, TLS 1.2 or later only, append-only where results and
  control data live (a PUT without If-None-Match is refused under :data:`~infra.config.APPEND_ONLY_KEY_PATTERNS`),
  the keys only the control plane writes refused to every box role (:func:`box_write_deny_statement`), non-current
  versions expire, EventBridge notifications on (an object under ``adapters/`` starts a finetune_serve run). It is
  RETAINed by ``cdk destroy`` (results outlive the stacks); to deploy again over it, set
  ``existing_results_bucket: true``: the stack then imports it by name and (re)applies its bucket policy, the same
  statements as a created bucket's (docs/guides/deploy-and-operate.md "Deploying again after cdk destroy").
* Alerts: one SNS topic (:attr:`BaseStack.alert_topic`) for the budget and for every alarm of the control plane,
  the ``budget_alert_email`` address subscribed to it (a deploy refuses to synthesize without that setting;
  ``"none"`` opts out on purpose and says so in the template). The budget counts only what carries the project's
  cost-allocation tag (the tag must be activated in the billing console).
* The harness zip (CDK asset) and the SSM parameters the boxes and the CLI read.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Annotations, Aws, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.config import (
    APPEND_ONLY_KEY_PATTERNS,
    BOX_PRINCIPAL,
    BUDGET_EMAIL_OPT_OUT,
    COMMIT_KEY_PATTERNS,
    CONTROL_KEY_PATTERN,
    PRINCIPAL_TAG_KEY,
    PROJECT_TAG_KEY,
    RESULTS_PREFIX,
    DeploymentSettings,
)
from infra.stacks.nag import CDK_DEPENDS_ON, PINNED_AZ, acknowledge, cfn_lint_ignore

RETENTION = {
    30: logs.RetentionDays.ONE_MONTH,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}


def retention(days: int) -> logs.RetentionDays:
    return RETENTION[days]


def budget_tag_filter(settings: DeploymentSettings) -> str:
    """The budget's cost filter: AWS Budgets' ``TagKeyValue`` form of the project tag, ``user:<key>$<value>``."""
    return f"user:{PROJECT_TAG_KEY}${settings.project}"


def results_bucket_name(settings: DeploymentSettings) -> str:
    """Fixed name (account and region in it), so every stack builds ARNs without cross-stack exports."""
    return f"{settings.project}-results-{Aws.ACCOUNT_ID}-{settings.region}"


def results_arn(settings: DeploymentSettings, key_pattern: str | None = None) -> str:
    """``arn:aws:s3:::<bucket>`` or ``.../<key_pattern>``: what cdk-nag prints with <AWS::...> placeholders."""
    arn = f"arn:{Aws.PARTITION}:s3:::{results_bucket_name(settings)}"
    return f"{arn}/{key_pattern}" if key_pattern else arn


def nag_results_arn(settings: DeploymentSettings, key_pattern: str) -> str:
    """The finding id cdk-nag uses for :func:`results_arn` (for acknowledgments)."""
    return (
        f"Resource::arn:<AWS::Partition>:s3:::{settings.project}-results-<AWS::AccountId>-{settings.region}"
        f"/{key_pattern}"
    )


def append_only_statement(bucket: s3.IBucket) -> iam.PolicyStatement:
    """Deny a PUT that could overwrite: ``s3:PutObject`` without ``If-None-Match`` on the append-only keys.

    S3's own condition keys (S3 user guide, "Enforce conditional writes on Amazon S3 buckets"): ``s3:if-none-match``
    is absent (``Null`` true) when the request carries no If-None-Match header; ``s3:ObjectCreationOperation``
    exempts CreateMultipartUpload and UploadPart (authorized as s3:PutObject, and they take no conditional
    header), so only the PutObject and CompleteMultipartUpload that create the object must carry it (the store
    sends it on both: analytics/store/s3.py). Whoever the caller is: the boxes, the Lambdas, an operator.
    """
    return iam.PolicyStatement(
        sid="DenyOverwriteOfResults",
        effect=iam.Effect.DENY,
        principals=[iam.AnyPrincipal()],
        actions=["s3:PutObject"],
        resources=[bucket.arn_for_objects(p) for p in APPEND_ONLY_KEY_PATTERNS],
        conditions={"Null": {"s3:if-none-match": "true"}, "Bool": {"s3:ObjectCreationOperation": "true"}},
    )


def box_write_deny_statement(bucket: s3.IBucket) -> iam.PolicyStatement:
    """Deny every box role (principal tag ``neuronpipe:principal=box``) what only the control plane writes: the
    control data (put or delete) and the commit and quarantine markers. The box policy denies the same
    (:mod:`infra.stacks.box_policy`); this holds whatever a box role is later granted."""
    keys = [CONTROL_KEY_PATTERN, *COMMIT_KEY_PATTERNS]
    return iam.PolicyStatement(
        sid="DenyBoxWritesOfControlPlaneKeys",
        effect=iam.Effect.DENY,
        principals=[iam.AnyPrincipal()],
        actions=["s3:PutObject", "s3:DeleteObject"],
        resources=[bucket.arn_for_objects(k) for k in keys],
        conditions={"StringEquals": {f"aws:PrincipalTag/{PRINCIPAL_TAG_KEY}": BOX_PRINCIPAL}},
    )


def tls_statements(bucket: s3.IBucket) -> list[iam.PolicyStatement]:
    """TLS only, 1.2 or later: the statements ``enforce_ssl`` and ``minimum_tls_version=1.2`` give a created bucket."""
    resources = [bucket.bucket_arn, bucket.arn_for_objects("*")]
    return [
        iam.PolicyStatement(
            sid="DenyInsecureTransport",
            effect=iam.Effect.DENY,
            actions=["s3:*"],
            principals=[iam.AnyPrincipal()],
            resources=resources,
            conditions={"Bool": {"aws:SecureTransport": "false"}},
        ),
        iam.PolicyStatement(
            sid="DenyOutdatedTls",
            effect=iam.Effect.DENY,
            actions=["s3:*"],
            principals=[iam.AnyPrincipal()],
            resources=resources,
            conditions={"NumericLessThan": {"s3:TlsVersion": 1.2}},
        ),
    ]


# What the boxes may reach through the S3 gateway endpoint besides this project's buckets: the AWS-owned buckets of
# the region the SSM agent reads from (SSM user guide, "SSM Agent communications with AWS managed S3 buckets").
# Not the Windows, Distributor, Patch Manager or macOS buckets of that list: these Ubuntu boxes use none of them.
# The package mirrors the boxes use (Ubuntu's apt, PyPI, download.pytorch.org, the Neuron repository, the Hugging
# Face Hub) are not S3 of the region: they leave through the NAT gateway over HTTPS.
AWS_OWNED_BUCKETS = {
    "amazon-ssm-{region}": "SSM agent updates (AWS-UpdateSSMAgent)",
    "aws-ssm-{region}": "the scripts of AWS-owned SSM command documents",
    "aws-ssm-document-attachments-{region}": "attachments of AWS-owned SSM documents (SSM agent 3)",
}
# The box security group lets out HTTPS only: every endpoint the boxes call (AWS APIs, S3, PyPI, the Hugging Face
# Hub, GitHub for uv's CPython) is HTTPS. Ubuntu's apt mirrors are plain HTTP: apt on a box cannot reach them (the
# boxes install nothing with apt; the DLAMI is the stack). DNS, IMDS and the time service are not filtered by
# security groups.
BOX_EGRESS_PORTS = (443,)


INTERFACE_ENDPOINTS = {
    "Ssm": ec2.InterfaceVpcEndpointAwsService.SSM,
    "SsmMessages": ec2.InterfaceVpcEndpointAwsService.SSM_MESSAGES,
    "Ec2Messages": ec2.InterfaceVpcEndpointAwsService.EC2_MESSAGES,
    "StepFunctions": ec2.InterfaceVpcEndpointAwsService.STEP_FUNCTIONS,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "SecretsManager": ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
}


class BaseStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, settings: DeploymentSettings, harness_dir: Path, **kwargs: object
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.settings = settings
        self._network(settings)
        self._buckets(settings)
        self._budget(settings)
        self.command_log_group = logs.LogGroup(
            self,
            "CommandOutput",
            log_group_name="/neuronpipe/ssm-commands",
            retention=retention(settings.log_retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.harness = s3_assets.Asset(self, "Harness", path=str(harness_dir))
        self._s3_endpoint_policy(settings)
        prefix = settings.parameter_prefix
        self.results_uri = f"s3://{results_bucket_name(settings)}/{RESULTS_PREFIX}"
        self.harness_param = ssm.StringParameter(
            self,
            "HarnessUri",
            parameter_name=f"{prefix}/harness/uri",
            string_value=self.harness.s3_object_url,
            description="zip of the harness that neuronpipe-sync installs on the boxes",
        )
        ssm.StringParameter(
            self,
            "ResultsUri",
            parameter_name=f"{prefix}/results-uri",
            string_value=self.results_uri,
            description="store root of the pipeline (neuronpipe --results)",
        )
        CfnOutput(self, "ResultsBucketName", value=self.results_bucket.bucket_name)
        CfnOutput(self, "ResultsUriOutput", value=self.results_uri, export_name=f"{construct_id}-ResultsUri")

    # -- network ---------------------------------------------------------------------------------
    def _network(self, settings: DeploymentSettings) -> None:
        nat = settings.ssm_connectivity in ("nat", "nat_and_endpoints")
        subnets = [
            ec2.SubnetConfiguration(
                name="boxes",
                cidr_mask=22,
                subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS if nat else ec2.SubnetType.PRIVATE_ISOLATED,
            )
        ]
        if nat:
            subnets.append(
                ec2.SubnetConfiguration(
                    name="nat", cidr_mask=26, subnet_type=ec2.SubnetType.PUBLIC, map_public_ip_on_launch=False
                )
            )
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr("10.42.0.0/16"),
            availability_zones=list(settings.availability_zones),
            nat_gateways=1 if nat else 0,
            # the one NAT gateway in the boxes' AZ (CDK's default is the first AZ's public subnet): their egress
            # (pip, Hugging Face) then never crosses zones, and an outage of the other AZ cannot cut it
            nat_gateway_subnets=ec2.SubnetSelection(subnet_group_name="nat", availability_zones=[settings.nat_az])
            if nat
            else None,
            subnet_configuration=subnets,
            restrict_default_security_group=True,
            gateway_endpoints={"S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)},
        )
        self.s3_endpoint = self.vpc.node.find_child("S3")
        self.box_subnet_type = subnets[0].subnet_type
        if nat and settings.trainium_az != settings.inferentia_az:
            Annotations.of(self).add_warning_v2(
                "neuronpipe:nat-other-az",
                f"the NAT gateway is in {settings.nat_az} (trn1's AZ); the inf2 box in "
                f"{settings.inferentia_az} reaches it across zones (inter-AZ data charges)",
            )
        self.box_security_group = ec2.SecurityGroup(
            self,
            "BoxSecurityGroup",
            vpc=self.vpc,
            allow_all_outbound=False,
            description="neuron-pipelines boxes: no inbound rule; reached only through SSM",
        )
        for port in BOX_EGRESS_PORTS:
            self.box_security_group.add_egress_rule(
                ec2.Peer.any_ipv4(), ec2.Port.tcp(port), "HTTPS out: AWS APIs, S3, PyPI, the Hugging Face Hub"
            )
        if settings.ssm_connectivity in ("endpoints", "nat_and_endpoints"):
            box_azs = sorted({settings.trainium_az, settings.inferentia_az})
            endpoint_sg = ec2.SecurityGroup(
                self,
                "EndpointSecurityGroup",
                vpc=self.vpc,
                allow_all_outbound=False,
                description="interface endpoints: HTTPS from the box security group only",
            )
            endpoint_sg.add_ingress_rule(
                self.box_security_group, ec2.Port.tcp(443), "HTTPS from neuron-pipelines boxes to AWS APIs"
            )
            for name, service in INTERFACE_ENDPOINTS.items():
                self.vpc.add_interface_endpoint(
                    name,
                    service=service,
                    private_dns_enabled=True,
                    open=False,
                    security_groups=[endpoint_sg],
                    subnets=ec2.SubnetSelection(subnet_type=self.box_subnet_type, availability_zones=box_azs),
                )
        for subnet in [*self.vpc.public_subnets, *self.vpc.private_subnets, *self.vpc.isolated_subnets]:
            cfn_lint_ignore(subnet, PINNED_AZ)
        provider = self.node.try_find_child("Custom::VpcRestrictDefaultSGCustomResourceProvider")
        handler = provider.node.try_find_child("Handler") if provider else None
        if handler is not None:
            cfn_lint_ignore(handler, CDK_DEPENDS_ON)
        rsg = self.vpc.node.try_find_child("RestrictDefaultSecurityGroupCustomResource")
        for child in [rsg] if rsg else []:
            acknowledge(
                child,
                "IAM4",
                "CDK's custom resource that strips the default security group's rules "
                "uses the AWS-managed Lambda basic execution policy for its own logs only.",
                ["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
            )

    def box_subnet_ids(self) -> list[str]:
        """The box subnets (where the pinned boxes sit and the fleet's boxes launch), one per configured AZ, in the
        order of ``availability_zones``: the state machine tries them in this order on a capacity error."""
        return [
            sid
            for az in self.settings.availability_zones
            for sid in self.vpc.select_subnets(subnet_type=self.box_subnet_type, availability_zones=[az]).subnet_ids
        ]

    # -- storage ---------------------------------------------------------------------------------
    def _buckets(self, settings: DeploymentSettings) -> None:
        self.log_bucket = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[s3.LifecycleRule(id="expire-logs", expiration=Duration.days(365))],
        )
        acknowledge(
            self.log_bucket,
            "S1",
            "This bucket is the server-access-log and flow-log destination itself; logging it into itself would loop.",
        )
        if settings.existing_results_bucket:
            self._import_results_bucket(settings)
        else:
            self.results_bucket = s3.Bucket(
                self,
                "Results",
                bucket_name=results_bucket_name(settings),
                encryption=s3.BucketEncryption.S3_MANAGED,
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                enforce_ssl=True,
                minimum_tls_version=1.2,
                versioned=True,
                object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
                server_access_logs_bucket=self.log_bucket,
                server_access_logs_prefix="results-bucket/",
                removal_policy=RemovalPolicy.RETAIN,
                lifecycle_rules=[
                    s3.LifecycleRule(
                        id="noncurrent-versions",
                        noncurrent_version_expiration=Duration.days(settings.noncurrent_version_days),
                        abort_incomplete_multipart_upload_after=Duration.days(7),
                    )
                ],
            )
            # EventBridge notifications natively (no CDK notification custom resource / Lambda).
            cfn_results = self.results_bucket.node.default_child
            assert isinstance(cfn_results, s3.CfnBucket)
            cfn_results.add_property_override(
                "NotificationConfiguration.EventBridgeConfiguration.EventBridgeEnabled", True
            )
            for statement in self._results_statements():
                self.results_bucket.add_to_resource_policy(statement)
        self.vpc.add_flow_log(
            "FlowLogs",
            destination=ec2.FlowLogDestination.to_s3(self.log_bucket, "vpc-flow-logs/"),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )

    def _s3_endpoint_policy(self, settings: DeploymentSettings) -> None:
        """The gateway endpoint admits this project's buckets (results, the harness asset's, the dataset's) and
        :data:`AWS_OWNED_BUCKETS` (read only); a request through it for any other bucket of the region is refused."""
        endpoint = self.s3_endpoint
        assert isinstance(endpoint, ec2.GatewayVpcEndpoint)
        own = [self.results_bucket, self.harness.bucket]
        resources = [arn for b in own for arn in (b.bucket_arn, b.arn_for_objects("*"))]
        dataset = settings.dataset_location
        if dataset is not None:
            resources += [f"arn:{self.partition}:s3:::{dataset[0]}", f"arn:{self.partition}:s3:::{dataset[0]}/*"]
        endpoint.add_to_policy(
            iam.PolicyStatement(
                sid="ProjectBuckets", principals=[iam.AnyPrincipal()], actions=["s3:*"], resources=resources
            )
        )
        endpoint.add_to_policy(
            iam.PolicyStatement(
                sid="AwsOwnedBuckets",
                principals=[iam.AnyPrincipal()],
                actions=["s3:GetObject"],
                resources=[
                    f"arn:{self.partition}:s3:::{name.format(region=settings.region)}/*" for name in AWS_OWNED_BUCKETS
                ],
            )
        )

    def _results_statements(self) -> list[iam.PolicyStatement]:
        """What the results bucket's policy holds besides TLS: append-only keys, and the box roles' denies."""
        return [append_only_statement(self.results_bucket), box_write_deny_statement(self.results_bucket)]

    def _import_results_bucket(self, settings: DeploymentSettings) -> None:
        """The bucket a previous deploy created and `cdk destroy` kept: used by name, not created.

        Its encryption, versioning, lifecycle, access logging and EventBridge notifications were set
        when it was created and stay with it; its policy is a separate resource, which the destroy
        removed, so it is put back here: the same statements a created bucket's policy holds.
        """
        name = results_bucket_name(settings)
        self.results_bucket = s3.Bucket.from_bucket_name(self, "Results", name)
        policy = s3.BucketPolicy(self, "ResultsPolicy", bucket=self.results_bucket)
        policy.document.add_statements(*tls_statements(self.results_bucket), *self._results_statements())
        acknowledge(
            policy,
            "S10",
            "This policy does deny every non-TLS request (Deny s3:* on the bucket and its "
            "objects when aws:SecureTransport is false, and below TLS 1.2); cdk-nag cannot match an "
            "imported bucket's name, built with Fn::Join, to the statement's ARNs (tests/infra checks the "
            "statements).",
        )

    # -- budget ----------------------------------------------------------------------------------
    def _budget(self, settings: DeploymentSettings) -> None:
        # The deploy's one alert topic: the budget's notifications and every alarm of the control plane.
        self.alert_topic = sns.Topic(self, "BudgetAlerts", display_name="neuron-pipelines alerts", enforce_ssl=True)
        self.alert_topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowBudgetsPublish",
                actions=["sns:Publish"],
                resources=[self.alert_topic.topic_arn],
                principals=[iam.ServicePrincipal("budgets.amazonaws.com")],
                conditions={"StringEquals": {"aws:SourceAccount": self.account}},
            )
        )
        acknowledge(
            self.alert_topic,
            "SNS2",
            "Budget alerts carry only cost figures and alarms only a metric's "
            "name and value; AWS Budgets cannot publish to a topic encrypted with the AWS-managed SNS key, "
            "and a customer key costs more than it protects.",
        )
        # the budget notifies the topic only: the address gets every alert, budget or alarm, from its subscription
        subscribers = [
            budgets.CfnBudget.SubscriberProperty(subscription_type="SNS", address=self.alert_topic.topic_arn)
        ]
        email = settings.budget_alert_email
        if email and email != BUDGET_EMAIL_OPT_OUT:
            self.alert_topic.add_subscription(subscriptions.EmailSubscription(email))
            recorded = email
        elif email == BUDGET_EMAIL_OPT_OUT:  # on purpose: recorded in the template, and said at synth
            recorded = 'none (opted out: cdk.json budget_alert_email = "none"; alerts reach only the SNS topic)'
            Annotations.of(self).add_warning_v2(
                "neuronpipe:budget-no-email",
                'budget alerts and alarms go to an SNS topic with no subscriber: budget_alert_email is "none"',
            )
        else:  # offline synth only (require_lambda_deps=false): a deploy refuses this (infra.app)
            recorded = "not set (offline synth: a deploy refuses this)"
            Annotations.of(self).add_warning_v2(
                "neuronpipe:budget-no-email",
                "budget_alert_email is not set: budget alerts would reach nobody (a deploy refuses to synthesize)",
            )
        CfnOutput(
            self,
            "BudgetAlertEmail",
            value=recorded,
            description="who gets the budget alerts and alarms "
            "(subscribed to the alert topic: confirm the e-mail AWS sends)",
        )
        CfnOutput(self, "AlertTopicArn", value=self.alert_topic.topic_arn)
        notifications = [
            budgets.CfnBudget.NotificationWithSubscribersProperty(
                notification=budgets.CfnBudget.NotificationProperty(
                    notification_type=kind,
                    comparison_operator="GREATER_THAN",
                    threshold=pct,
                    threshold_type="PERCENTAGE",
                ),
                subscribers=subscribers,
            )
            for kind, pct in [("ACTUAL", p) for p in settings.budget_alert_thresholds_pct] + [("FORECASTED", 100.0)]
        ]
        self.budget = budgets.CfnBudget(
            self,
            "MonthlyBudget",
            budget=budgets.CfnBudget.BudgetDataProperty(
                budget_name=f"{settings.project}-monthly",
                budget_type="COST",
                time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=settings.monthly_budget_usd, unit="USD"),
                # only this project's spend: what carries its tag (a cost-allocation tag once activated in the
                # billing console; before that the budget counts nothing)
                cost_filters={"TagKeyValue": [budget_tag_filter(settings)]},
            ),
            notifications_with_subscribers=notifications,
        )
