"""The rehearsal put together: world, deployment, IAM, boxes, agents, Lambdas, bus; then a run from request to report.

:class:`Rehearsal` is a context manager (everything it starts it stops); ``neuronpipe rehearse`` drives one.
Fault tests drive a :class:`Rehearsal` directly (``hooks`` and ``box_env`` let them inject failures).

IAM (``enforce_iam``, on by default): the deployment runs as the deployer (no enforcement); then every actor
of the synthesized app gets a moto IAM user holding its role's policy documents (:mod:`rehearsal.iam`)
and enforcement starts, before the boxes' first boot. Each actor calls AWS with its own key: a box through its
loopback IMDS (``iam/security-credentials/<role>``, empty Token), the SSM agent's output upload with the box's
key, each Lambda worker through its environment, the state machine with the key moto's ASL interpreter signs
with (:data:`~rehearsal.iam.MOTO_SFN_KEY`), ``operator`` (admin) for what the CLI does (``start``,
``follow``, ``pull``), and ``rehearsal`` (admin, the default key of :meth:`MotoWorld.client`) for the
rehearsal's own inspection (execution watcher, history, instance states). Every call is recorded
(``rehearsal.iam``); a denial fails the rehearsal: leaving the context raises :class:`IamDenialsError` naming
action, actor and the missing statement. The state machine's Tasks are also checked statically.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rehearsal.boxes import Box, BoxIdentity
from rehearsal.bus import EventBus, ExecutionWatcher
from rehearsal.cfn import Assembly, load_assembly, synth_assembly
from rehearsal.deployment import Deployment, deploy
from rehearsal.iam import (
    ADMIN_POLICY,
    MOTO_SFN_KEY,
    AccessKey,
    Actor,
    AslCall,
    Decision,
    IamDeniedError,
    IamEnforcement,
    IamModel,
    IamRecorder,
    PolicyDoc,
    check_state_machine,
    iam_model,
    provision,
)
from rehearsal.lambdas import LambdaFleet, LambdaFunction, build_layer, environment_for
from rehearsal.service_calls import ServiceCall, check_service_calls, service_calls
from rehearsal.ssm_agent import SsmAgents
from rehearsal.world import ACCOUNT_ID, TEST_CREDENTIALS, Credentials, MotoWorld

DEFAULT_BUILD_DIR = Path("build") / "rehearsal"
OPERATOR = "operator"
REHEARSAL_ACTOR = "rehearsal"  # the rehearsal's own inspection; its key is TEST_CREDENTIALS (world.client's default)
FLEET_ACTOR = "box:fleet"  # every ephemeral box (rehearsal.iam)


class RehearsalError(RuntimeError):
    """The rehearsal could not set AWS up (synth, deploy, first boot): the message says where."""


class IamDenialsError(RehearsalError):
    """An actor was denied a call during the rehearsal, or the state machine's ASL calls something its role
    does not allow: one line per (actor, action, resource)."""

    def __init__(self, denials: list[IamDeniedError]):
        seen: dict[tuple[str, str, str | None], IamDeniedError] = {}
        for d in denials:
            seen.setdefault((d.actor, d.action, d.resource), d)
        super().__init__(f"IAM denied {len(seen)} distinct call(s):\n" + "\n".join(f"  {d}" for d in seen.values()))
        self.denials = list(seen.values())


def cached_assembly(build_dir: Path, log: Callable[[str], None] = lambda s: None) -> Assembly:
    """The synthesized app, once per harness sha (a dirty tree is synthesized afresh)."""
    from infra.bundling import git_sha

    sha = git_sha()
    outdir = build_dir / f"cdk.out-{sha[:12]}"
    dirty = sha.endswith("-dirty") or sha == "unknown"
    if dirty or not (outdir / "manifest.json").is_file():
        log(f"synthesizing the CDK app ({sha[:12]}) ...")
        os.environ.pop("CDK_CONTEXT_JSON", None)
        import shutil
        import tempfile

        # Every process synthesizes privately: two test workers reach their first rehearsal together, and one
        # must never load a template or an asset another is still writing (a half-written role policy read as a
        # denial). A clean tree's assembly is then published with one rename and shared; a dirty tree's stays this
        # process's and goes with it (it was synthesized into the shared directory, where two workers on an edited
        # tree could rewrite each other's assets).
        build_dir.mkdir(parents=True, exist_ok=True)
        private = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.", dir=build_dir))
        if dirty:
            import atexit

            atexit.register(shutil.rmtree, private, ignore_errors=True)
            return _synth(private)
        _synth(private)
        try:
            os.rename(private, outdir)
        except OSError:  # another process published it first: use theirs
            shutil.rmtree(private, ignore_errors=True)
    return load_assembly(outdir)


def _synth(outdir: Path) -> Assembly:
    from infra.app import SynthFailedError

    try:
        return synth_assembly(outdir)
    except SynthFailedError:  # cdk-nag findings fail `make synth`; the templates are written all the same
        return load_assembly(outdir)


@dataclass
class Rehearsal:
    workdir: Path
    build_dir: Path = DEFAULT_BUILD_DIR
    boot_delay_s: float = 2.0
    log: Callable[[str], None] = print
    box_env: dict[str, str] = field(default_factory=dict)  # extra variables for every box process
    # (box role, user data) -> the user data the box boots with: the acceptance test renders an old script form
    user_data_hook: Callable[[str, str], str] | None = None
    assembly: Assembly | None = None
    # actor name ("box:trn1", "lambda:plan_run", "operator") -> its credentials; None: the provisioned key of
    # the actor with enforce_iam, TEST_CREDENTIALS without
    credentials_for: Callable[[str], Credentials] | None = None
    world: MotoWorld = field(default_factory=MotoWorld)
    deployment: Deployment | None = None
    boxes: dict[str, Box] = field(default_factory=dict)  # instance id -> box
    agents: SsmAgents | None = None
    fleet: LambdaFleet = field(default_factory=LambdaFleet)
    bus: EventBus | None = None
    watcher: ExecutionWatcher | None = None
    timings: dict[str, float] = field(default_factory=dict)
    boot_errors: list[str] = field(default_factory=list)
    # the fleet: instance types EC2 refuses for capacity in every AZ, and how many TerminateInstances calls fail
    # before one succeeds (per instance); the boxes a matrix launched (instance id -> box), ended or not
    refuse_capacity: set[str] = field(default_factory=set)
    terminate_failures: int = 0
    # Service Quotas, emulated (moto has no EC2 quotas): quota code -> vCPUs; absent codes answer the default
    quota_vcpus: dict[str, float] = field(default_factory=dict)
    launched: dict[str, Box] = field(default_factory=dict)
    # what the deployment's SNS topics published (the alert topic's announcements): topic ARN -> its capture queue,
    # and every message read from them so far ({"topic", "subject", "message"})
    topic_capture: dict[str, str] = field(default_factory=dict)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    launch_log: list[dict[str, Any]] = field(default_factory=list)  # every RunInstances call, refused or not
    _terminate_attempts: dict[str, int] = field(default_factory=dict)
    enforce_iam: bool = True
    iam: IamRecorder | None = None  # every call of every actor (enforce_iam)
    iam_model: IamModel | None = None
    iam_keys: dict[str, AccessKey] = field(default_factory=dict)
    iam_static: list[tuple[AslCall, Decision]] = field(default_factory=list)  # the ASL's Tasks, checked
    iam_service: list[tuple[ServiceCall, Decision]] = field(default_factory=list)  # AWS's calls with the roles
    _enforcement: IamEnforcement | None = None
    _closed: bool = False

    # -- set up ------------------------------------------------------------------------------------
    def __enter__(self) -> Rehearsal:
        t0 = time.monotonic()
        assembly = self.assembly or cached_assembly(self.build_dir, self.log)
        self.timings["synth_s"] = time.monotonic() - t0
        self.world.start()
        try:
            self._setup(assembly)
        except BaseException as exc:
            self._close()
            denials = self.iam_denials()
            if denials and isinstance(exc, Exception):
                raise IamDenialsError(denials) from exc
            raise
        return self

    def _setup(self, assembly: Assembly) -> None:
        t0 = time.monotonic()
        self.deployment = dep = deploy(self.world, assembly, self.workdir)
        self.timings["deploy_s"] = time.monotonic() - t0
        self._capture_topics(dep)
        if self.enforce_iam:
            self._enforce_iam(dep)
        layer = build_layer(self.build_dir.resolve() / "layer")
        for module, fn in dep.functions.items():
            creds = self.credentials(f"lambda:{module}")
            self.fleet.add(
                LambdaFunction(
                    name=fn.name,
                    arn=fn.arn,
                    handler=fn.handler,
                    code_dir=fn.code_dir,
                    layer_dir=layer,
                    environment=environment_for(fn.environment, self.world.client_env(creds)),
                    timeout_s=fn.timeout_s,
                    memory_mb=fn.memory_mb,
                    log_path=self.workdir / "lambda" / f"{module}.log",
                )
            )
        (self.workdir / "lambda").mkdir(parents=True, exist_ok=True)
        by_logical = {fn.logical_id: fn.name for fn in dep.functions.values()}
        self.bus = EventBus(dep.rules, lambda lid, payload: self.fleet.functions[by_logical[lid]].invoke(payload))
        self.world.hooks.invoke_lambda = self.fleet.invoke_hook
        self.world.hooks.events_put = self.bus.put_events_hook
        self.world.hooks.s3_event = self.bus.publish
        self.agents = SsmAgents(self.world.region, lambda c: self.world.client("s3", c), self.bus.publish)
        self.world.hooks.send_command = self.agents.check_send
        self.world.hooks.command_sent = self.agents.accept
        self.world.hooks.instances_started = self._started
        self.world.hooks.instances_stopped = self._stopped
        self.world.hooks.run_instances = self._run_instances
        self.world.hooks.instances_launched = self._launched
        self.world.hooks.terminate_instances = self._terminate_check
        self.world.hooks.instances_terminated = self._terminated
        for role, rec in dep.instances.items():
            box = Box(
                BoxIdentity(
                    rec.instance_id,
                    role,
                    rec.instance_type,
                    rec.ami_id,
                    self.world.region,
                    rec.availability_zone,
                    rec.iam_role,
                ),
                root=self.workdir / "boxes" / role,
                endpoint_url=self.world.endpoint,
                credentials_for=lambda actor=f"box:{role}": self.credentials(actor),
                extra_env=dict(self.box_env),
            )
            box.prepare()
            self.boxes[rec.instance_id] = box
            self.agents.add_host(box)
        self._first_boot()
        self.watcher = ExecutionWatcher(
            self.world.client("stepfunctions"), dep.state_machine_arn, self.world.region, self.bus.publish
        ).start()

    def _capture_topics(self, dep: Deployment) -> None:
        """Subscribe one SQS queue to each SNS topic of the deployment: the rehearsal's record of what was
        published (an e-mail subscriber, on AWS)."""
        sns, sqs = self.world.client("sns"), self.world.client("sqs")
        for i, arn in enumerate(sorted(dep.topics.values())):
            url = sqs.create_queue(QueueName=f"rehearsal-topic-capture-{i}")["QueueUrl"]
            queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue_arn)
            self.topic_capture[arn] = url

    def read_notifications(self) -> list[dict[str, Any]]:
        """Every message published to the deployment's topics so far (read from the capture queues, kept)."""
        sqs = self.world.client("sqs")
        for arn, url in self.topic_capture.items():
            while msgs := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
                for m in msgs:
                    body = json.loads(m["Body"])
                    self.notifications.append(
                        {"topic": arn, "subject": body.get("Subject"), "message": body.get("Message")}
                    )
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        return list(self.notifications)

    def _first_boot(self) -> None:
        """Each instance runs its user data once (harness installed from the bucket), then stops itself."""
        t0 = time.monotonic()
        errors: list[str] = []

        def one(box: Box) -> None:
            try:
                role = box.identity.box_role
                text = self.deployment.instances[role].user_data
                out = box.first_boot(self.user_data_hook(role, text) if self.user_data_hook else text)
                (box.root / "var/log/rehearsal-first-boot.out").write_text(out)
            except Exception as exc:  # noqa: BLE001 - a box's first boot failing is reported with the others'
                errors.append(str(exc))

        threads = [threading.Thread(target=one, args=(b,)) for b in self.boxes.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.timings["first_boot_s"] = time.monotonic() - t0
        if errors:
            raise RehearsalError("first boot failed:\n" + "\n".join(errors))
        # `shutdown -h` at the end of the user data: the instance stops itself (no API call, no actor)
        self.world.backend("ec2").stop_instances(list(self.boxes))

    # -- IAM ---------------------------------------------------------------------------------------
    def _enforce_iam(self, dep: Deployment) -> None:
        """Users and keys for every actor (as the deployer), the static ASL check, then enforcement on."""
        model = iam_model(dep.assembly, dep.resolver)
        model.actors[REHEARSAL_ACTOR] = Actor(
            REHEARSAL_ACTOR, "operator", REHEARSAL_ACTOR, (PolicyDoc("Admin", REHEARSAL_ACTOR, ADMIN_POLICY),)
        )
        machine = model.actors.get(f"state-machine:{dep.state_machine_arn.rsplit(':', 1)[-1]}")
        missing = [
            a
            for a in [*(f"lambda:{m}" for m in dep.functions), *(f"box:{r}" for r in dep.instances)]
            if a not in model.actors
        ] + ([] if machine else ["the state machine"])
        if missing:
            raise RehearsalError(f"IAM: no modelled role for {', '.join(missing)}: " + "; ".join(model.notes))
        fixed = {
            machine.name: MOTO_SFN_KEY,
            REHEARSAL_ACTOR: (TEST_CREDENTIALS.access_key_id, TEST_CREDENTIALS.secret_access_key),
        }
        self.iam_keys = provision(model, self.world.client("iam"), fixed_keys=fixed, account=ACCOUNT_ID)
        self.iam_model = model
        self.iam_static = check_state_machine(
            machine,
            dep.state_machine_definition,
            {},
            region=self.world.region,
            account=ACCOUNT_ID,
        )
        self.iam_service = check_service_calls(model, service_calls(dep, self.world.region, ACCOUNT_ID))
        self._enforcement = IamEnforcement(model, self.iam_keys).__enter__()
        self.iam = self._enforcement.recorder

    def credentials(self, actor: str) -> Credentials:
        """The credentials ``actor`` calls AWS with (its provisioned key while IAM is enforced)."""
        if self.credentials_for is not None:
            return self.credentials_for(actor)
        if not self.enforce_iam:
            return TEST_CREDENTIALS
        key = self.iam_keys.get(actor)
        if key is None:
            raise RehearsalError(f"IAM: {actor} is not an actor of the deployed app")
        return Credentials(key.access_key_id, key.secret_access_key)

    def iam_denials(self) -> list[IamDeniedError]:
        """Every denial so far: the run's, then the static checks' (the state machine's Tasks, the calls AWS
        makes with the roles: Lambda logs and tracing, the SSM agent's own)."""
        live = list(self.iam.denials) if self.iam else []
        machine = next(
            (a for a in (self.iam_model.actors.values() if self.iam_model else []) if a.kind == "state_machine"), None
        )
        static = (
            [
                IamDeniedError(machine.name, c.action, c.resource, machine.role, d.denied_by)
                for c, d in self.iam_static
                if not d.allowed
            ]
            if machine
            else []
        )
        roles = self.iam_model.actors if self.iam_model else {}
        service = [
            IamDeniedError(c.actor, c.action, c.resource, roles[c.actor].role if c.actor in roles else "?", d.denied_by)
            for c, d in self.iam_service
            if not d.allowed
        ]
        return live + static + service

    def raise_if_denied(self) -> None:
        denials = self.iam_denials()
        if denials:
            raise IamDenialsError(denials)

    # -- instance lifecycle (hooks) -----------------------------------------------------------------
    def _started(self, instance_ids: list[str]) -> None:
        for iid in instance_ids:
            box = self.boxes.get(iid)
            if box is not None:
                threading.Thread(target=self._boot, args=(box,), daemon=True, name=f"boot-{iid}").start()

    def _boot(self, box: Box) -> None:
        t0 = time.monotonic()
        try:
            box.boot()
        except Exception as exc:  # noqa: BLE001 - the box is up but its per-boot setup failed: the sync will say so
            self.boot_errors.append(str(exc))
        time.sleep(max(0.0, self.boot_delay_s - (time.monotonic() - t0)))
        if self._state(box.instance_id) in ("running", "pending"):
            self.agents.register(box.instance_id)

    def _stopped(self, instance_ids: list[str]) -> None:
        for iid in instance_ids:
            if iid in self.boxes:
                self.agents.kill(iid, "instance stopped")

    # -- the fleet: ephemeral boxes launched by the state machine ----------------------------------
    def _run_instances(self, call: dict[str, Any]) -> None:
        from rehearsal.world import AwsError

        az = self._subnet_az(call.get("subnet_id"))
        refused = call.get("instance_type") in self.refuse_capacity
        self.launch_log.append({**call, "availability_zone": az, "refused": refused, "at": time.time()})
        if refused:
            raise AwsError(
                "InsufficientInstanceCapacity",
                f"We currently do not have sufficient {call.get('instance_type')} capacity in the "
                f"Availability Zone you requested ({az}).",
                status=500,
            )

    def _subnet_az(self, subnet_id: str | None) -> str | None:
        if not subnet_id:
            return None
        try:
            return self.world.client("ec2").describe_subnets(SubnetIds=[subnet_id])["Subnets"][0]["AvailabilityZone"]
        except Exception:  # noqa: BLE001 - a log field only
            return None

    def _template_for(self, instance_type: str) -> Any:
        for rec in (getattr(self.deployment, "launch_templates", None) or {}).values():
            if rec.instance_type == instance_type:
                return rec
        raise RehearsalError(f"no launch template deployed for {instance_type}")

    def _fleet_actor(self, iam_role: str) -> str:
        """Every ephemeral box calls AWS as ``box:fleet`` (rehearsal.iam: the fleet's one box role)."""
        if self.enforce_iam and self.iam_model is not None and FLEET_ACTOR not in self.iam_model.actors:
            raise RehearsalError(f"IAM: no modelled actor {FLEET_ACTOR} for the fleet box role {iam_role}")
        return FLEET_ACTOR

    def _launched(self, instance_ids: list[str]) -> None:
        """A cell's box: a sandbox of its own, its SSM agent registered at once (as a DLAMI's registers while
        cloud-init runs), then its first boot runs the launch template's user data in the background; the cell's
        sync waits for the boot's marker."""
        ec2 = self.world.backend("ec2")
        for iid in instance_ids:
            inst = ec2.get_instance(iid)
            rec = self._template_for(inst.instance_type)
            actor = self._fleet_actor(rec.iam_role)
            box = Box(
                BoxIdentity(
                    iid,
                    rec.box_role,
                    inst.instance_type,
                    inst.image_id,
                    self.world.region,
                    inst.availability_zone or "",
                    rec.iam_role,
                ),
                root=self.workdir / "boxes" / f"fleet-{iid}",
                endpoint_url=self.world.endpoint,
                credentials_for=lambda actor=actor: self.credentials(actor),
                extra_env=dict(self.box_env),
            )
            self.launched[iid] = box
            self.boxes[iid] = box
            threading.Thread(
                target=self._first_boot_ephemeral, args=(box, rec.user_data), daemon=True, name=f"first-boot-{iid}"
            ).start()

    def _first_boot_ephemeral(self, box: Box, user_data: str) -> None:
        try:
            box.prepare()
            self.agents.add_host(box)
            self.agents.register(box.instance_id)
            out = box.first_boot(user_data)
            (box.root / "var/log/rehearsal-first-boot.out").write_text(out)
        except Exception as exc:  # noqa: BLE001 - the cell's sync fails waiting for the boot: it says so
            self.boot_errors.append(f"{box.instance_id}: {exc}")

    def _terminate_check(self, instance_ids: list[str]) -> None:
        from rehearsal.world import AwsError

        for iid in instance_ids:
            n = self._terminate_attempts[iid] = self._terminate_attempts.get(iid, 0) + 1
            if n <= self.terminate_failures:
                raise AwsError(
                    "InternalError",
                    f"rehearsal: TerminateInstances of {iid} fails ({n} of {self.terminate_failures})",
                    status=500,
                )

    def _terminated(self, instance_ids: list[str]) -> None:
        for iid in instance_ids:
            if iid in self.boxes:
                self.agents.kill(iid, "instance terminated")
                self.agents.deregister(iid)

    def fleet_running(self) -> list[str]:
        """Ephemeral boxes not terminated (what the fault cases count: 0)."""
        return [iid for iid in list(self.launched) if self._state(iid) not in ("terminated", "shutting-down")]

    def _state(self, instance_id: str) -> str:
        res = self.world.client("ec2").describe_instances(InstanceIds=[instance_id])["Reservations"]
        return res[0]["Instances"][0]["State"]["Name"]

    def running_boxes(self) -> list[str]:
        """Every box, pinned or launched, left pending, running or stopping."""
        return [iid for iid in list(self.boxes) if self._state(iid) in ("pending", "running", "stopping")]

    # -- a run -------------------------------------------------------------------------------------
    def operator(self) -> Credentials:
        return self.credentials(OPERATOR)

    def settings(self) -> Any:
        from control_plane.settings import ControlPlaneSettings

        env = next(iter(self.deployment.functions.values())).environment
        fields = {k.removeprefix("NEURONPIPE_").lower(): v for k, v in env.items() if k.startswith("NEURONPIPE_")}
        return ControlPlaneSettings(
            **{k: v for k, v in fields.items() if k in ControlPlaneSettings.model_fields}, poll_s=1.0
        )  # follow's: moto serializes the whole history at each poll

    def start(self, request: Any, run_id: str) -> Any:
        from control_plane.aws import Executions, InstanceFleet, Leases
        from control_plane.launch import committed_in_store, launch

        settings = self.settings()
        op = self.operator()
        from control_plane.quotas import ServiceQuotas

        return launch(
            request,
            run_id,
            settings,
            fleet=InstanceFleet(settings.project, self.world.client("ec2", op)),
            executions=Executions(self.world.client("stepfunctions", op)),
            committed=committed_in_store(settings.results_uri, self.world.client("s3", op)),
            leases=Leases(settings.lease_table, self.world.client("dynamodb", op)),
            quotas=ServiceQuotas(EmulatedQuotas(self.quota_vcpus)),
            s3_client=self.world.client("s3", op),
        )

    def follow(self, execution_arn: str, on_progress: Callable[[Any], None], deadline_s: float = 3600) -> Any:
        from analytics.store import open_store
        from control_plane.aws import Executions
        from control_plane.progress import CommittedLanes, follow

        end = time.monotonic() + deadline_s

        def sleep(s: float) -> None:
            if time.monotonic() > end:
                raise TimeoutError(f"execution {execution_arn} did not end within {deadline_s:.0f} s")
            time.sleep(s)

        settings = self.settings()
        store = open_store(settings.results_uri or "", self.world.client("s3", self.operator()))
        return follow(
            Executions(self.world.client("stepfunctions", self.operator())),
            execution_arn,
            settings.poll_s,
            on_progress,
            sleep=sleep,
            committed=CommittedLanes(store),
        )

    def history(self, execution_arn: str) -> list[dict[str, Any]]:
        from control_plane.aws import Executions

        return Executions(self.world.client("stepfunctions")).history(execution_arn)

    def settle(self, timeout_s: float = 60.0) -> None:
        """Let the end-of-run events reach their Lambdas (execution status -> on_execution_status)."""
        if self.watcher:
            self.watcher.poll_once()
        if self.bus:
            self.bus.drain(timeout_s)

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._close()
        if exc_type is None:
            self.raise_if_denied()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.watcher:
            self.watcher.stop()
        if self.agents:
            self.agents.close()
        self.fleet.close()
        for box in self.boxes.values():
            box.close()
        if self._enforcement is not None:
            self._enforcement.__exit__(None, None, None)
            self._enforcement = None
        self.world.stop()


class EmulatedQuotas:
    """Service Quotas for EC2, as the rehearsal states them (moto implements none): every EC2 On-Demand vCPU quota
    answers :data:`EMULATED_QUOTA_VCPUS` unless the rehearsal sets its code (``Rehearsal.quota_vcpus``)."""

    def __init__(self, values: dict[str, float]):
        self.values = values

    def get_service_quota(self, ServiceCode: str, QuotaCode: str) -> dict[str, Any]:  # boto3's names
        return {
            "Quota": {
                "ServiceCode": ServiceCode,
                "QuotaCode": QuotaCode,
                "Value": float(self.values.get(QuotaCode, EMULATED_QUOTA_VCPUS)),
            }
        }


EMULATED_QUOTA_VCPUS = 256.0


def read_object(rehearsal: Rehearsal, bucket: str, key: str) -> bytes:
    return rehearsal.world.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()


def command_counts(rehearsal: Rehearsal) -> dict[str, int]:
    out: dict[str, int] = {}
    for run in rehearsal.agents.runs if rehearsal.agents else []:
        out[run.status] = out.get(run.status, 0) + 1
    return out


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, default=str)
