"""boto3 adapters of the control plane: each takes an optional client, creating the real one when absent.

Logic (``control_plane.plan``, the handlers' logic functions, the CLI) talks to these,
never to boto3 directly, so tests pass moto-backed clients or fakes. This module imports
only botocore/boto3, the standard library, ``control_plane.lean`` and ``statemachine.build``:
the safety-net Lambdas (``idle_reaper``, ``on_execution_status``) use it without the layer.

``Leases``: one run at a time per box. A DynamoDB item per instance (``instance_id``,
``run_id``, ``execution_name``, ``taken_at``, ``expires_at`` = TTL) is taken for every box of
a plan in one transaction before the execution starts, and released by the state machine
after each stop (and by ``on_execution_status`` when an execution ends badly).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from control_plane.lean import TAG_PROJECT, TAG_ROLE
from statemachine.build import PLAN_REQUEST_STATE, TOKEN_LINE_PREFIX

if TYPE_CHECKING:  # pragma: no cover
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_ssm import SSMClient
    from mypy_boto3_stepfunctions import SFNClient


def _client(name: str, client: Any, region: str | None = None) -> Any:
    if client is not None:
        return client
    import boto3

    return boto3.client(name, region_name=region) if region else boto3.client(name)


REGION_ENV = ("AWS_REGION", "AWS_DEFAULT_REGION")
CDK_JSON = "cdk.json"


def default_region(environ: Mapping[str, str] | None = None, cdk_json: Path | None = None) -> str | None:
    """The region the CLI's AWS commands talk to when ``--region`` is not given: ``AWS_REGION``, then
    ``AWS_DEFAULT_REGION``, then the deployed app's ``context.neuronpipe.region`` in ``cdk.json`` (the
    working directory's, else this checkout's); None leaves it to boto3's own chain (profile config)."""
    env = os.environ if environ is None else environ
    for name in REGION_ENV:
        if env.get(name):
            return env[name]
    candidates = (
        [cdk_json] if cdk_json is not None else [Path.cwd() / CDK_JSON, Path(__file__).resolve().parents[1] / CDK_JSON]
    )
    for path in candidates:
        try:
            context = json.loads(path.read_text()).get("context", {})
        except (OSError, ValueError, AttributeError):
            continue
        settings = context.get("neuronpipe") if isinstance(context, dict) else None
        if isinstance(settings, str):  # `cdk -c neuronpipe='{...}'` style: a JSON string
            try:
                settings = json.loads(settings)
            except ValueError:
                settings = None
        region = settings.get("region") if isinstance(settings, dict) else None
        if isinstance(region, str) and region:
            return region
    return None


def aws_client(name: str, region: str | None = None) -> Any:
    """A boto3 client for ``name`` in ``region`` (None: boto3's default chain)."""
    return _client(name, None, region)


def _code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


class InstanceLookupError(LookupError):
    """No (or more than one) project instance for a box role."""


class RunAlreadyStartedError(RuntimeError):
    """An execution with this run id (execution name) exists already."""


class ExecutionNotFoundError(LookupError):
    """No execution with this run id."""


@dataclass(frozen=True)
class ProjectInstance:
    instance_id: str
    box_role: str | None
    state: str
    launch_time: datetime | None  # EC2 LaunchTime: set again at every start of an EBS-backed instance
    tags: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)


class InstanceFleet:
    """The project's EC2 instances, found by tag (``neuronpipe:project`` / ``neuronpipe:role``)."""

    def __init__(self, project: str, client: EC2Client | None = None):
        self.project = project
        self.client = _client("ec2", client)

    def instances(
        self, states: Iterable[str] = ("pending", "running", "stopping", "stopped"), box_role: str | None = None
    ) -> list[ProjectInstance]:
        filters = [
            {"Name": f"tag:{TAG_PROJECT}", "Values": [self.project]},
            {"Name": "instance-state-name", "Values": list(states)},
        ]
        if box_role:
            filters.append({"Name": f"tag:{TAG_ROLE}", "Values": [box_role]})
        out: list[ProjectInstance] = []
        for page in self.client.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page["Reservations"]:
                for inst in reservation["Instances"]:
                    tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
                    out.append(
                        ProjectInstance(
                            inst["InstanceId"], tags.get(TAG_ROLE), inst["State"]["Name"], inst.get("LaunchTime"), tags
                        )
                    )
        return sorted(out, key=lambda i: i.instance_id)

    def instance_for(self, box_role: str) -> str:
        """The pinned box of ``box_role`` (a matrix's ephemeral boxes are never it, whatever tags they carry)."""
        from control_plane.lean import EPHEMERAL, TAG_EPHEMERAL

        found = [i for i in self.instances(box_role=box_role) if i.tags.get(TAG_EPHEMERAL) != EPHEMERAL]
        if len(found) != 1:
            raise InstanceLookupError(
                f"expected one instance tagged {TAG_PROJECT}={self.project}, {TAG_ROLE}={box_role}; "
                f"found {len(found)}: {', '.join(i.instance_id for i in found) or 'none'}"
            )
        return found[0].instance_id

    def resolve(self, box_roles: Iterable[str], pinned: dict[str, str] | None = None) -> dict[str, str]:
        pinned = pinned or {}
        return {role: pinned.get(role) or self.instance_for(role) for role in box_roles}

    def stop(self, instance_ids: list[str]) -> None:
        if instance_ids:
            self.client.stop_instances(InstanceIds=instance_ids)

    def ephemeral(
        self, run_id: str | None = None, states: Iterable[str] = ("pending", "running", "stopping", "stopped")
    ) -> list[ProjectInstance]:
        """The project's ephemeral boxes (a matrix's cells), of one run when ``run_id`` is given."""
        from control_plane.lean import EPHEMERAL, TAG_EPHEMERAL, TAG_RUN

        return [
            i
            for i in self.instances(states=states)
            if i.tags.get(TAG_EPHEMERAL) == EPHEMERAL and (run_id is None or i.tags.get(TAG_RUN) == run_id)
        ]

    def terminate(self, instance_ids: list[str]) -> None:
        """Terminate ephemeral boxes only (a pinned box is never terminated: its compile cache volume is kept)."""
        from control_plane.lean import EPHEMERAL, TAG_EPHEMERAL

        if not instance_ids:
            return
        known = {i.instance_id: i for i in self.instances()}
        pinned = [i for i in instance_ids if i not in known or known[i].tags.get(TAG_EPHEMERAL) != EPHEMERAL]
        if pinned:
            raise ValueError(f"refusing to terminate {', '.join(pinned)}: not an ephemeral box of {self.project}")
        self.client.terminate_instances(InstanceIds=instance_ids)


class Executions:
    """Step Functions executions of the pipeline; the execution name is the run id."""

    def __init__(self, client: SFNClient | None = None):
        self.client = _client("stepfunctions", client)

    def find_state_machine(self, name: str) -> str:
        for page in self.client.get_paginator("list_state_machines").paginate():
            for sm in page["stateMachines"]:
                if sm["name"] == name:
                    return sm["stateMachineArn"]
        raise ExecutionNotFoundError(f"no state machine named {name!r} (set NEURONPIPE_STATE_MACHINE_ARN)")

    @staticmethod
    def execution_arn(state_machine_arn: str, run_id: str) -> str:
        return state_machine_arn.replace(":stateMachine:", ":execution:", 1) + ":" + run_id

    def start(self, state_machine_arn: str, run_id: str, execution_input: dict[str, Any]) -> str:
        try:
            return self.client.start_execution(
                stateMachineArn=state_machine_arn, name=run_id, input=json.dumps(execution_input)
            )["executionArn"]
        except ClientError as exc:
            if _code(exc) == "ExecutionAlreadyExists":
                raise RunAlreadyStartedError(
                    f"run {run_id} was started already: follow it with "
                    f"`neuronpipe status {run_id}`, or pick a new run id"
                ) from exc
            raise

    def status(self, state_machine_arn: str, run_id: str) -> str | None:
        """The execution's status (RUNNING, SUCCEEDED, ...), or None when there is none with this name."""
        try:
            return self.describe(self.execution_arn(state_machine_arn, run_id))["status"]
        except ExecutionNotFoundError:
            return None

    def describe(self, execution_arn: str) -> dict[str, Any]:
        try:
            return self.client.describe_execution(executionArn=execution_arn)
        except ClientError as exc:
            if _code(exc) in ("ExecutionDoesNotExist", "ResourceNotFound"):
                raise ExecutionNotFoundError(f"no execution {execution_arn}") from exc
            raise

    def history(self, execution_arn: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        try:
            for page in self.client.get_paginator("get_execution_history").paginate(executionArn=execution_arn):
                events.extend(page["events"])
        except ClientError as exc:
            if _code(exc) in ("ExecutionDoesNotExist", "ResourceNotFound"):
                raise ExecutionNotFoundError(f"no execution {execution_arn}") from exc
            raise
        return events

    def running_inputs(self, state_machine_arn: str) -> Iterator[dict[str, Any]]:
        """What every RUNNING execution runs (what the idle reaper must not touch): :meth:`plan_input`."""
        paginator = self.client.get_paginator("list_executions")
        for page in paginator.paginate(stateMachineArn=state_machine_arn, statusFilter="RUNNING"):
            for ex in page["executions"]:
                arn = ex["executionArn"]
                yield self.plan_input(
                    arn, json.loads(self.client.describe_execution(executionArn=arn).get("input") or "{}")
                )

    def plan_input(self, execution_arn: str, execution_input: Any) -> dict[str, Any]:
        """What an execution runs: its input when it was started with a plan; when it was started with a run request,
        the execution input its first state planned (read from the start of its history: :func:`planned_input`),
        or the request itself until it has planned (and when it was refused: it runs nothing)."""
        given = execution_input if isinstance(execution_input, dict) else {}
        if is_plan_input(given) or input_instance_ids(given):
            return given
        try:
            events = self.client.get_execution_history(executionArn=execution_arn, maxResults=PLANNED_WITHIN_EVENTS)[
                "events"
            ]
        except ClientError as exc:
            if _code(exc) in ("ExecutionDoesNotExist", "ResourceNotFound"):
                return given
            raise
        return planned_input(events) or given


class BoxesLeasedError(RuntimeError):
    """Another run holds the lease on a box this run needs."""


@dataclass(frozen=True)
class Lease:
    instance_id: str
    run_id: str
    execution_name: str
    taken_at: str
    expires_at: int

    def live(self, now: datetime) -> bool:
        return self.expires_at >= int(now.timestamp())

    @property
    def expires_iso(self) -> str:
        return datetime.fromtimestamp(self.expires_at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Leases:
    """Box leases in DynamoDB (table ``<state machine name>-leases``, partition key ``instance_id``)."""

    CONDITION = "attribute_not_exists(instance_id) OR expires_at < :now OR run_id = :run_id"

    def __init__(self, table: str, client: DynamoDBClient | None = None):
        self.table = table
        self.client = _client("dynamodb", client)

    def take(
        self,
        instance_ids: Iterable[str],
        run_id: str,
        ttl_s: float,
        now: datetime | None = None,
        execution_name: str | None = None,
    ) -> list[Lease]:
        """Take every box's lease in one transaction; :class:`BoxesLeasedError` names the holders."""
        now = now or datetime.now(timezone.utc)
        ids = sorted(set(instance_ids))
        if not ids:
            return []
        taken_at = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        expires = int(now.timestamp() + ttl_s)
        leases = [Lease(i, run_id, execution_name or run_id, taken_at, expires) for i in ids]
        items = [
            {
                "Put": {
                    "TableName": self.table,
                    "Item": {
                        "instance_id": {"S": lease.instance_id},
                        "run_id": {"S": run_id},
                        "execution_name": {"S": lease.execution_name},
                        "taken_at": {"S": taken_at},
                        "expires_at": {"N": str(expires)},
                    },
                    "ConditionExpression": self.CONDITION,
                    "ExpressionAttributeValues": {":now": {"N": str(int(now.timestamp()))}, ":run_id": {"S": run_id}},
                }
            }
            for lease in leases
        ]
        try:
            self.client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if _code(exc) not in ("TransactionCanceledException", "ConditionalCheckFailedException"):
                raise
            held = [h for h in self.holders(ids).values() if h.run_id != run_id and h.live(now)]
            if not held:  # lost a race with a lease that has since gone: say so rather than guess
                raise BoxesLeasedError(
                    f"boxes leased: {', '.join(ids)} changed hands while run {run_id} was taking them; try again"
                ) from exc
            raise BoxesLeasedError(
                "boxes leased: "
                + "; ".join(f"{h.instance_id} held by run {h.run_id} until {h.expires_iso}" for h in held)
                + "; wait for it or stop it"
            ) from exc
        return leases

    def holders(self, instance_ids: Iterable[str]) -> dict[str, Lease]:
        """The current lease item of each box that has one (expired or not)."""
        out: dict[str, Lease] = {}
        for iid in sorted(set(instance_ids)):
            item = self.client.get_item(TableName=self.table, Key={"instance_id": {"S": iid}}, ConsistentRead=True).get(
                "Item"
            )
            if item:
                out[iid] = Lease(
                    iid,
                    item.get("run_id", {}).get("S", ""),
                    item.get("execution_name", {}).get("S", ""),
                    item.get("taken_at", {}).get("S", ""),
                    int(item.get("expires_at", {}).get("N", "0")),
                )
        return out

    def release(self, instance_ids: Iterable[str], run_id: str) -> list[str]:
        """Delete the leases this run holds (another run's lease is left alone); the ids released."""
        released = []
        for iid in sorted(set(instance_ids)):
            try:
                self.client.delete_item(
                    TableName=self.table,
                    Key={"instance_id": {"S": iid}},
                    ConditionExpression="run_id = :run",
                    ExpressionAttributeValues={":run": {"S": run_id}},
                )
                released.append(iid)
            except ClientError as exc:
                if _code(exc) != "ConditionalCheckFailedException":
                    raise
        return released


class TaskCallbacks:
    """Closing a waiting task from outside the box (command failed, timed out, cancelled)."""

    CLOSED_CODES = frozenset({"TaskDoesNotExist", "TaskTimedOut", "InvalidToken"})

    def __init__(self, client: SFNClient | None = None):
        self.client = _client("stepfunctions", client)

    def fail(self, task_token: str, error: str, cause: str) -> bool:
        """SendTaskFailure; False when the task was already closed (the agent called back first)."""
        try:
            self.client.send_task_failure(taskToken=task_token, error=error[:256], cause=cause[:32768])
            return True
        except ClientError as exc:
            if _code(exc) in self.CLOSED_CODES:
                return False
            raise


_TOKEN_RE = re.compile("^" + re.escape(TOKEN_LINE_PREFIX) + r"\"?([^\"\s]+)\"?\s*$")


def token_from_commands(commands: Iterable[str]) -> str | None:
    """The task token the state machine put as the first line of an AWS-RunShellScript command."""
    for line in commands:
        for part in str(line).splitlines():
            m = _TOKEN_RE.match(part.strip())
            if m:
                return m.group(1)
    return None


@dataclass(frozen=True)
class CommandRecord:
    command_id: str
    comment: str
    task_token: str | None
    output_uri: str | None


class Commands:
    """SSM commands: the token and the output location of a command the pipeline sent."""

    def __init__(self, client: SSMClient | None = None):
        self.client = _client("ssm", client)

    def record(self, command_id: str) -> CommandRecord | None:
        found = self.client.list_commands(CommandId=command_id).get("Commands", [])
        if not found:
            return None
        cmd = found[0]
        bucket, prefix = cmd.get("OutputS3BucketName"), cmd.get("OutputS3KeyPrefix")
        return CommandRecord(
            command_id,
            cmd.get("Comment", ""),
            token_from_commands(cmd.get("Parameters", {}).get("commands", [])),
            f"s3://{bucket}/{prefix}/{command_id}/" if bucket else None,
        )

    def error_tail(self, command_id: str, instance_id: str, limit: int = 4000) -> str:
        """The end of the command's stderr (the full output is in S3 and CloudWatch)."""
        try:
            inv = self.client.get_command_invocation(CommandId=command_id, InstanceId=instance_id)
        except ClientError:
            return ""
        return (inv.get("StandardErrorContent") or inv.get("StandardOutputContent") or "")[-limit:]


# A presigned link to a run's REPORT.html lives this long: long enough to open and share in a meeting, short
# enough that a pasted link stops working the same day (the page holds every number of the run).
REPORT_URL_EXPIRY_S = 3600
REPORT_PAGE = "REPORT.html"
# Each report file is stored with its type, so a presigned link opens the page (S3 answers a GET with the type the
# object was stored with; without one it says binary/octet-stream and the browser downloads a file).
REPORT_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".md": "text/markdown; charset=utf-8",
    ".json": "application/json",
    ".png": "image/png",
    ".csv": "text/csv; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
}
UNKNOWN_CONTENT_TYPE = "application/octet-stream"


def report_content_type(name: str) -> str:
    """The Content-Type a report file is stored with (by its suffix; an unknown one is a download)."""
    return REPORT_CONTENT_TYPES.get(Path(name).suffix.lower(), UNKNOWN_CONTENT_TYPE)


@dataclass(frozen=True)
class ReportLink:
    """A presigned GET of one report file: where it is, the URL and when the URL stops working."""

    uri: str
    url: str
    expires_in_s: int
    expires_at: datetime

    def line(self) -> str:
        hours = self.expires_in_s / 3600
        span = f"{hours:g} h" if self.expires_in_s % 3600 == 0 else f"{self.expires_in_s} s"
        return (
            f"{self.uri.rsplit('/', 1)[-1]} (presigned, expires in {span}, at "
            f"{self.expires_at.strftime('%Y-%m-%d %H:%M UTC')}): {self.url}"
        )


class ReportBucket:
    """Writes a run's report files under ``<prefix>/<run_id>/`` in the results bucket, and links to them."""

    def __init__(self, bucket: str, prefix: str = "reports", client: S3Client | None = None, region: str | None = None):
        self.bucket, self.prefix = bucket, prefix.strip("/")
        if client is None:  # SigV4 for the presigned links: every region takes it (SigV2 only the oldest)
            import boto3
            from botocore.config import Config

            client = boto3.client("s3", region_name=region, config=Config(signature_version="s3v4"))
        self.client = client

    @classmethod
    def for_results(
        cls, results_uri: str, prefix: str = "reports", client: S3Client | None = None, region: str | None = None
    ) -> ReportBucket:
        """The reports beside an ``s3://bucket/...`` results root (the finalize Lambda writes both in one bucket)."""
        return cls(results_uri.removeprefix("s3://").split("/", 1)[0], prefix, client, region)

    def key(self, run_id: str, name: str) -> str:
        return f"{self.prefix}/{run_id}/{name}"

    def presigned(
        self, run_id: str, name: str = REPORT_PAGE, expires_in_s: int = REPORT_URL_EXPIRY_S, now: datetime | None = None
    ) -> ReportLink | None:
        """A presigned GET of ``<prefix>/<run_id>/<name>``; None when the bucket has no such file (yet)."""
        key = self.key(run_id, name)
        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if _code(exc) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        url = self.client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=expires_in_s
        )
        start = now or datetime.now(timezone.utc)
        return ReportLink(f"s3://{self.bucket}/{key}", url, expires_in_s, start + timedelta(seconds=expires_in_s))

    def upload(self, run_id: str, paths: Iterable[Path]) -> list[str]:
        uris = []
        for path in sorted(Path(p) for p in paths):
            key = self.key(run_id, path.name)
            self.client.upload_file(
                str(path), self.bucket, key, ExtraArgs={"ContentType": report_content_type(path.name)}
            )
            uris.append(f"s3://{self.bucket}/{key}")
        return uris


# An execution that plans itself has planned within its first events (its choice, the planning task's four events).
PLANNED_WITHIN_EVENTS = 100


def is_plan_input(execution_input: Any) -> bool:
    """An execution input that is a plan (its waves and its digest), as the state machine's first Choice tells it
    from a run request (which can have neither)."""
    return isinstance(execution_input, dict) and "waves" in execution_input and "plan_digest" in execution_input


def planned_input(events: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The execution input a run request was planned into, from an execution's history: the answer the
    ``PlanRequest`` state (``statemachine.build.PLAN_REQUEST_STATE``) left when it planned; None before, or when the
    request was refused."""
    for event in events:
        details = event.get("stateExitedEventDetails") or {}
        if details.get("name") != PLAN_REQUEST_STATE:
            continue
        try:
            output = json.loads(details.get("output") or "{}")
        except json.JSONDecodeError:
            return None
        answer = output.get("answer") if isinstance(output, dict) else None
        if isinstance(answer, dict) and answer.get("outcome") == "planned" and isinstance(answer.get("input"), dict):
            return answer["input"]
        return None
    return None


def input_instance_ids(execution_input: Any) -> list[str]:
    """The instance ids a run's execution input names: its ``boxes``, its waves' segments, and (executions
    started before waves) its ``phases``; stdlib only (on_execution_status and idle_reaper use it)."""
    if not isinstance(execution_input, dict):
        return []
    items: list[Any] = list(execution_input.get("boxes") or []) + list(execution_input.get("phases") or [])
    for wave in execution_input.get("waves") or []:
        items += list(wave.get("segments") or []) if isinstance(wave, dict) else []
    return sorted({i["instance_id"] for i in items if isinstance(i, dict) and isinstance(i.get("instance_id"), str)})
