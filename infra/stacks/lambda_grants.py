"""What each control-plane Lambda's role may do, besides its own log group and X-Ray (:mod:`infra.stacks.control`).

Each grant is scoped to what the function calls: plan_run starts and looks up the run's execution, takes the leases,
reads the commit markers and the EC2 quotas, writes a matrix's plan (control data); plan_execution does the same
planning for the execution that invokes it (the plan always kept as control data) and starts nothing;
on_command_status reads the failed command and fails its task; on_execution_status and the idle reaper read an
execution's input and the start of its history (what an execution started with a run request planned), stop project
boxes and terminate ephemeral ones; finalize_run reads results and writes reports; schedule_wave reads results,
commits skipped attempts and reads and writes control data; commit_lane reads results and alone writes the commit
markers. Every finding
cdk-nag reports is acknowledged here with what the grant covers (the Resource '*' ones: :data:`RESOURCE_STAR_REASONS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import ArnFormat
from aws_cdk import aws_iam as iam

from infra.config import COMMIT_KEY_PATTERNS, PROJECT_TAG_KEY, REPORTS_PREFIX, RESULTS_PREFIX
from infra.stacks.base import nag_results_arn, results_arn
from infra.stacks.box_policy import TASK_CALLBACK_REASON, TASK_CALLBACK_RESOURCES
from infra.stacks.fleet_grants import CONTROL_OBJECTS, ephemeral_condition, quota_arns
from infra.stacks.nag import acknowledge

# Why a function's role holds an action on Resource '*' (one acknowledgment per role and finding: cdk-nag keeps the
# first): X-Ray for every function, and what the function itself calls that has no narrower resource.
XRAY_REASON = "X-Ray (active tracing) accepts trace segments only on Resource '*'."
RESOURCE_STAR_REASONS = {
    "plan_run": "servicequotas:GetAWSDefaultServiceQuota (the fallback where a quota has no applied value) names "
    "an AWS default, no resource of the account: granted on '*', read only.",
    "plan_execution": "servicequotas:GetAWSDefaultServiceQuota (the fallback where a quota has no applied value) "
    "names an AWS default, no resource of the account: granted on '*', read only.",
    "on_command_status": "ssm:ListCommands/GetCommandInvocation support no resource-level permissions; the "
    "function only reads the failed command to recover its token. " + TASK_CALLBACK_REASON,
    "on_execution_status": "ec2:DescribeInstances has no resource-level permissions.",
    "idle_reaper": "ec2:DescribeInstances has no resource-level permissions.",
}


def results_list_condition() -> dict[str, dict[str, list[str]]]:
    """ListBucket under results/ only ("IfExists": a HEAD/GET of a missing key checks ListBucket without a prefix)."""
    return {"StringLikeIfExists": {"s3:prefix": [RESULTS_PREFIX, f"{RESULTS_PREFIX}/*"]}}


def list_results(s: Any, sid: str = "ListResults") -> iam.PolicyStatement:
    """ListBucket on the results bucket, under results/ only (:func:`results_list_condition`)."""
    return iam.PolicyStatement(
        sid=sid, actions=["s3:ListBucket"], resources=[results_arn(s)], conditions=results_list_condition()
    )


def read_results(s: Any) -> iam.PolicyStatement:
    """GetObject on every object under results/."""
    return iam.PolicyStatement(
        sid="ReadResults", actions=["s3:GetObject"], resources=[results_arn(s, f"{RESULTS_PREFIX}/*")]
    )


@dataclass(frozen=True)
class _Targets:
    """What several functions' grants name: the project's instances (and the tag condition on them), the state
    machine's executions, the lease table, and cdk-nag's spelling of the first two."""

    tag_condition: dict[str, dict[str, str]]
    instances: str
    executions: str
    leases: str
    nag_instances: str
    nag_executions: str


def grant_functions(stack: Any) -> None:  # infra.stacks.control.ControlPlaneStack (no import: no cycle)
    """Every function's grants and their acknowledgments (the functions exist: ``stack.functions``)."""
    f = stack.functions
    s = stack.settings
    at = _Targets(
        tag_condition={"StringEquals": {f"aws:ResourceTag/{PROJECT_TAG_KEY}": stack.settings.project}},
        instances=stack.format_arn(service="ec2", resource="instance", resource_name="*"),
        executions=stack.format_arn(
            service="states",
            resource="execution",
            resource_name=f"{stack.settings.state_machine_name}:*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        ),
        leases=stack.lease_table.table_arn,
        nag_instances=f"Resource::arn:<AWS::Partition>:ec2:{s.region}:<AWS::AccountId>:instance/*",
        nag_executions=(
            f"Resource::arn:<AWS::Partition>:states:{s.region}:<AWS::AccountId>:execution:"
            f"{stack.settings.state_machine_name}:*"
        ),
    )
    _grant_plan_run(stack, f["plan_run"], at)
    _grant_plan_execution(stack, f["plan_execution"], at)
    _grant_on_command_status(stack, f["on_command_status"], at)
    _grant_on_execution_status(stack, f["on_execution_status"], at)
    _grant_finalize_run(stack, f["finalize_run"], at)
    _grant_schedule_wave(stack, f["schedule_wave"], at)
    _grant_commit_lane(stack, f["commit_lane"], at)
    _grant_idle_reaper(stack, f["idle_reaper"], at)


def _planning_grants(stack: Any, fn: Any, lease_actions: list[str]) -> None:
    """What planning a run calls (control_plane.launch.prepare), for plan_run and plan_execution alike."""
    s = stack.settings
    # the run's lanes already committed are skipped (commit markers under results/)
    fn.add_to_role_policy(
        iam.PolicyStatement(
            sid="CommitMarkers", actions=["s3:GetObject"], resources=[results_arn(s, f"{RESULTS_PREFIX}/*")]
        )
    )
    fn.add_to_role_policy(list_results(s, sid="CommitMarkersList"))
    # Leases (control_plane.aws.Leases): one TransactWriteItems of conditional Puts (IAM checks each
    # item's own action: PutItem), GetItem to name the holder on refusal.
    fn.add_to_role_policy(
        iam.PolicyStatement(
            sid="Leases",
            resources=[stack.lease_table.table_arn],
            actions=["dynamodb:PutItem", "dynamodb:GetItem", *lease_actions],
        )
    )
    # A matrix run: each family's On-Demand vCPU quota (Service Quotas, the codes of pipeline.instance_types.QUOTAS;
    # AWS's default where the quota has no applied value, control_plane.quotas); the run's plan as control data,
    # control/<run_id>/plan.json.
    fn.add_to_role_policy(
        iam.PolicyStatement(sid="FleetQuotas", actions=["servicequotas:GetServiceQuota"], resources=quota_arns(stack))
    )
    fn.add_to_role_policy(
        iam.PolicyStatement(
            sid="FleetDefaultQuotas", actions=["servicequotas:GetAWSDefaultServiceQuota"], resources=["*"]
        )
    )
    fn.add_to_role_policy(
        iam.PolicyStatement(sid="FleetPlan", actions=["s3:PutObject"], resources=[results_arn(s, CONTROL_OBJECTS)])
    )
    # No ec2:DescribeInstances: this stack sets NEURONPIPE_TRN1_INSTANCE_ID and ..._INF2_... on
    # every function, so control_plane.launch resolves both boxes from the environment and the
    # fleet's tag lookup (InstanceFleet.instance_for) is never reached in the Lambda.


def _grant_plan_run(stack: Any, plan: Any, at: _Targets) -> None:
    """plan_run: start and look up the run's execution, and plan it (leases, commit markers, quotas, its plan)."""
    s = stack.settings
    plan.add_to_role_policy(
        iam.PolicyStatement(sid="StartRun", actions=["states:StartExecution"], resources=[stack.state_machine_arn])
    )
    # A run id already used is refused before anything is leased (DescribeExecution by name).
    plan.add_to_role_policy(
        iam.PolicyStatement(sid="ExistingRun", actions=["states:DescribeExecution"], resources=[at.executions])
    )
    # DeleteItem: the leases are released when the execution cannot start.
    _planning_grants(stack, plan, ["dynamodb:DeleteItem"])
    acknowledge(
        plan.role,
        "IAM5",
        "plan_run reads commit markers under results/ (keys per run and "
        "lane) to skip committed lanes, writes a matrix run's plan as control data under "
        "control/<run id>/, and checks whether the run's execution (named after the run id, not known "
        "in advance) exists.",
        [nag_results_arn(s, f"{RESULTS_PREFIX}/*"), nag_results_arn(s, CONTROL_OBJECTS), at.nag_executions],
    )


def _grant_plan_execution(stack: Any, planner: Any, at: _Targets) -> None:
    """plan_execution: the same planning, for the execution that invokes it (it starts nothing, releases nothing:
    it takes the leases last, and a refusal takes none); its plan is always kept as control data, read back on a
    retried invocation (the same bytes are its own)."""
    s = stack.settings
    _planning_grants(stack, planner, [])
    planner.add_to_role_policy(
        iam.PolicyStatement(sid="ReadOwnPlan", actions=["s3:GetObject"], resources=[results_arn(s, CONTROL_OBJECTS)])
    )
    acknowledge(
        planner.role,
        "IAM5",
        "plan_execution reads commit markers under results/ (keys per run and lane) "
        "to skip committed lanes and writes the run's plan as control data under control/<run id>/ (the "
        "execution's name, not known in advance), reading it back on a retry.",
        [nag_results_arn(s, f"{RESULTS_PREFIX}/*"), nag_results_arn(s, CONTROL_OBJECTS)],
    )


def _grant_on_command_status(stack: Any, status: Any, at: _Targets) -> None:
    """on_command_status: read the failed command, fail its task."""
    # ssm:ListCommandInvocations is not called: the function reads the failed command
    # (ListCommands / GetCommandInvocation) to recover its task token, then fails that task.
    status.add_to_role_policy(
        iam.PolicyStatement(sid="FailTask", actions=["states:SendTaskFailure"], resources=list(TASK_CALLBACK_RESOURCES))
    )
    status.add_to_role_policy(
        iam.PolicyStatement(
            sid="ReadFailedCommand", actions=["ssm:ListCommands", "ssm:GetCommandInvocation"], resources=["*"]
        )
    )


def _grant_on_execution_status(stack: Any, ended: Any, at: _Targets) -> None:
    """on_execution_status: stop the ended run's boxes, free their leases, terminate its ephemeral boxes."""
    s = stack.settings
    # an execution started with a run request: its boxes are in what its first state planned (its history)
    ended.add_to_role_policy(
        iam.PolicyStatement(
            sid="ReadEndedExecution",
            actions=["states:DescribeExecution", "states:GetExecutionHistory"],
            resources=[at.executions],
        )
    )
    ended.add_to_role_policy(
        iam.PolicyStatement(
            sid="StopProjectInstances",
            actions=["ec2:StopInstances"],
            resources=[at.instances],
            conditions=at.tag_condition,
        )
    )
    ended.add_to_role_policy(
        iam.PolicyStatement(
            sid="ReleaseLeases", resources=[at.leases], actions=["dynamodb:GetItem", "dynamodb:DeleteItem"]
        )
    )
    # the ended run's ephemeral boxes are found by their run tag and terminated (tagged ephemeral only)
    ended.add_to_role_policy(
        iam.PolicyStatement(sid="FindRunInstances", actions=["ec2:DescribeInstances"], resources=["*"])
    )
    ended.add_to_role_policy(
        iam.PolicyStatement(
            sid="TerminateEphemeralInstances",
            actions=["ec2:TerminateInstances"],
            resources=[at.instances],
            conditions=ephemeral_condition(s),
        )
    )
    acknowledge(
        ended.role,
        "IAM5",
        "StopInstances is allowed only on instances tagged for this project "
        "(the ended run's boxes come from its input), TerminateInstances only on instances tagged for "
        "this project AND ephemeral (a pinned box is never terminated); executions of the one state "
        "machine are named per run.",
        [at.nag_instances, at.nag_executions],
    )


def _grant_finalize_run(stack: Any, finalize: Any, at: _Targets) -> None:
    """finalize_run: read committed results, write the run's report."""
    s = stack.settings
    # finalize_run reads committed results and writes the run's report: nothing more.
    finalize.add_to_role_policy(read_results(s))
    finalize.add_to_role_policy(
        iam.PolicyStatement(
            sid="WriteReports", actions=["s3:PutObject"], resources=[results_arn(s, f"{REPORTS_PREFIX}*")]
        )
    )
    finalize.add_to_role_policy(list_results(s))
    # the run's judgement against its baseline: one attempt of the reserved lane, its tables and its marker only
    judgement = [
        f"{RESULTS_PREFIX}/v1/*/run_id=*/lane=baseline/*",
        f"{RESULTS_PREFIX}/v1/_commits/run_id=*/lane=baseline/*",
    ]
    finalize.add_to_role_policy(
        iam.PolicyStatement(
            sid="CommitJudgement", actions=["s3:PutObject"], resources=[results_arn(s, k) for k in judgement]
        )
    )
    # the request the run was planned from (control/<run id>/history.json, written by the planners)
    finalize.add_to_role_policy(
        iam.PolicyStatement(sid="ReadHistoryControl", actions=["s3:GetObject"], resources=[results_arn(s, "control/*")])
    )
    stack.base.alert_topic.grant_publish(finalize)
    acknowledge(
        finalize.role,
        "IAM5",
        "finalize_run reads committed results under results/, its run's request under control/, commits the run's "
        "judgement (lane=baseline) under results/v1/ and results/v1/_commits/ and writes the run's report under "
        "reports/; keys are per run and attempt, not known in advance.",
        [
            nag_results_arn(s, f"{RESULTS_PREFIX}/*"),
            nag_results_arn(s, f"{REPORTS_PREFIX}*"),
            *[nag_results_arn(s, k) for k in judgement],
            nag_results_arn(s, "control/*"),
        ],
    )


def _grant_schedule_wave(stack: Any, scheduler: Any, at: _Targets) -> None:
    """schedule_wave: read results, commit the attempts of lanes that cannot run, read and write control data."""
    s = stack.settings
    # schedule_wave reads the run's lane_runs and commit markers and commits a skipped (or a dead command's
    # failed) attempt for lanes that cannot run: objects under results/. A matrix's plan, its wave items and its
    # cells' results are control data (control/<run id>/...): read and written under their own grant.
    scheduler.add_to_role_policy(
        iam.PolicyStatement(
            sid="ReadWriteResults",
            actions=["s3:GetObject", "s3:PutObject"],
            resources=[results_arn(s, f"{RESULTS_PREFIX}/*")],
        )
    )
    scheduler.add_to_role_policy(
        iam.PolicyStatement(
            sid="ReadWriteControlData",
            actions=["s3:GetObject", "s3:PutObject"],
            resources=[results_arn(s, CONTROL_OBJECTS)],
        )
    )
    scheduler.add_to_role_policy(list_results(s))
    acknowledge(
        scheduler.role,
        "IAM5",
        "schedule_wave reads a run's committed results and commits attempts "
        "under results/ (keys per run, lane and attempt, not known in advance), and reads and writes "
        "a matrix's control data under control/<run id>/ (its plan, a wave's items and results).",
        [nag_results_arn(s, f"{RESULTS_PREFIX}/*"), nag_results_arn(s, CONTROL_OBJECTS)],
    )


def _grant_commit_lane(stack: Any, committer: Any, at: _Targets) -> None:
    """commit_lane: read a lane's proposal and what it names, write its commit marker."""
    s = stack.settings
    # commit_lane reads the box's proposed commit marker and what it names (results/v1/_proposed/, the rows),
    # lists to check them, and writes the commit marker itself: the only writer of results/v1/_commits/.
    committer.add_to_role_policy(read_results(s))
    committer.add_to_role_policy(list_results(s))
    committer.add_to_role_policy(
        iam.PolicyStatement(
            sid="WriteCommits", actions=["s3:PutObject"], resources=[results_arn(s, COMMIT_KEY_PATTERNS[0])]
        )
    )
    acknowledge(
        committer.role,
        "IAM5",
        "commit_lane reads a lane's proposed commit marker and the rows it "
        "names under results/, and writes the commit marker under results/v1/_commits/ only (create-"
        "only in the bucket policy); keys per run, lane and attempt, not known in advance.",
        [nag_results_arn(s, f"{RESULTS_PREFIX}/*"), nag_results_arn(s, COMMIT_KEY_PATTERNS[0])],
    )


def _grant_idle_reaper(stack: Any, reaper: Any, at: _Targets) -> None:
    """idle_reaper: stop idle project boxes, terminate idle ephemeral ones, read the executions."""
    s = stack.settings
    reaper.add_to_role_policy(iam.PolicyStatement(actions=["ec2:DescribeInstances"], resources=["*"]))
    reaper.add_to_role_policy(
        iam.PolicyStatement(actions=["ec2:StopInstances"], resources=[at.instances], conditions=at.tag_condition)
    )
    reaper.add_to_role_policy(
        iam.PolicyStatement(
            sid="TerminateEphemeralInstances",
            actions=["ec2:TerminateInstances"],
            resources=[at.instances],
            conditions=ephemeral_condition(s),
        )
    )
    reaper.add_to_role_policy(
        iam.PolicyStatement(actions=["states:ListExecutions"], resources=[stack.state_machine_arn])
    )
    reaper.add_to_role_policy(
        iam.PolicyStatement(
            actions=["states:DescribeExecution", "states:GetExecutionHistory"], resources=[at.executions]
        )
    )
    acknowledge(
        reaper.role,
        "IAM5",
        "StopInstances is limited to instances tagged for this project, "
        "TerminateInstances to instances tagged for this project AND ephemeral; executions of the one state "
        "machine are named per run.",
        [at.nag_instances, at.nag_executions],
    )
