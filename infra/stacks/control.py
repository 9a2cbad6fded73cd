"""NeuronPipelinesControlPlane: the state machine, the Lambdas, the box leases, the EventBridge rules.

* State machine: ``statemachine/pipeline.asl.json`` (generated, checked in) with its
  ``DefinitionSubstitutions`` (names from ``statemachine.build.SUBSTITUTIONS``). Its role may
  start/stop only instances tagged ``neuronpipe:project=<project>``, send ``AWS-RunShellScript`` only
  to such instances, invoke plan_execution (an execution started with a run request plans itself), schedule_wave,
  commit_lane and finalize_run, release a box's lease, and put run events
  on the default bus; for a run matrix, launch a cell's box from the fleet's launch templates and terminate only
  ephemeral boxes, and run a Distributed Map (:mod:`infra.stacks.fleet_grants`).
* Lambdas: ``control_plane/handlers/<name>.py`` for each of :data:`HANDLERS` (``handler(event,
  context)``), first-party code copied as is, third-party wheels in a layer (required at deploy). Their
  environment names the boxes, the box subnets (``NEURONPIPE_FLEET_SUBNETS``, in AZ order) and the fleet's
  launch template prefix (``NEURONPIPE_FLEET_TEMPLATE_PREFIX``). Control data (``control/``) is written by
  plan_run (a matrix's plan), plan_execution (the plan of an execution started with a run request) and
  schedule_wave (a wave's items) and read by schedule_wave; a lane's commit marker
  by commit_lane alone, after it checks the box's proposed marker.
* Leases (INTERFACES B): a DynamoDB table ``<state_machine_name>-leases`` keyed by ``instance_id``;
  plan_run (or plan_execution) takes every box of a plan in one transaction, the state machine and on_execution_status
  release them, ``expires_at`` is the TTL attribute.
* Rules: SSM command Failed/TimedOut/Cancelled on our boxes → on_command_status; an execution of the
  machine ending ABORTED/FAILED/TIMED_OUT → on_execution_status (stops its boxes at once); the
  named schedules of the deploy settings (one rule each, enabled or not; a firing's time becomes the run id, its
  request carries the schedule's name and baseline: ``pipeline.schedules``) and an object under
  ``adapters/`` (the native event: its identity becomes the run id) → plan_run; the idle reaper
  schedule → idle_reaper.
* Alarms and the failure queue (:mod:`infra.stacks.alarms`): the clean-up Lambdas' errors and throttles, runs
  that failed, timed out or were aborted, boxes still running after a bad end, and a queue that keeps the
  clean-up events EventBridge could not deliver or their Lambdas could not handle; every alarm to the alert topic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Annotations, ArnFormat, CfnOutput, Duration, Fn, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from control_plane.lean import METRICS_NAMESPACE, SERVICE
from infra.config import ADAPTER_ARCHIVE_SUFFIXES, ADAPTERS_PREFIX, PROJECT_TAG_KEY, REPORTS_PREFIX, DeploymentSettings
from infra.stacks.alarms import ASYNC_FUNCTIONS, add_alarms, failure_queue
from infra.stacks.base import BaseStack, results_bucket_name, retention
from infra.stacks.box import BoxStack
from infra.stacks.fleet import FleetStack
from infra.stacks.fleet_grants import acknowledge_state_machine_fleet, state_machine_fleet_statements
from infra.stacks.lambda_grants import RESOURCE_STAR_REASONS, XRAY_REASON, grant_functions
from infra.stacks.nag import CDK_DEPENDS_ON, acknowledge, cfn_lint_ignore
from pipeline.schedules import delivered_request
from statemachine.build import SSM_DOCUMENT

LAMBDA_RUNTIME = lambda_.Runtime.PYTHON_3_14  # keep in step with infra.bundling.LAMBDA_PYTHON_VERSION
EVENT_SOURCE = "neuronpipe"
SSM_STATUS_DETAIL_TYPE = "EC2 Command Invocation Status-change Notification"
SSM_FAILED_STATUSES = ["Failed", "TimedOut", "Cancelled"]
EXECUTION_STATUS_DETAIL_TYPE = "Step Functions Execution Status Change"
EXECUTION_ENDED_STATUSES = ["ABORTED", "FAILED", "TIMED_OUT"]
LEASE_KEY = "instance_id"
LEASE_TTL_ATTRIBUTE = "expires_at"


def schedule_logical_name(name: str) -> str:
    """``nightly-smoke`` → ``NightlySmoke``: a schedule's rule is ``<that>Schedule``."""
    return "".join(part.capitalize() for part in name.split("-"))


@dataclass(frozen=True)
class HandlerSpec:
    name: str
    memory_mb: int
    timeout_s: int
    summary: str

    @property
    def handler(self) -> str:
        return f"control_plane.handlers.{self.name}.handler"


HANDLERS = {
    h.name: h
    for h in [
        HandlerSpec("plan_run", 512, 60, "validate a RunRequest, plan it, start the execution"),
        HandlerSpec(
            "plan_execution",
            512,
            60,
            "an execution started with a RunRequest: validate it, plan it, keep the "
            "plan in S3, lease its boxes (the state machine's first task)",
        ),
        HandlerSpec("on_command_status", 256, 60, "SSM command Failed/TimedOut/Cancelled -> SendTaskFailure"),
        HandlerSpec(
            "on_execution_status", 256, 120, "execution ABORTED/FAILED/TIMED_OUT -> stop its boxes, release its leases"
        ),
        HandlerSpec("finalize_run", 3008, 900, "DuckDB report -> REPORT.md + comparison.json in S3"),
        HandlerSpec(
            "schedule_wave",
            1024,
            300,
            "between waves: record lanes that cannot run, the next wave's segments, the run's outcome",
        ),
        HandlerSpec("idle_reaper", 256, 120, "stop project instances that no running execution owns"),
        HandlerSpec(
            "commit_lane",
            512,
            120,
            "a lane's callback -> check the box's proposed commit marker, write the "
            "commit (the control plane alone commits)",
        ),
    ]
}


class ControlPlaneStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: DeploymentSettings,
        base: BaseStack,
        boxes: list[BoxStack],
        fleet: FleetStack,
        code_dir: Path,
        deps_dir: Path | None,
        asl_path: Path,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.settings = settings
        self.base = base
        self.boxes = boxes
        self.fleet = fleet
        self.box_subnet_ids = base.box_subnet_ids()
        self.state_machine_arn = self.format_arn(
            service="states",
            resource="stateMachine",
            resource_name=settings.state_machine_name,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.lease_table = self._lease_table()
        code = lambda_.Code.from_asset(str(code_dir))
        layers = []
        if deps_dir is not None:
            layers.append(
                lambda_.LayerVersion(
                    self,
                    "Dependencies",
                    code=lambda_.Code.from_asset(str(deps_dir)),
                    compatible_runtimes=[LAMBDA_RUNTIME],
                    compatible_architectures=[lambda_.Architecture.X86_64],
                    description="pydantic, powertools, duckdb, pyarrow (infra/lambda-requirements.txt)",
                )
            )
        else:
            Annotations.of(self).add_warning_v2(
                "neuronpipe:no-lambda-deps",
                "Lambda dependency layer not built (require_lambda_deps=false): plan_run, on_command_status "
                "and finalize_run will not import if these templates are deployed. Run `make lambda-deps`.",
            )
        self.failure_queue = failure_queue(self)
        self.functions = {name: self._function(spec, code, layers) for name, spec in HANDLERS.items()}
        self._grant_functions()
        self.state_machine = self._state_machine(asl_path)
        self._rules()
        self.alarms = add_alarms(
            self,
            functions=self.functions,
            state_machine=self.state_machine,
            queue=self.failure_queue,
            topic=base.alert_topic,
        )
        ssm.StringParameter(
            self,
            "StateMachineArnParam",
            parameter_name=f"{settings.parameter_prefix}/state-machine-arn",
            string_value=self.state_machine.attr_arn,
            description="the run state machine",
        )
        CfnOutput(self, "StateMachineArn", value=self.state_machine.attr_arn)
        CfnOutput(self, "PlanRunFunctionName", value=self.functions["plan_run"].function_name)
        CfnOutput(
            self,
            "CleanUpFailuresQueueUrl",
            value=self.failure_queue.queue_url,
            description="clean-up events not delivered or not handled (docs/guides/deploy-and-operate.md §5)",
        )

    # -- leases ----------------------------------------------------------------------------------
    def _lease_table(self) -> dynamodb.Table:
        table = dynamodb.Table(
            self,
            "Leases",
            table_name=self.settings.lease_table,
            partition_key=dynamodb.Attribute(name=LEASE_KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute=LEASE_TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=RemovalPolicy.DESTROY,
        )
        return table

    # -- Lambdas ---------------------------------------------------------------------------------
    def _function(self, spec: HandlerSpec, code: lambda_.Code, layers: list[lambda_.ILayerVersion]) -> lambda_.Function:
        pascal = "".join(p.title() for p in spec.name.split("_"))
        log_group = logs.LogGroup(
            self,
            f"{pascal}Logs",
            retention=retention(self.settings.log_retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )
        role = iam.Role(
            self,
            f"{pascal}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"neuron-pipelines {spec.name}: {spec.summary}",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="OwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group.log_group_arn],
            )
        )
        env = {
            "POWERTOOLS_SERVICE_NAME": SERVICE,
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            # names read by control_plane.settings.ControlPlaneSettings (prefix NEURONPIPE_)
            "NEURONPIPE_RESULTS_URI": self.base.results_uri,
            "NEURONPIPE_STATE_MACHINE_ARN": self.state_machine_arn,
            "NEURONPIPE_STATE_MACHINE_NAME": self.settings.state_machine_name,
            "NEURONPIPE_REPORTS_PREFIX": REPORTS_PREFIX.rstrip("/"),
            "NEURONPIPE_PROJECT": self.settings.project,
            "NEURONPIPE_EVENT_SOURCE": EVENT_SOURCE,
            "NEURONPIPE_LEASE_TABLE": self.lease_table.table_name,
            "NEURONPIPE_MAX_COST_USD_CEILING": f"{self.settings.max_cost_usd_ceiling:g}",
            # a matrix cell's ephemeral box: its type's launch template, tried in these subnets in this order
            "NEURONPIPE_FLEET_SUBNETS": Fn.join(",", self.box_subnet_ids),
            "NEURONPIPE_FLEET_TEMPLATE_PREFIX": self.settings.fleet_template_prefix,
            # finalize_run announces a regression found against the run's baseline here
            "NEURONPIPE_ALERT_TOPIC_ARN": self.base.alert_topic.topic_arn,
        }
        for box in self.boxes:
            env[f"NEURONPIPE_{box.box_role.upper()}_INSTANCE_ID"] = box.instance.instance_id
        fn = lambda_.Function(
            self,
            pascal,
            runtime=LAMBDA_RUNTIME,
            architecture=lambda_.Architecture.X86_64,
            code=code,
            handler=spec.handler,
            layers=layers,
            memory_size=spec.memory_mb,
            timeout=Duration.seconds(spec.timeout_s),
            role=role,
            log_group=log_group,
            tracing=lambda_.Tracing.ACTIVE,
            environment=env,
            description=f"neuron-pipelines {spec.name}: {spec.summary}",
            # an asynchronous invocation that still fails after Lambda's retries is kept, and pages
            on_failure=destinations.SqsDestination(self.failure_queue) if spec.name in ASYNC_FUNCTIONS else None,
        )
        cfn_lint_ignore(fn, CDK_DEPENDS_ON)
        star = RESOURCE_STAR_REASONS.get(spec.name)
        acknowledge(role, "IAM5", f"{XRAY_REASON} {star}" if star else XRAY_REASON, ["Resource::*"])
        return fn

    def _grant_functions(self) -> None:
        grant_functions(self)

    # -- state machine ---------------------------------------------------------------------------
    def _state_machine(self, asl_path: Path) -> sfn.CfnStateMachine:
        s = self.settings
        definition = json.loads(asl_path.read_text())
        log_group = logs.LogGroup(
            self,
            "StateMachineLogs",
            log_group_name=f"/aws/vendedlogs/states/{self.settings.state_machine_name}",
            retention=retention(self.settings.log_retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )
        role = iam.Role(
            self,
            "StateMachineRole",
            assumed_by=iam.ServicePrincipal("states.amazonaws.com"),
            description="neuron-pipelines run: project-tagged instances only",
        )
        self.state_machine_role = role
        tag_condition = {"StringEquals": {f"aws:ResourceTag/{PROJECT_TAG_KEY}": self.settings.project}}
        instances = self.format_arn(service="ec2", resource="instance", resource_name="*")
        ssm_instances = self.format_arn(service="ssm", resource="managed-instance", resource_name="*")
        finalize = self.functions["finalize_run"]
        statements = [
            iam.PolicyStatement(
                sid="StartStopProjectInstances",
                actions=["ec2:StartInstances", "ec2:StopInstances"],
                resources=[instances],
                conditions=tag_condition,
            ),
            iam.PolicyStatement(
                sid="RunShellScriptDocument",
                actions=["ssm:SendCommand"],
                resources=[self.format_arn(service="ssm", account="", resource="document", resource_name=SSM_DOCUMENT)],
            ),
            iam.PolicyStatement(
                sid="SendCommandToProjectInstances",
                actions=["ssm:SendCommand"],
                resources=[instances, ssm_instances],
                conditions={"StringEquals": {f"ssm:resourceTag/{PROJECT_TAG_KEY}": self.settings.project}},
            ),
            iam.PolicyStatement(sid="Finalize", actions=["lambda:InvokeFunction"], resources=[finalize.function_arn]),
            # an execution started with a run request plans itself (its first task)
            iam.PolicyStatement(
                sid="PlanRequests",
                actions=["lambda:InvokeFunction"],
                resources=[self.functions["plan_execution"].function_arn],
            ),
            iam.PolicyStatement(
                sid="ScheduleWaves",
                actions=["lambda:InvokeFunction"],
                resources=[self.functions["schedule_wave"].function_arn],
            ),
            iam.PolicyStatement(
                sid="CommitLanes",
                actions=["lambda:InvokeFunction"],
                resources=[self.functions["commit_lane"].function_arn],
            ),
            # the ASL releases a box's lease after stopping it (deleteItem, condition run_id = :run) and marks it
            # when the stop failed (updateItem), so the run-wide release leaves it for on_execution_status
            iam.PolicyStatement(
                sid="ReleaseLease",
                actions=["dynamodb:DeleteItem", "dynamodb:UpdateItem"],
                resources=[self.lease_table.table_arn],
            ),
            iam.PolicyStatement(
                sid="RunEvents",
                actions=["events:PutEvents"],
                resources=[self.format_arn(service="events", resource="event-bus", resource_name="default")],
            ),
            iam.PolicyStatement(
                sid="Logs",
                resources=["*"],
                actions=[
                    "logs:CreateLogDelivery",
                    "logs:GetLogDelivery",
                    "logs:UpdateLogDelivery",
                    "logs:DeleteLogDelivery",
                    "logs:ListLogDeliveries",
                    "logs:PutResourcePolicy",
                    "logs:DescribeResourcePolicies",
                    "logs:DescribeLogGroups",
                ],
            ),
            iam.PolicyStatement(
                sid="Tracing",
                resources=["*"],
                actions=[
                    "xray:PutTraceSegments",
                    "xray:PutTelemetryRecords",
                    "xray:GetSamplingRules",
                    "xray:GetSamplingTargets",
                ],
            ),
            *state_machine_fleet_statements(
                self,
                s,
                fleet=self.fleet,
                base=self.base,
                subnet_ids=self.box_subnet_ids,
                state_machine_arn=self.state_machine_arn,
            ),
        ]
        policy = iam.Policy(self, "StateMachinePolicy", statements=statements)
        policy.attach_to_role(role)
        acknowledge_state_machine_fleet(policy, s)
        acknowledge(
            policy,
            "IAM5",
            "Start/Stop and SendCommand are allowed on any instance ARN only under the "
            "condition that it carries the project tag; the plan decides which tagged box a phase uses. "
            "Log delivery and X-Ray APIs accept only Resource '*'.",
            [
                f"Resource::arn:<AWS::Partition>:ec2:{s.region}:<AWS::AccountId>:instance/*",
                f"Resource::arn:<AWS::Partition>:ssm:{s.region}:<AWS::AccountId>:managed-instance/*",
                "Resource::*",
            ],
        )
        machine = sfn.CfnStateMachine(
            self,
            "RunStateMachine",
            state_machine_name=self.settings.state_machine_name,
            role_arn=role.role_arn,
            definition_string=json.dumps(definition, indent=1),
            definition_substitutions=self._substitutions(),
            # Every event, without its data: with execution data the log would hold each task's input, and the
            # SSM tasks' input carries their task token (whoever reads the log could complete the task).
            logging_configuration=sfn.CfnStateMachine.LoggingConfigurationProperty(
                level="ALL",
                include_execution_data=False,
                destinations=[
                    sfn.CfnStateMachine.LogDestinationProperty(
                        cloud_watch_logs_log_group=sfn.CfnStateMachine.CloudWatchLogsLogGroupProperty(
                            log_group_arn=log_group.log_group_arn
                        )
                    )
                ],
            ),
            tracing_configuration=sfn.CfnStateMachine.TracingConfigurationProperty(enabled=True),
        )
        machine.node.add_dependency(policy)
        return machine

    def substitution_values(self) -> dict[str, str]:
        """Every value this stack can give the ASL's ``${Name}`` placeholders (a superset of what it uses)."""
        return {
            "ResultsBucketName": results_bucket_name(self.settings),
            "CommandLogGroupName": self.base.command_log_group.log_group_name,
            "PlanExecutionFunctionArn": self.functions["plan_execution"].function_arn,
            "FinalizeRunFunctionArn": self.functions["finalize_run"].function_arn,
            "CommitLaneFunctionArn": self.functions["commit_lane"].function_arn,
            "ScheduleWaveFunctionArn": self.functions["schedule_wave"].function_arn,
            "EventBusName": "default",
            "EventSource": EVENT_SOURCE,
            "LeaseTableName": self.lease_table.table_name,
        }

    def _substitutions(self) -> dict[str, str]:
        from statemachine.build import SUBSTITUTIONS

        values = self.substitution_values()
        missing = set(SUBSTITUTIONS) - set(values)
        if missing:
            raise KeyError(f"the state machine needs substitutions this stack does not provide: {sorted(missing)}")
        return {k: values[k] for k in SUBSTITUTIONS}

    # -- EventBridge -----------------------------------------------------------------------------
    def _rules(self) -> None:
        f = self.functions
        # Any instance: a run matrix's ephemeral boxes are launched per run, so no instance id is known at deploy
        # time. The document narrows it to the one the state machine sends; on_command_status ignores a command
        # that carries no task token (not the pipeline's) after one ListCommands.
        events.Rule(
            self,
            "CommandFailedRule",
            description="SSM command Failed/TimedOut/Cancelled on a box -> "
            "on_command_status (SendTaskFailure with the command's token)",
            event_pattern=events.EventPattern(
                source=["aws.ssm"],
                detail_type=[SSM_STATUS_DETAIL_TYPE],
                detail={"status": SSM_FAILED_STATUSES, "document-name": [SSM_DOCUMENT]},
            ),
            targets=[
                targets.LambdaFunction(f["on_command_status"], retry_attempts=4, dead_letter_queue=self.failure_queue)
            ],
        )
        events.Rule(
            self,
            "ExecutionEndedRule",
            description="a run ended ABORTED/FAILED/TIMED_OUT -> "
            "on_execution_status (stop its boxes now, release its leases)",
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=[EXECUTION_STATUS_DETAIL_TYPE],
                detail={"status": EXECUTION_ENDED_STATUSES, "stateMachineArn": [self.state_machine.attr_arn]},
            ),
            targets=[
                targets.LambdaFunction(f["on_execution_status"], retry_attempts=8, dead_letter_queue=self.failure_queue)
            ],
        )
        # One rule per named schedule. The schedule's time (same minute -> same run id) makes a redelivery a
        # duplicate execution name.
        for schedule in self.settings.schedules:
            events.Rule(
                self,
                f"{schedule_logical_name(schedule.name)}Schedule",
                description=f"schedule {schedule.name}: {schedule.expression}"
                + ("" if schedule.enabled else " (disabled)"),
                enabled=schedule.enabled,
                schedule=events.Schedule.expression(schedule.expression),
                targets=[
                    targets.LambdaFunction(
                        f["plan_run"],
                        retry_attempts=2,
                        event=events.RuleTargetInput.from_object(
                            {
                                "schedule": schedule.name,
                                "time": events.EventField.time,
                                "request": delivered_request(schedule),
                            }
                        ),
                    )
                ],
            )
        bucket_name = results_bucket_name(self.settings)
        # No input transformer: plan_run gets the native event and derives the run id from the
        # object's identity (bucket, key, version/etag), so a redelivered event cannot start a second run.
        # The archives plan_run accepts (a directory adapter is named in a run request, never by an event).
        events.Rule(
            self,
            "AdapterUploadedRule",
            description=f"an adapter archive {ADAPTERS_PREFIX}<model>/<name>"
            f"{{{','.join(ADAPTER_ARCHIVE_SUFFIXES)}}} -> a finetune_serve run",
            event_pattern=events.EventPattern(
                source=["aws.s3"],
                detail_type=["Object Created"],
                detail={
                    "bucket": {"name": [bucket_name]},
                    "object": {
                        "key": [{"wildcard": f"{ADAPTERS_PREFIX}*{suffix}"} for suffix in ADAPTER_ARCHIVE_SUFFIXES]
                    },
                },
            ),
            targets=[targets.LambdaFunction(f["plan_run"], retry_attempts=2)],
        )
        events.Rule(
            self,
            "IdleReaperSchedule",
            description="stop project instances no running execution owns",
            schedule=events.Schedule.rate(Duration.minutes(self.settings.idle_reaper_rate_minutes)),
            targets=[targets.LambdaFunction(f["idle_reaper"], retry_attempts=2, dead_letter_queue=self.failure_queue)],
        )
