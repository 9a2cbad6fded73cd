"""The rehearsal put together: world, deployment, boxes, agents, Lambdas, bus; then a run from request to report.

:class:`Rehearsal` is a context manager (everything it starts it stops); :func:`rehearse` is the whole thing
as ``neuronpipe rehearse`` runs it. Fault tests drive a :class:`Rehearsal` directly (``hooks`` and
``box_env`` let them inject failures).
"""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from infra.rehearsal.boxes import Box, BoxIdentity
from infra.rehearsal.bus import EventBus, ExecutionWatcher
from infra.rehearsal.cfn import Assembly, load_assembly, synth_assembly
from infra.rehearsal.deployment import Deployment, deploy
from infra.rehearsal.lambdas import LambdaFleet, LambdaFunction, build_layer, environment_for
from infra.rehearsal.ssm_agent import SsmAgents
from infra.rehearsal.world import TEST_CREDENTIALS, Credentials, MotoWorld

DEFAULT_BUILD_DIR = Path("build") / "rehearsal"


class RehearsalError(RuntimeError):
    """The rehearsal could not set AWS up (synth, deploy, first boot): the message says where."""


def cached_assembly(build_dir: Path, log: Callable[[str], None] = lambda s: None) -> Assembly:
    """The synthesized app, once per harness sha (a dirty tree is synthesized afresh)."""
    from infra.bundling import git_sha

    sha = git_sha()
    outdir = build_dir / f"cdk.out-{sha[:12]}"
    if sha.endswith("-dirty") or sha == "unknown" or not (outdir / "manifest.json").is_file():
        log(f"synthesizing the CDK app ({sha[:12]}) ...")
        os.environ.pop("CDK_CONTEXT_JSON", None)
        from infra.app import SynthFailedError

        try:
            return synth_assembly(outdir)
        except SynthFailedError:  # cdk-nag findings fail `make synth`; the templates are written all the same
            return load_assembly(outdir)
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
    credentials_for: Callable[[str], Credentials] = lambda actor: TEST_CREDENTIALS
    world: MotoWorld = field(default_factory=MotoWorld)
    deployment: Deployment | None = None
    boxes: dict[str, Box] = field(default_factory=dict)  # instance id -> box
    agents: SsmAgents | None = None
    fleet: LambdaFleet = field(default_factory=LambdaFleet)
    bus: EventBus | None = None
    watcher: ExecutionWatcher | None = None
    timings: dict[str, float] = field(default_factory=dict)
    boot_errors: list[str] = field(default_factory=list)

    # -- set up ------------------------------------------------------------------------------------
    def __enter__(self) -> "Rehearsal":
        t0 = time.monotonic()
        assembly = self.assembly or cached_assembly(self.build_dir, self.log)
        self.timings["synth_s"] = time.monotonic() - t0
        self.world.start()
        try:
            self._setup(assembly)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _setup(self, assembly: Assembly) -> None:
        t0 = time.monotonic()
        self.deployment = dep = deploy(self.world, assembly, self.workdir)
        self.timings["deploy_s"] = time.monotonic() - t0
        layer = build_layer(self.build_dir.resolve() / "layer")
        for module, fn in dep.functions.items():
            creds = self.credentials_for(fn.role_logical_id)
            self.fleet.add(LambdaFunction(
                name=fn.name, arn=fn.arn, handler=fn.handler, code_dir=fn.code_dir, layer_dir=layer,
                environment=environment_for(fn.environment, self.world.client_env(creds)),
                timeout_s=fn.timeout_s, memory_mb=fn.memory_mb, log_path=self.workdir / "lambda" / f"{module}.log"))
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
        for role, rec in dep.instances.items():
            box = Box(BoxIdentity(rec.instance_id, role, rec.instance_type, rec.ami_id, self.world.region,
                                  rec.availability_zone, rec.iam_role),
                      root=self.workdir / "boxes" / role, endpoint_url=self.world.endpoint,
                      credentials_for=lambda lid=rec.role_logical_id: self.credentials_for(lid),
                      extra_env=dict(self.box_env))
            box.prepare()
            self.boxes[rec.instance_id] = box
            self.agents.add_host(box)
        self._first_boot()
        self.watcher = ExecutionWatcher(self.world.client("stepfunctions"), dep.state_machine_arn,
                                        self.world.region, self.bus.publish).start()

    def _first_boot(self) -> None:
        """Each instance runs its user data once (harness installed from the bucket), then stops itself."""
        t0 = time.monotonic()
        errors: list[str] = []

        def one(box: Box) -> None:
            try:
                role = box.identity.box_role
                text = self.deployment.instances[role].user_data  # type: ignore[union-attr]
                out = box.first_boot(self.user_data_hook(role, text) if self.user_data_hook else text)
                (box.root / "var/log/rehearsal-first-boot.out").write_text(out)
            except Exception as exc:
                errors.append(str(exc))

        threads = [threading.Thread(target=one, args=(b,)) for b in self.boxes.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.timings["first_boot_s"] = time.monotonic() - t0
        if errors:
            raise RehearsalError("first boot failed:\n" + "\n".join(errors))
        # `shutdown -h` at the end of the user data: the instance stops (stop, not terminate)
        self.world.client("ec2").stop_instances(InstanceIds=list(self.boxes))

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
        except Exception as exc:  # the box is up but its per-boot setup failed: the sync will say so
            self.boot_errors.append(str(exc))
        time.sleep(max(0.0, self.boot_delay_s - (time.monotonic() - t0)))
        if self._state(box.instance_id) in ("running", "pending"):
            self.agents.register(box.instance_id)  # type: ignore[union-attr]

    def _stopped(self, instance_ids: list[str]) -> None:
        for iid in instance_ids:
            if iid in self.boxes:
                self.agents.kill(iid, "instance stopped")  # type: ignore[union-attr]

    def _state(self, instance_id: str) -> str:
        res = self.world.client("ec2").describe_instances(InstanceIds=[instance_id])["Reservations"]
        return res[0]["Instances"][0]["State"]["Name"]

    def running_boxes(self) -> list[str]:
        return [iid for iid in self.boxes if self._state(iid) in ("pending", "running", "stopping")]

    # -- a run -------------------------------------------------------------------------------------
    def operator(self) -> Credentials:
        return self.credentials_for("operator")

    def settings(self) -> Any:
        from control_plane.settings import ControlPlaneSettings

        env = next(iter(self.deployment.functions.values())).environment  # type: ignore[union-attr]
        fields = {k.removeprefix("NEURONPIPE_").lower(): v for k, v in env.items() if k.startswith("NEURONPIPE_")}
        return ControlPlaneSettings(**{k: v for k, v in fields.items() if k in ControlPlaneSettings.model_fields},
                                    poll_s=0.5)

    def start(self, request: Any, run_id: str) -> Any:
        from control_plane.aws import Executions, InstanceFleet, Leases
        from control_plane.launch import committed_in_store, launch

        settings = self.settings()
        op = self.operator()
        return launch(request, run_id, settings, fleet=InstanceFleet(settings.project, self.world.client("ec2", op)),
                      executions=Executions(self.world.client("stepfunctions", op)),
                      committed=committed_in_store(settings.results_uri, self.world.client("s3", op)),
                      leases=Leases(settings.lease_table, self.world.client("dynamodb", op)))

    def follow(self, execution_arn: str, on_progress: Callable[[Any], None], deadline_s: float = 3600) -> Any:
        from control_plane.aws import Executions
        from control_plane.commands.run_aws import follow

        end = time.monotonic() + deadline_s

        def sleep(s: float) -> None:
            if time.monotonic() > end:
                raise TimeoutError(f"execution {execution_arn} did not end within {deadline_s:.0f} s")
            time.sleep(s)

        return follow(Executions(self.world.client("stepfunctions", self.operator())), execution_arn, 0.5,
                      on_progress, sleep=sleep)

    def history(self, execution_arn: str) -> list[dict[str, Any]]:
        from control_plane.aws import Executions

        return Executions(self.world.client("stepfunctions")).history(execution_arn)

    def settle(self, timeout_s: float = 60.0) -> None:
        """Let the end-of-run events reach their Lambdas (execution status -> on_execution_status)."""
        if self.watcher:
            self.watcher.poll_once()
        if self.bus:
            self.bus.drain(timeout_s)

    def __exit__(self, *exc: object) -> None:
        if self.watcher:
            self.watcher.stop()
        if self.agents:
            self.agents.close()
        self.fleet.close()
        for box in self.boxes.values():
            box.close()
        self.world.stop()


def read_object(rehearsal: Rehearsal, bucket: str, key: str) -> bytes:
    return rehearsal.world.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()


def command_counts(rehearsal: Rehearsal) -> dict[str, int]:
    out: dict[str, int] = {}
    for run in rehearsal.agents.runs if rehearsal.agents else []:
        out[run.status] = out.get(run.status, 0) + 1
    return out


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, default=str)
