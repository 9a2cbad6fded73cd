"""NeuronPipelinesBase: network with zero ingress, the results bucket, the budget alarm, the harness.

* VPC: private subnets only for the boxes; SSM reached through a NAT gateway (in the boxes' AZ) or interface
  endpoints (``ssm_connectivity``); an S3 gateway endpoint always (free, and keeps multi-GB weight
  transfers off the NAT's per-GB charge). The box security group has no inbound rule; the default
  security group is stripped of its rules. Flow logs go to the access-log bucket.
* Results bucket: versioned, SSE-S3, public access blocked, TLS-only, append-only where results live (a PUT
  without If-None-Match is refused under :data:`~infra.config.APPEND_ONLY_KEY_PATTERNS`), non-current versions expire,
  EventBridge notifications on (an object under ``adapters/`` starts a finetune_serve run). It is
  RETAINed by ``cdk destroy`` (results outlive the stacks); to deploy again over it, set
  ``existing_results_bucket: true``: the stack then imports it by name and (re)applies only its
  TLS-only bucket policy (docs/guides/deploy-and-operate.md "Deploying again after cdk destroy").
* Budget: monthly cost limit with alerts to an SNS topic and the ``budget_alert_email`` address (a deploy
  refuses to synthesize without that setting; ``"none"`` opts out on purpose and says so in the template).
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
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.config import APPEND_ONLY_KEY_PATTERNS, BUDGET_EMAIL_OPT_OUT, RESULTS_PREFIX, DeploymentSettings
from infra.stacks.nag import CDK_DEPENDS_ON, PINNED_AZ, acknowledge, cfn_lint_ignore

RETENTION = {30: logs.RetentionDays.ONE_MONTH, 90: logs.RetentionDays.THREE_MONTHS,
             180: logs.RetentionDays.SIX_MONTHS, 365: logs.RetentionDays.ONE_YEAR}


def retention(days: int) -> logs.RetentionDays:
    return RETENTION[days]


def results_bucket_name(settings: DeploymentSettings) -> str:
    """Fixed name (account and region in it), so every stack builds ARNs without cross-stack exports."""
    return f"{settings.project}-results-{Aws.ACCOUNT_ID}-{settings.region}"


def results_arn(settings: DeploymentSettings, key_pattern: str | None = None) -> str:
    """``arn:aws:s3:::<bucket>`` or ``.../<key_pattern>``: what cdk-nag prints with <AWS::...> placeholders."""
    arn = f"arn:{Aws.PARTITION}:s3:::{results_bucket_name(settings)}"
    return f"{arn}/{key_pattern}" if key_pattern else arn


def nag_results_arn(settings: DeploymentSettings, key_pattern: str) -> str:
    """The finding id cdk-nag uses for :func:`results_arn` (for acknowledgments)."""
    return (f"Resource::arn:<AWS::Partition>:s3:::{settings.project}-results-<AWS::AccountId>-{settings.region}"
            f"/{key_pattern}")


def append_only_statement(bucket: s3.IBucket) -> iam.PolicyStatement:
    """Deny a PUT that could overwrite: ``s3:PutObject`` without ``If-None-Match`` on the append-only keys.

    S3's own condition keys (S3 user guide, "Enforce conditional writes on Amazon S3 buckets"): ``s3:if-none-match``
    is absent (``Null`` true) when the request carries no If-None-Match header; ``s3:ObjectCreationOperation``
    exempts CreateMultipartUpload and UploadPart (authorized as s3:PutObject, and they take no conditional
    header), so only the PutObject and CompleteMultipartUpload that create the object must carry it (the store
    sends it on both: analytics/store/s3.py). Whoever the caller is: the boxes, the Lambdas, an operator.
    """
    return iam.PolicyStatement(
        sid="DenyOverwriteOfResults", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
        actions=["s3:PutObject"], resources=[bucket.arn_for_objects(p) for p in APPEND_ONLY_KEY_PATTERNS],
        conditions={"Null": {"s3:if-none-match": "true"}, "Bool": {"s3:ObjectCreationOperation": "true"}})


INTERFACE_ENDPOINTS = {
    "Ssm": ec2.InterfaceVpcEndpointAwsService.SSM,
    "SsmMessages": ec2.InterfaceVpcEndpointAwsService.SSM_MESSAGES,
    "Ec2Messages": ec2.InterfaceVpcEndpointAwsService.EC2_MESSAGES,
    "StepFunctions": ec2.InterfaceVpcEndpointAwsService.STEP_FUNCTIONS,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "SecretsManager": ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
}


class BaseStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, settings: DeploymentSettings, harness_dir: Path,
                 **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.settings = settings
        self._network(settings)
        self._buckets(settings)
        self._budget(settings)
        self.command_log_group = logs.LogGroup(
            self, "CommandOutput", log_group_name="/neuronpipe/ssm-commands",
            retention=retention(settings.log_retention_days),
            removal_policy=RemovalPolicy.DESTROY)
        self.harness = s3_assets.Asset(self, "Harness", path=str(harness_dir))
        prefix = settings.parameter_prefix
        self.results_uri = f"s3://{results_bucket_name(settings)}/{RESULTS_PREFIX}"
        self.harness_param = ssm.StringParameter(
            self, "HarnessUri", parameter_name=f"{prefix}/harness/uri", string_value=self.harness.s3_object_url,
            description="zip of the harness that neuronpipe-sync installs on the boxes")
        ssm.StringParameter(self, "ResultsUri", parameter_name=f"{prefix}/results-uri", string_value=self.results_uri,
                            description="store root of the pipeline (neuronpipe --results)")
        CfnOutput(self, "ResultsBucketName", value=self.results_bucket.bucket_name)
        CfnOutput(self, "ResultsUriOutput", value=self.results_uri, export_name=f"{construct_id}-ResultsUri")

    # -- network ---------------------------------------------------------------------------------
    def _network(self, settings: DeploymentSettings) -> None:
        nat = settings.ssm_connectivity in ("nat", "nat_and_endpoints")
        subnets = [ec2.SubnetConfiguration(
            name="boxes", cidr_mask=22,
            subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS if nat else ec2.SubnetType.PRIVATE_ISOLATED)]
        if nat:
            subnets.append(ec2.SubnetConfiguration(name="nat", cidr_mask=26, subnet_type=ec2.SubnetType.PUBLIC,
                                                   map_public_ip_on_launch=False))
        self.vpc = ec2.Vpc(
            self, "Vpc", ip_addresses=ec2.IpAddresses.cidr("10.42.0.0/16"),
            availability_zones=list(settings.availability_zones), nat_gateways=1 if nat else 0,
            # the one NAT gateway in the boxes' AZ (CDK's default is the first AZ's public subnet): their egress
            # (pip, Hugging Face) then never crosses zones, and an outage of the other AZ cannot cut it
            nat_gateway_subnets=ec2.SubnetSelection(subnet_group_name="nat", availability_zones=[settings.nat_az])
            if nat else None,
            subnet_configuration=subnets, restrict_default_security_group=True,
            gateway_endpoints={"S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)})
        self.box_subnet_type = subnets[0].subnet_type
        if nat and settings.trainium_az != settings.inferentia_az:
            Annotations.of(self).add_warning_v2(
                "neuronpipe:nat-other-az", f"the NAT gateway is in {settings.nat_az} (trn1's AZ); the inf2 box in "
                f"{settings.inferentia_az} reaches it across zones (inter-AZ data charges)")
        self.box_security_group = ec2.SecurityGroup(
            self, "BoxSecurityGroup", vpc=self.vpc, allow_all_outbound=True,
            description="neuron-pipelines boxes: no inbound rule; reached only through SSM")
        if settings.ssm_connectivity in ("endpoints", "nat_and_endpoints"):
            box_azs = sorted({settings.trainium_az, settings.inferentia_az})
            endpoint_sg = ec2.SecurityGroup(
                self, "EndpointSecurityGroup", vpc=self.vpc, allow_all_outbound=False,
                description="interface endpoints: HTTPS from the box security group only")
            endpoint_sg.add_ingress_rule(self.box_security_group, ec2.Port.tcp(443),
                                         "HTTPS from neuron-pipelines boxes to AWS APIs")
            for name, service in INTERFACE_ENDPOINTS.items():
                self.vpc.add_interface_endpoint(
                    name, service=service, private_dns_enabled=True, open=False, security_groups=[endpoint_sg],
                    subnets=ec2.SubnetSelection(subnet_type=self.box_subnet_type, availability_zones=box_azs))
        for subnet in [*self.vpc.public_subnets, *self.vpc.private_subnets, *self.vpc.isolated_subnets]:
            cfn_lint_ignore(subnet, PINNED_AZ)
        provider = self.node.try_find_child("Custom::VpcRestrictDefaultSGCustomResourceProvider")
        handler = provider.node.try_find_child("Handler") if provider else None
        if handler is not None:
            cfn_lint_ignore(handler, CDK_DEPENDS_ON)
        rsg = self.vpc.node.try_find_child("RestrictDefaultSecurityGroupCustomResource")
        for child in [rsg] if rsg else []:
            acknowledge(child, "IAM4", "CDK's custom resource that strips the default security group's rules "
                        "uses the AWS-managed Lambda basic execution policy for its own logs only.",
                        ["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"])

    def box_subnet_ids(self) -> list[str]:
        """The box subnets (where the pinned boxes sit and the fleet's boxes launch), one per configured AZ, in the
        order of ``availability_zones``: the state machine tries them in this order on a capacity error."""
        return [sid for az in self.settings.availability_zones
                for sid in self.vpc.select_subnets(subnet_type=self.box_subnet_type, availability_zones=[az]).subnet_ids]

    # -- storage ---------------------------------------------------------------------------------
    def _buckets(self, settings: DeploymentSettings) -> None:
        self.log_bucket = s3.Bucket(
            self, "AccessLogs", encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL, enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED, removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[s3.LifecycleRule(id="expire-logs", expiration=Duration.days(365))])
        acknowledge(self.log_bucket, "S1", "This bucket is the server-access-log and flow-log destination itself; "
                    "logging it into itself would loop.")
        if settings.existing_results_bucket:
            self._import_results_bucket(settings)
        else:
            self.results_bucket = s3.Bucket(
                self, "Results", bucket_name=results_bucket_name(settings),
                encryption=s3.BucketEncryption.S3_MANAGED,
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL, enforce_ssl=True, minimum_tls_version=1.2,
                versioned=True, object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
                server_access_logs_bucket=self.log_bucket, server_access_logs_prefix="results-bucket/",
                removal_policy=RemovalPolicy.RETAIN,
                lifecycle_rules=[s3.LifecycleRule(
                    id="noncurrent-versions",
                    noncurrent_version_expiration=Duration.days(settings.noncurrent_version_days),
                    abort_incomplete_multipart_upload_after=Duration.days(7))])
            # EventBridge notifications natively (no CDK notification custom resource / Lambda).
            cfn_results = self.results_bucket.node.default_child
            assert isinstance(cfn_results, s3.CfnBucket)
            cfn_results.add_property_override(
                "NotificationConfiguration.EventBridgeConfiguration.EventBridgeEnabled", True)
            self.results_bucket.add_to_resource_policy(append_only_statement(self.results_bucket))
        self.vpc.add_flow_log("FlowLogs", destination=ec2.FlowLogDestination.to_s3(self.log_bucket, "vpc-flow-logs/"),
                              traffic_type=ec2.FlowLogTrafficType.ALL)

    def _import_results_bucket(self, settings: DeploymentSettings) -> None:
        """The bucket a previous deploy created and `cdk destroy` kept: used by name, not created.

        Its encryption, versioning, lifecycle, access logging and EventBridge notifications were set
        when it was created and stay with it; only the TLS-only policy is a separate resource, which
        the destroy removed, so it is put back here.
        """
        name = results_bucket_name(settings)
        self.results_bucket = s3.Bucket.from_bucket_name(self, "Results", name)
        policy = s3.BucketPolicy(self, "ResultsPolicy", bucket=self.results_bucket)
        policy.document.add_statements(iam.PolicyStatement(
            sid="DenyInsecureTransport", effect=iam.Effect.DENY, actions=["s3:*"],
            principals=[iam.AnyPrincipal()],
            resources=[self.results_bucket.bucket_arn, self.results_bucket.arn_for_objects("*")],
            conditions={"Bool": {"aws:SecureTransport": "false"}}))
        policy.document.add_statements(append_only_statement(self.results_bucket))
        acknowledge(policy, "S10", "This policy does deny every non-TLS request (Deny s3:* on the bucket and its "
                    "objects when aws:SecureTransport is false); cdk-nag cannot match an imported bucket's name, "
                    "built with Fn::Join, to the statement's ARNs (tests/infra checks the statement).")

    # -- budget ----------------------------------------------------------------------------------
    def _budget(self, settings: DeploymentSettings) -> None:
        self.alert_topic = sns.Topic(self, "BudgetAlerts", display_name="neuron-pipelines budget alerts",
                                     enforce_ssl=True)
        self.alert_topic.add_to_resource_policy(iam.PolicyStatement(
            sid="AllowBudgetsPublish", actions=["sns:Publish"], resources=[self.alert_topic.topic_arn],
            principals=[iam.ServicePrincipal("budgets.amazonaws.com")],
            conditions={"StringEquals": {"aws:SourceAccount": self.account}}))
        acknowledge(self.alert_topic, "SNS2", "Budget alerts carry only cost figures; AWS Budgets cannot publish to "
                    "a topic encrypted with the AWS-managed SNS key, and a customer key costs more than it protects.")
        subscribers = [budgets.CfnBudget.SubscriberProperty(subscription_type="SNS", address=self.alert_topic.topic_arn)]
        email = settings.budget_alert_email
        if email and email != BUDGET_EMAIL_OPT_OUT:
            subscribers.append(budgets.CfnBudget.SubscriberProperty(subscription_type="EMAIL", address=email))
            recorded = email
        elif email == BUDGET_EMAIL_OPT_OUT:  # on purpose: recorded in the template, and said at synth
            recorded = "none (opted out: cdk.json budget_alert_email = \"none\"; alerts reach only the SNS topic)"
            Annotations.of(self).add_warning_v2("neuronpipe:budget-no-email", "budget alerts go to an SNS topic "
                                                "with no subscriber: budget_alert_email is \"none\"")
        else:  # offline synth only (require_lambda_deps=false): a deploy refuses this (infra.app)
            recorded = "not set (offline synth: a deploy refuses this)"
            Annotations.of(self).add_warning_v2("neuronpipe:budget-no-email", "budget_alert_email is not set: "
                                                "budget alerts would reach nobody (a deploy refuses to synthesize)")
        CfnOutput(self, "BudgetAlertEmail", value=recorded, description="who gets the monthly budget alerts")
        notifications = [
            budgets.CfnBudget.NotificationWithSubscribersProperty(
                notification=budgets.CfnBudget.NotificationProperty(
                    notification_type=kind, comparison_operator="GREATER_THAN", threshold=pct,
                    threshold_type="PERCENTAGE"),
                subscribers=subscribers)
            for kind, pct in [("ACTUAL", p) for p in settings.budget_alert_thresholds_pct] + [("FORECASTED", 100.0)]]
        self.budget = budgets.CfnBudget(
            self, "MonthlyBudget",
            budget=budgets.CfnBudget.BudgetDataProperty(
                budget_name=f"{settings.project}-monthly", budget_type="COST", time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=settings.monthly_budget_usd, unit="USD")),
            notifications_with_subscribers=notifications)
