"""What pages someone when the clean-up path fails: the control plane's alarms and its failure queue.

* :func:`failure_queue`: one SQS queue (SSE-SQS, TLS only) that keeps what an asynchronously invoked Lambda could
  not handle: the EventBridge rule targets' dead-letter queue (a delivery that failed) and the functions' on-failure
  destination (an invocation that still failed after Lambda's retries). Its own alarm fires on its first message.
* :func:`add_alarms`: for each function of :data:`ALARMED_FUNCTIONS`, an alarm on its ``Errors`` and one on its
  ``Throttles``; for the state machine, one on each of ``ExecutionsFailed``, ``ExecutionsTimedOut`` and
  ``ExecutionsAborted``; one on each metric on_execution_status emits when a run's end left boxes to stop
  (:data:`BAD_END_METRICS`). Every alarm's action is the deploy's alert topic
  (:attr:`infra.stacks.base.BaseStack.alert_topic`), whose subscriber is ``budget_alert_email``.

Each alarm fires on the first occurrence in a 5-minute period (``> 0``); no data is not breaching (an idle deploy
stays OK).
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from control_plane.lean import METRICS_NAMESPACE, SERVICE
from infra.stacks.nag import acknowledge

# The functions whose failure leaves a box running, a run unfinished or a lane uncommitted.
ALARMED_FUNCTIONS = (
    "on_execution_status",
    "idle_reaper",
    "on_command_status",
    "finalize_run",
    "schedule_wave",
    "commit_lane",
)
# Invoked asynchronously (by EventBridge): their failures land in the failure queue.
ASYNC_FUNCTIONS = ("on_execution_status", "idle_reaper", "on_command_status")
FUNCTION_METRICS = ("Errors", "Throttles")
STATE_MACHINE_METRICS = ("ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted")
# control_plane/handlers/on_execution_status.py emits these (EMF, namespace METRICS_NAMESPACE, dimension service)
# when a run that ended badly still had boxes to stop or terminate
BAD_END_METRICS = ("InstancesStoppedAfterBadEnd", "InstancesTerminatedAfterBadEnd")
PERIOD = Duration.minutes(5)
FAILURE_RETENTION = Duration.days(14)  # SQS's longest


def failure_queue(scope: Construct) -> sqs.Queue:
    queue = sqs.Queue(
        scope,
        "CleanUpFailures",
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=FAILURE_RETENTION,
    )
    acknowledge(
        queue,
        "SQS3",
        "This queue is itself the dead-letter queue of the clean-up path: the EventBridge "
        "rule targets' dead-letter queue and the asynchronous Lambdas' on-failure destination; its own "
        "alarm pages on its first message.",
    )
    return queue


def _alarm(
    scope: Construct, construct_id: str, metric: cloudwatch.IMetric, description: str, topic: sns.ITopic
) -> cloudwatch.Alarm:
    alarm = cloudwatch.Alarm(
        scope,
        construct_id,
        metric=metric,
        threshold=0,
        evaluation_periods=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        alarm_description=description,
    )
    alarm.add_alarm_action(cw_actions.SnsAction(topic))
    return alarm


def add_alarms(
    scope: Construct,
    *,
    functions: Mapping[str, lambda_.IFunction],
    state_machine: sfn.CfnStateMachine,
    queue: sqs.IQueue,
    topic: sns.ITopic,
) -> list[cloudwatch.Alarm]:
    alarms = []
    for name in ALARMED_FUNCTIONS:
        fn = functions[name]
        pascal = "".join(p.title() for p in name.split("_"))
        for metric_name in FUNCTION_METRICS:
            metric = fn.metric(metric_name, statistic="Sum", period=PERIOD)
            alarms.append(
                _alarm(
                    scope, f"{pascal}{metric_name}Alarm", metric, f"neuron-pipelines {name}: {metric_name} > 0", topic
                )
            )
    for metric_name in STATE_MACHINE_METRICS:
        metric = cloudwatch.Metric(
            namespace="AWS/States",
            metric_name=metric_name,
            statistic="Sum",
            period=PERIOD,
            dimensions_map={"StateMachineArn": state_machine.attr_arn},
        )
        alarms.append(
            _alarm(scope, f"StateMachine{metric_name}Alarm", metric, f"neuron-pipelines runs: {metric_name} > 0", topic)
        )
    for metric_name in BAD_END_METRICS:
        metric = cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=metric_name,
            statistic="Sum",
            period=PERIOD,
            dimensions_map={"service": SERVICE},
        )
        alarms.append(
            _alarm(
                scope,
                f"{metric_name}Alarm",
                metric,
                f"a run ended badly with boxes still to stop: {metric_name} > 0",
                topic,
            )
        )
    alarms.append(
        _alarm(
            scope,
            "CleanUpFailuresAlarm",
            queue.metric_approximate_number_of_messages_visible(statistic="Maximum", period=PERIOD),
            "a clean-up event was not delivered or its Lambda failed: see the CleanUpFailures queue",
            topic,
        )
    )
    return alarms
