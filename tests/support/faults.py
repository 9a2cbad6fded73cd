"""Fault injection for the rehearsal: AWS calls that fail as AWS fails them, Lambdas that break, boxes that reboot.

Everything here acts on a started :class:`rehearsal.run.Rehearsal` through the hooks it already has (the
moto world's :class:`~rehearsal.world.Hooks`, the Lambda fleet, the SSM agents) and undoes itself:
:class:`Faults` is a context manager; leaving it restores every hook it chained and every Lambda environment it
changed.

* :class:`CallFault`: an EC2 / SSM call answered with an AWS error code (``InsufficientInstanceCapacity``,
  ``IncorrectInstanceState``, ``InvalidParameters`` ...) the first ``times`` matching calls, or always; it
  counts the calls it saw. Chained in front of the rehearsal's own hook (the agent's SendCommand check stays).
* :meth:`Faults.lambda_env`: a Lambda worker restarted with a changed environment (a misconfigured function
  fails in its own handler, in its own worker, as it would in AWS).
* :func:`reboot`: a box reboots under a running command: the process is killed with the box, the instance
  stays ``running`` (EC2 RebootInstances), the per-boot scripts run again, the agent registers again and runs
  the interrupted command again from the start (what the SSM agent does with an in-progress document after a
  restart), the invocation staying ``InProgress`` meanwhile.
* :func:`start_run`: ``Rehearsal.start`` with an optional test-only mutation of the execution input (e.g. one
  lane's ``heartbeat_s``), the lease and launch path unchanged.
* :func:`shorten_retries`: a TEST-ONLY change of the deployed definition: every Retry's wait becomes
  ``interval_s`` without backoff (MaxAttempts unchanged, so "all retries" still means all of them). The
  production ASL is never changed; the deployed one is, in the rehearsal's moto only.
* :func:`stage_modules`: a directory holding given modules under their dotted names, for a box's
  ``PYTHONPATH`` (the fault lanes), so first-party code still comes only from the harness the box installed.
* :func:`fault_rehearsal`: the world a module of fault cases shares (the fault lanes on its boxes, retries
  shortened); ``tests/rehearsal/conftest.py`` holds the per-case ``faults`` and ``say`` fixtures over it.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rehearsal.world import AwsError

HOOKS = ("start_instances", "stop_instances", "send_command")


class FaultSetupError(RuntimeError):
    """A fault cannot be set up on this rehearsal (unknown hook, function, box)."""


class WaitTimeoutError(TimeoutError):
    """A condition the fault matrix waits for did not come true in time (the message says which)."""


@dataclass
class CallFault:
    """Answer matching calls with ``code``/``message`` (AWS's wording) the first ``times`` times (None: always).

    The hook's argument is what the world passes: the instance ids (EC2) or the SendCommand request (SSM).
    ``match`` narrows the calls (e.g. one lane's command); ``calls``/``failed`` count what it saw and refused.
    """

    code: str
    message: str
    times: int | None = None
    match: Callable[[Any], bool] = lambda _arg: True
    calls: int = 0
    failed: int = 0
    seen: list[Any] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, arg: Any) -> None:
        if not self.match(arg):
            return
        with self._lock:
            self.calls += 1
            self.seen.append(copy.deepcopy(arg) if isinstance(arg, (list, dict)) else arg)
            refuse = self.times is None or self.failed < self.times
            if refuse:
                self.failed += 1
        if refuse:
            raise AwsError(self.code, self.message)


def capacity_error(instance_type: str, availability_zone: str) -> tuple[str, str]:
    """EC2's InsufficientInstanceCapacity as StartInstances answers it."""
    return (
        "InsufficientInstanceCapacity",
        f"We currently do not have sufficient {instance_type} capacity in the Availability Zone you "
        f"requested ({availability_zone}). Our system will be working on provisioning additional capacity.",
    )


def for_instance(instance_id: str) -> Callable[[Any], bool]:
    """Match an EC2 call naming this instance."""
    return lambda ids: instance_id in list(ids or [])


def for_lane(lane: str) -> Callable[[Any], bool]:
    """Match the SendCommand of one lane (the planner's comment: ``neuronpipe <lane> <run id>``)."""
    return lambda request: str((request or {}).get("comment") or "").startswith(f"neuronpipe {lane} ")


class Faults:
    """Faults on one rehearsal; leaving the context restores its hooks and Lambda environments."""

    def __init__(self, rehearsal: Any):
        self.rehearsal = rehearsal
        self._hooks: list[tuple[str, Any]] = []
        self._envs: list[tuple[Any, dict[str, str]]] = []
        self._layers: list[tuple[Any, Path]] = []

    def __enter__(self) -> Faults:
        return self

    def __exit__(self, *exc: object) -> None:
        self.clear()

    def clear(self) -> None:
        hooks = self.rehearsal.world.hooks
        for name, previous in reversed(self._hooks):
            setattr(hooks, name, previous)
        self._hooks.clear()
        for fn, env in reversed(self._envs):
            fn.close()
            fn.environment = env
        self._envs.clear()
        for fn, layer in reversed(self._layers):
            fn.close()
            fn.layer_dir = layer
        self._layers.clear()

    def inject(self, hook: str, fault: Callable[[Any], None]) -> Any:
        """Put ``fault`` in front of the world's ``hook`` (the rehearsal's own hook still runs after it)."""
        if hook not in HOOKS:
            raise FaultSetupError(f"no fault hook {hook!r}; valid: {', '.join(HOOKS)}")
        hooks = self.rehearsal.world.hooks
        previous = getattr(hooks, hook)

        def chained(arg: Any) -> None:
            fault(arg)
            if previous is not None:
                previous(arg)

        setattr(hooks, hook, chained)
        self._hooks.append((hook, previous))
        return fault

    def start_instances(self, fault: CallFault) -> CallFault:
        return self.inject("start_instances", fault)

    def stop_instances(self, fault: CallFault) -> CallFault:
        return self.inject("stop_instances", fault)

    def send_command(self, fault: CallFault) -> CallFault:
        return self.inject("send_command", fault)

    def lambda_layer_without(self, module: str, packages: Iterable[str]) -> Any:
        """Restart the worker of the function whose handler module is ``module`` on its layer less ``packages``
        (import names): the layer as a deploy that forgot them would ship it (the other entries linked, not copied)."""
        fn = lambda_function(self.rehearsal, module)
        names = {p.lower() for p in packages}
        lacking = Path(tempfile.mkdtemp(prefix="layer-without-", dir=self.rehearsal.workdir)) / "python"
        lacking.mkdir()
        for entry in fn.layer_dir.iterdir():
            top = entry.name.lower().lstrip("_").split(".")[0].split("-")[0]
            if top not in names:
                (lacking / entry.name).symlink_to(entry)
        self._layers.append((fn, fn.layer_dir))
        fn.close()  # the next invocation is a cold start on the new layer
        fn.layer_dir = lacking
        return fn

    def lambda_env(self, module: str, set_: Mapping[str, str] | None = None, unset: Iterable[str] = ()) -> Any:
        """Restart the worker of the function whose handler module is ``module`` with a changed environment."""
        fn = lambda_function(self.rehearsal, module)
        self._envs.append((fn, dict(fn.environment)))
        env = {k: v for k, v in fn.environment.items() if k not in set(unset)}
        env.update(set_ or {})
        fn.close()  # the next invocation is a cold start with the new environment
        fn.environment = env
        return fn


def client(rehearsal: Any, service: str) -> Any:
    """The operator's client for a service, made once per rehearsal (a boto3 client costs ~0.5 s of CPU)."""
    cache = rehearsal.__dict__.setdefault("_fault_clients", {})
    if service not in cache:
        cache[service] = rehearsal.world.client(service, rehearsal.operator())
    return cache[service]


def lambda_function(rehearsal: Any, module: str) -> Any:
    """The fleet's function for a handler module (``finalize_run``, ``plan_run`` ...)."""
    record = rehearsal.deployment.functions.get(module)
    if record is None:
        raise FaultSetupError(
            f"no deployed function for handler module {module!r}; "
            f"deployed: {', '.join(sorted(rehearsal.deployment.functions))}"
        )
    return rehearsal.fleet.functions[record.name]


def set_lambda_env(rehearsal: Any, env: Mapping[str, str]) -> None:
    """Add variables to every function's environment (workers restart on their next invocation)."""
    for fn in rehearsal.fleet.functions.values():
        fn.close()
        fn.environment = {**fn.environment, **env}


# -- the deployed definition ------------------------------------------------------------------------------


def shortened_definition(definition: str, interval_s: int = 1) -> tuple[str, dict[str, int]]:
    """TEST ONLY: the definition with every Retry waiting ``interval_s`` without backoff (MaxAttempts and
    ErrorEquals unchanged), and how many retriers were changed per state."""
    parsed = json.loads(definition)
    changed: dict[str, int] = {}

    def walk(states: dict[str, Any]) -> None:
        for name, state in states.items():
            for retrier in state.get("Retry", []):
                retrier["IntervalSeconds"] = interval_s
                retrier["BackoffRate"] = 1.0
                retrier.pop("MaxDelaySeconds", None)
                retrier.pop("JitterStrategy", None)
                changed[name] = changed.get(name, 0) + 1
            for key in ("ItemProcessor", "Iterator"):
                if isinstance(state.get(key), dict):
                    walk(state[key]["States"])
            for branch in state.get("Branches", []):
                walk(branch["States"])

    walk(parsed["States"])
    return json.dumps(parsed), changed


def shorten_retries(rehearsal: Any, interval_s: int = 1) -> dict[str, int]:
    """TEST ONLY: :func:`shortened_definition` deployed over the rehearsal's state machine (moto only)."""
    text, changed = shortened_definition(rehearsal.deployment.state_machine_definition, interval_s)
    sfn = client(rehearsal, "stepfunctions")
    sfn.update_state_machine(stateMachineArn=rehearsal.deployment.state_machine_arn, definition=text)
    rehearsal.deployment.state_machine_definition = text
    return changed


# -- runs ----------------------------------------------------------------------------------------------------


def start_run(
    rehearsal: Any, request: Any, run_id: str, mutate: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> Any:
    """What ``Rehearsal.start`` does (plan, leases, StartExecution as the operator), with the execution input
    mutated by ``mutate`` when given, and the operator's clients made once."""
    from control_plane.aws import Executions, InstanceFleet, Leases
    from control_plane.launch import committed_in_store, launch

    class MutatedExecutions(Executions):
        def start(self, state_machine_arn: str, run_id: str, execution_input: dict[str, Any]) -> str:
            changed = mutate(copy.deepcopy(execution_input)) if mutate else execution_input
            return super().start(state_machine_arn, run_id, changed)

    from control_plane.quotas import ServiceQuotas
    from rehearsal.run import EmulatedQuotas

    settings = rehearsal.settings()
    return launch(
        request,
        run_id,
        settings,
        fleet=InstanceFleet(settings.project, client(rehearsal, "ec2")),
        executions=MutatedExecutions(client(rehearsal, "stepfunctions")),
        committed=committed_in_store(settings.results_uri, client(rehearsal, "s3")),
        leases=Leases(settings.lease_table, client(rehearsal, "dynamodb")),
        quotas=ServiceQuotas(EmulatedQuotas(getattr(rehearsal, "quota_vcpus", {}))),
        s3_client=client(rehearsal, "s3"),
    )


def lane_heartbeat(lane: str, heartbeat_s: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An execution-input mutation: ``lane``'s HeartbeatSeconds (``$.lane.heartbeat_s``) in every segment."""

    def mutate(execution_input: dict[str, Any]) -> dict[str, Any]:
        hits = 0
        for phase in (seg for wave in execution_input["waves"] for seg in wave["segments"]):
            for step in phase["lanes"]:
                if step["lane"] == lane:
                    step["heartbeat_s"] = heartbeat_s
                    hits += 1
        if not hits:
            raise FaultSetupError(f"lane {lane!r} is not in the execution input")
        return execution_input

    return mutate


def wait_for(predicate: Callable[[], Any], what: str, timeout_s: float = 60.0, poll_s: float = 0.1) -> Any:
    """Poll until ``predicate()`` is truthy; its value, or :class:`WaitTimeoutError` naming ``what``."""
    end = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise WaitTimeoutError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(poll_s)


def command_in_progress(rehearsal: Any, instance_id: str, comment_prefix: str) -> Any:
    """The agent's run of a command on that box whose comment starts so, while it is InProgress (else None)."""
    for run in list(rehearsal.agents.runs):
        if run.instance_id == instance_id and run.comment.startswith(comment_prefix) and run.status == "InProgress":
            return run
    return None


# -- boxes -----------------------------------------------------------------------------------------------------


def reboot(rehearsal: Any, instance_id: str) -> threading.Thread:
    """The box reboots now: its running command dies with it and runs again after the boot (see module doc).

    Returns the boot thread (per-boot scripts, boot delay, agent registration)."""
    box = rehearsal.boxes.get(instance_id)
    if box is None:
        raise FaultSetupError(f"{instance_id} is not a box of this rehearsal")
    rehearsal.agents.reboot(instance_id)
    client(rehearsal, "ec2").reboot_instances(InstanceIds=[instance_id])

    def boot() -> None:
        t0 = time.monotonic()
        try:
            box.boot()
        except Exception as exc:  # noqa: BLE001 - the sync or lane will say so; kept with the rehearsal's errors
            rehearsal.boot_errors.append(str(exc))
        time.sleep(max(0.0, rehearsal.boot_delay_s - (time.monotonic() - t0)))
        rehearsal.agents.register(instance_id)

    thread = threading.Thread(target=boot, daemon=True, name=f"reboot-{instance_id}")
    thread.start()
    return thread


def stage_modules(dest: Path, modules: Mapping[str, Path]) -> Path:
    """``dest`` holding each module file under its dotted name (empty ``__init__.py`` for its packages)."""
    if dest.exists():
        shutil.rmtree(dest)
    for dotted, source in modules.items():
        parts = dotted.split(".")
        pkg = dest
        for part in parts[:-1]:
            pkg = pkg / part
            pkg.mkdir(parents=True, exist_ok=True)
            (pkg / "__init__.py").touch()
        shutil.copyfile(source, pkg / f"{parts[-1]}.py")
    dest.mkdir(parents=True, exist_ok=True)
    return dest


def fault_rehearsal(
    assembly: Any, workdir: Path, modules: Mapping[str, Path] | None = None, lanes: str = ""
) -> Iterator[Any]:
    """A started rehearsal for a module of fault cases (a module-scoped fixture yields from it): the fault lanes
    (``tests/fixtures/rehearsal_lanes.py``) on the boxes and for the operator's plan, every deployed Retry
    shortened (:func:`shorten_retries`), the lanes' marker directory at ``r.fault_markers``. ``modules`` (dotted
    name -> file) are staged beside them and ``lanes`` (``NEURONPIPE_EXTRA_LANES`` entries) registered too: another
    case's lanes in the same world (the adaptive matrix's serving fixture)."""
    import pytest

    from rehearsal.run import Rehearsal
    from tests.fixtures import rehearsal_lanes

    staged = {rehearsal_lanes.MODULE: Path(rehearsal_lanes.__file__), **(modules or {})}
    extra_path = stage_modules(workdir / "extra-path", staged)
    extra_lanes = ",".join(x for x in (rehearsal_lanes.EXTRA_LANES, lanes) if x)
    markers = workdir / "markers"
    box_env = {
        "PYTHONPATH": str(extra_path),
        "NEURONPIPE_EXTRA_LANES": extra_lanes,
        rehearsal_lanes.MARKERS_ENV: str(markers),
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NEURONPIPE_EXTRA_LANES", extra_lanes)  # the operator plans with them too
        with Rehearsal(workdir, assembly=assembly, box_env=box_env, boot_delay_s=0.5, log=lambda _line: None) as r:
            set_lambda_env(r, {"NEURONPIPE_EXTRA_LANES": extra_lanes})
            shorten_retries(r)
            r.fault_markers = markers
            yield r


# -- outcomes --------------------------------------------------------------------------------------------------


def boxes_left_running(rehearsal: Any) -> list[str]:
    """The rehearsal's boxes that EC2 says are pending / running / stopping now."""
    reservations = client(rehearsal, "ec2").describe_instances(InstanceIds=sorted(rehearsal.boxes))["Reservations"]
    return sorted(
        i["InstanceId"]
        for res in reservations
        for i in res["Instances"]
        if i["State"]["Name"] in ("pending", "running", "stopping")
    )


def leases_held(rehearsal: Any) -> dict[str, str]:
    """instance id -> run id of every lease item in the table."""
    from control_plane.aws import Leases

    settings = rehearsal.settings()
    leases = Leases(settings.lease_table, client(rehearsal, "dynamodb"))
    return {i: h.run_id for i, h in leases.holders(rehearsal.boxes).items()}


def clean_slate(rehearsal: Any) -> list[str]:
    """Between cases: stop what still runs (executions, boxes), drop leases; what had to be done, in words."""
    sfn = client(rehearsal, "stepfunctions")
    done = []
    for page in sfn.get_paginator("list_executions").paginate(
        stateMachineArn=rehearsal.deployment.state_machine_arn, statusFilter="RUNNING"
    ):
        for ex in page["executions"]:
            sfn.stop_execution(executionArn=ex["executionArn"], error="Rehearsal.CleanSlate")
            done.append(f"stopped execution {ex['name']}")
    running = boxes_left_running(rehearsal)
    if running:
        client(rehearsal, "ec2").stop_instances(InstanceIds=running)
        done.append(f"stopped boxes {', '.join(running)}")
    held = leases_held(rehearsal)
    if held:
        table = rehearsal.settings().lease_table
        for iid in held:
            client(rehearsal, "dynamodb").delete_item(TableName=table, Key={"instance_id": {"S": iid}})
        done.append(f"deleted leases {held}")
    return done
