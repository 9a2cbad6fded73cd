"""AWS for the rehearsal: a moto server on loopback, in this process, with hooks where the rehearsal plays AWS.

The server answers every client (the CLI's, the boxes' ``aws`` commands and boto3 code, the Lambda workers, and
Step Functions' own ``aws-sdk:*`` tasks, which moto's interpreter sends to ``localhost:$MOTO_PORT``). Being in
this process, the rehearsal also reaches moto's backends directly: it hooks ``ec2:StartInstances`` /
``StopInstances`` (boxes boot and die), ``ssm:SendCommand`` (the emulated agent), ``lambda:Invoke`` (the Lambda
workers), ``events:PutEvents`` and S3's EventBridge notifications (the rules). A hook is a plain callable the
rehearsal sets; a hook that raises an :class:`AwsError` answers the caller the way AWS would. ``StopExecution``
is made to behave as in AWS (ABORTED at once: :meth:`MotoWorld._patch_stop_execution`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ACCOUNT_ID = "123456789012"
# moto's interpreter signs its aws-sdk calls with these (moto.stepfunctions.parser.asl.utils.boto_client).
STATE_MACHINE_ACCESS_KEY = "ak"
STATE_MACHINE_SECRET_KEY = "sk"
# Step Functions names an aws-sdk error "<Service>.<Exception>"; moto knows only dynamodb/sfn and leaves the
# rest lower case ("ssm.InvalidInstanceIdException"), where AWS says "Ssm.InvalidInstanceIdException".
AWS_SDK_ERROR_SERVICE_NAMES = {"ssm": "Ssm", "ec2": "Ec2", "s3": "S3", "lambda": "Lambda", "events": "EventBridge"}


class AwsError(Exception):
    """An AWS error a hook answers with: code and message as the service's JSON protocol sends them."""

    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.status = code, message, status


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str
    session_token: str = ""

    def boto_kwargs(self) -> dict[str, str]:
        kw = {"aws_access_key_id": self.access_key_id, "aws_secret_access_key": self.secret_access_key}
        if self.session_token:
            kw["aws_session_token"] = self.session_token
        return kw


TEST_CREDENTIALS = Credentials("testing", "testing")


@dataclass
class Hooks:
    """What the rehearsal plays; each None means moto's own behaviour."""

    start_instances: Callable[[list[str]], None] | None = None  # before moto starts them (may raise AwsError)
    stop_instances: Callable[[list[str]], None] | None = None  # before moto stops them (may raise AwsError)
    instances_started: Callable[[list[str]], None] | None = None  # after moto started them
    instances_stopped: Callable[[list[str]], None] | None = None  # after moto stopped them
    # RunInstances: before moto launches (the call's template name, subnet and resolved instance type; may raise
    # AwsError, e.g. InsufficientInstanceCapacity), then the new instance ids
    run_instances: Callable[[dict[str, Any]], None] | None = None
    instances_launched: Callable[[list[str]], None] | None = None
    terminate_instances: Callable[[list[str]], None] | None = None  # before moto terminates them (may raise)
    instances_terminated: Callable[[list[str]], None] | None = None
    send_command: Callable[[dict[str, Any]], None] | None = None  # validate (may raise AwsError)
    command_sent: Callable[[Any], None] | None = None  # the moto Command, after it was recorded
    # function name/ARN, payload -> (response payload, None or the FunctionError: "Unhandled")
    invoke_lambda: Callable[[str, bytes], tuple[bytes, str | None]] | None = None
    events_put: Callable[[list[dict[str, Any]]], None] | None = None  # entries as PutEvents received them
    s3_event: Callable[[dict[str, Any]], None] | None = None  # an S3 EventBridge notification


@dataclass
class MotoWorld:
    """A started moto server and the hooks into its backends. Use as a context manager."""

    region: str = "us-west-2"
    hooks: Hooks = field(default_factory=Hooks)
    port: int = 0
    _server: Any = None
    _patches: list[tuple[Any, str, Any]] = field(default_factory=list)
    _saved_env: dict[str, str | None] = field(default_factory=dict)
    _saved_config: list[tuple[str, str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # one boto3 session for every client this world makes: its loader parses each service's JSON model once (a
    # fresh session per client parsed them again, ~0.2 s a client, ~60 clients a deploy); sessions are not
    # thread-safe, so clients are made under a lock (a client itself is)
    _session: Any = None
    _session_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> MotoWorld:
        from moto.core.config import default_user_config
        from moto.server import ThreadedMotoServer

        for name in ("werkzeug", "botocore.credentials"):
            logging.getLogger(name).setLevel(logging.ERROR)
        # moto's interpreter logs every failure event with the whole state tree: the history has them
        logging.getLogger("moto").setLevel(logging.CRITICAL)
        # a world starts from nothing, whatever used moto in this process before: an execution another user of
        # moto left running would send its aws-sdk calls here (moto's interpreter targets MOTO_PORT when it is
        # not intercepting), signed with the key this world binds to its own state machine
        left = stop_moto_executions()
        if left:
            raise RuntimeError(
                f"{len(left)} Step Functions execution(s) started before this world still run in "
                f"this process ({', '.join(left)}); their calls would reach this world"
            )
        self._reset_backends()
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        self.port = self._server.get_host_and_port()[1]
        self._setenv("MOTO_PORT", str(self.port))  # where moto's interpreter sends aws-sdk calls
        self._setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
        for service, key, value in (("stepfunctions", "execute_state_machine", True), ("lambda", "use_docker", False)):
            self._saved_config.append((service, key, default_user_config[service][key]))
            default_user_config[service][key] = value
        self._install_hooks()
        return self

    def stop(self) -> None:
        for owner, name, original in reversed(self._patches):
            setattr(owner, name, original)
        self._patches.clear()
        if self._server is not None:
            self._server.stop()
            self._server = None
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()
        from moto.core.config import default_user_config

        for service, key, value in reversed(self._saved_config):  # moto's process-wide config, as it was
            default_user_config[service][key] = value
        self._saved_config.clear()
        stop_moto_executions()  # the world leaves no execution of its own running in the process
        self._reset_backends()

    def __enter__(self) -> MotoWorld:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _setenv(self, key: str, value: str) -> None:
        self._saved_env.setdefault(key, os.environ.get(key))
        os.environ[key] = value

    @staticmethod
    def _reset_backends() -> None:
        """moto's state is per process: the next world starts from nothing."""
        from moto.core.base_backend import BackendDict
        from moto.core.model_instances import reset_model_data

        BackendDict.reset()
        reset_model_data()

    # -- clients and backends ---------------------------------------------------------------------
    def client(self, service: str, credentials: Credentials = TEST_CREDENTIALS, **kwargs: Any) -> Any:
        import boto3
        from botocore.config import Config

        with self._session_lock:
            if self._session is None:
                self._session = boto3.session.Session()
            return self._session.client(
                service,
                region_name=self.region,
                endpoint_url=self.endpoint,
                config=Config(retries={"max_attempts": 2, "mode": "standard"}),
                **credentials.boto_kwargs(),
                **kwargs,
            )

    def backend(self, service: str) -> Any:
        if service == "stepfunctions":
            from moto.stepfunctions.parser.models import stepfunctions_parser_backends as backends
        elif service == "lambda":
            from moto.awslambda_simple.models import lambda_simple_backends as backends
        else:
            from moto.backends import get_backend

            backends = get_backend(service)
        return backends[ACCOUNT_ID][self.region]

    def client_env(self, credentials: Credentials | None = None) -> dict[str, str]:
        """Environment variables that point an AWS SDK or CLI process at this world."""
        env = {"AWS_ENDPOINT_URL": self.endpoint, "AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region}
        if credentials is not None:
            env.update(
                {"AWS_ACCESS_KEY_ID": credentials.access_key_id, "AWS_SECRET_ACCESS_KEY": credentials.secret_access_key}
            )
            if credentials.session_token:
                env["AWS_SESSION_TOKEN"] = credentials.session_token
        return env

    # -- hooks into moto --------------------------------------------------------------------------
    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        self._patches.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    def _install_hooks(self) -> None:
        from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
            state_task_service_aws_sdk as aws_sdk,
        )

        self._patch(aws_sdk, "_SERVICE_ERROR_NAMES", {**aws_sdk._SERVICE_ERROR_NAMES, **AWS_SDK_ERROR_SERVICE_NAMES})
        self._hook_instances()
        self._hook_send_command()
        self._hook_lambda_invoke()
        self._hook_events()
        self._hook_task_callbacks()
        self._patch_stop_execution()

    def _hook_instances(self) -> None:
        """EC2's Start/Stop/Terminate/RunInstances with the rehearsal's hooks around moto's own."""
        from moto.ec2.models.instances import InstanceBackend

        hooks = self.hooks
        self._patch(
            InstanceBackend,
            "start_instances",
            _hooked(hooks, InstanceBackend.start_instances, "start_instances", "instances_started"),
        )
        self._patch(
            InstanceBackend,
            "stop_instances",
            _hooked(hooks, InstanceBackend.stop_instances, "stop_instances", "instances_stopped"),
        )

        self._patch(
            InstanceBackend,
            "terminate_instances",
            _hooked(hooks, InstanceBackend.terminate_instances, "terminate_instances", "instances_terminated"),
        )
        original_run = InstanceBackend.run_instances

        def run_instances(
            backend: Any, image_id: Any, count: int, user_data: Any, security_group_names: Any, **kwargs: Any
        ) -> Any:
            template = kwargs.get("launch_template") or {}
            if hooks.run_instances:
                itype = kwargs.get("instance_type")
                if template and kwargs.get("is_instance_type_default", True):
                    itype = backend._get_template_from_args(template).data.get("InstanceType") or itype
                try:
                    hooks.run_instances(
                        {
                            "template": template.get("LaunchTemplateName"),
                            "subnet_id": kwargs.get("subnet_id"),
                            "instance_type": itype,
                        }
                    )
                except AwsError as exc:
                    raise _ec2_error(exc) from exc
            reservation = original_run(backend, image_id, count, user_data, security_group_names, **kwargs)
            if hooks.instances_launched:
                hooks.instances_launched([i.id for i in reservation.instances])
            return reservation

        self._patch(InstanceBackend, "run_instances", run_instances)

    def _hook_send_command(self) -> None:
        """SSM's SendCommand through the emulated agent's hooks, to the instance ids it names."""
        from moto.ssm.models import Command, SimpleSystemManagerBackend

        hooks = self.hooks
        original_send = SimpleSystemManagerBackend.send_command

        def send_command(backend: Any, **kwargs: Any) -> Any:
            if hooks.send_command:
                try:
                    hooks.send_command(kwargs)
                except AwsError as exc:
                    raise _as_rest(exc) from exc
            command = original_send(backend, **kwargs)
            if hooks.command_sent:
                hooks.command_sent(command)
            return command

        self._patch(SimpleSystemManagerBackend, "send_command", send_command)

        # moto resolves `Targets` through EC2 filters even when there are none: an empty filter set matches
        # every instance, so a SendCommand to one instance id would reach every box. AWS sends it to the ids given.
        original_targets = Command._get_instance_ids_from_targets

        def ids_from_targets(command: Any) -> list[str]:
            return original_targets(command) if command.targets else []

        self._patch(Command, "_get_instance_ids_from_targets", ids_from_targets)

    def _hook_lambda_invoke(self) -> None:
        """lambda:Invoke answered by the rehearsal's Lambda workers."""
        from moto.awslambda_simple.models import LambdaSimpleBackend
        from moto.core.exceptions import JsonRESTError

        hooks = self.hooks

        def invoke(
            backend: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any
        ) -> bytes:
            if hooks.invoke_lambda is None:
                raise JsonRESTError("ResourceNotFoundException", f"Function not found: {function_name}")
            try:
                payload, function_error = hooks.invoke_lambda(
                    function_name, body if isinstance(body, bytes) else str(body or "").encode()
                )
            except AwsError as exc:
                raise _as_rest(exc) from exc
            if function_error:
                response_headers["x-amz-function-error"] = function_error
            return payload

        self._patch(LambdaSimpleBackend, "invoke", invoke)

    def _hook_events(self) -> None:
        """EventBridge's PutEvents and S3's EventBridge notifications handed to the rehearsal's rules."""
        from moto.events.models import EventsBackend
        from moto.s3 import notifications

        hooks = self.hooks
        original_put = EventsBackend.put_events

        def put_events(backend: Any, events: list[dict[str, Any]]) -> Any:
            out = original_put(backend, events)
            accepted = [{**e, "EventId": r["EventId"]} for e, r in zip(events, out) if "EventId" in r]
            if hooks.events_put and accepted:
                hooks.events_put(accepted)
            return out

        self._patch(EventsBackend, "put_events", put_events)

        def s3_event_bridge(account_id: str, bucket: Any, event_name: str, key: Any) -> None:
            if hooks.s3_event is None:
                return
            import uuid

            from moto.core.utils import iso_8601_datetime_without_milliseconds, utcnow

            hooks.s3_event(
                {
                    "version": "0",
                    "id": str(uuid.uuid4()),
                    "detail-type": notifications._detail_type(event_name),
                    "source": "aws.s3",
                    "account": account_id,
                    "time": iso_8601_datetime_without_milliseconds(utcnow()),
                    "region": bucket.region_name,
                    "resources": [f"arn:aws:s3:::{bucket.name}"],
                    "detail": {
                        "version": "0",
                        "bucket": {"name": bucket.name},
                        "object": {
                            "key": key.name,
                            "size": key.size,
                            "etag": key.etag.replace('"', ""),
                            **({"version-id": key.version_id} if key.version_id else {}),
                            "sequencer": "617f08299329d189",
                        },
                        "request-id": "N4N7GDK58NMKJ12R",
                        "requester": account_id,
                        "source-ip-address": "127.0.0.1",
                        "reason": "PutObject",
                    },
                }
            )

        self._patch(notifications, "_send_event_bridge_message", s3_event_bridge)

    def _hook_task_callbacks(self) -> None:
        """A task token answered as AWS does: SendTaskFailure keeps its cause, a closed task refuses its token."""
        # moto's SendTaskFailure handler drops `cause`: the failure's cause (on_command_status's stderr tail, an
        # agent's verbatim error) would never reach the execution's history. AWS keeps it.
        from moto.core.responses import EmptyResult
        from moto.stepfunctions.responses import StepFunctionResponse

        def send_task_failure(response: Any) -> Any:
            response.stepfunction_backend.send_task_failure(
                response._get_param("taskToken"), error=response._get_param("error"), cause=response._get_param("cause")
            )
            return EmptyResult()

        self._patch(StepFunctionResponse, "send_task_failure", send_task_failure)

        # moto lets a task token be answered again after its task closed (the outcome is simply replaced); AWS
        # refuses it (TaskTimedOut: "the task associated with the token has already been closed"), which is what
        # tells on_command_status that the agent called back first.
        # (moto's own TaskTimedOut is not an AWSError: its server would answer 500.)
        from moto.core.exceptions import AWSError
        from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackPoolManager

        class TaskTimedOut(AWSError):
            TYPE = "TaskTimedOut"
            STATUS = 400

        def closed_guard(original: Any) -> Any:
            def call(pool: Any, callback_id: Any, *args: Any, **kwargs: Any) -> Any:
                endpoint = pool.get(callback_id)
                if endpoint is not None and endpoint.get_outcome() is not None:
                    raise TaskTimedOut("Task Timed Out: the task associated with the token has already been closed")
                return original(pool, callback_id, *args, **kwargs)

            return call

        self._patch(CallbackPoolManager, "notify", closed_guard(CallbackPoolManager.notify))
        self._patch(CallbackPoolManager, "heartbeat", closed_guard(CallbackPoolManager.heartbeat))

    def _patch_stop_execution(self) -> None:
        """StopExecution as AWS does it: ABORTED at once, and it stays ABORTED.

        moto only flags its interpreter as stopped: an execution waiting on a task token stays RUNNING until
        the task returns, then records the task's outcome (FAILED). AWS ends the execution at once; the
        waiting task is abandoned (its token answers TaskTimedOut later)."""
        from moto.stepfunctions.parser.api import ExecutionStatus
        from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication, Execution

        original_stop = Execution.stop
        original_reflect = BaseExecutionWorkerCommunication._reflect_execution_status

        def stop(execution: Any, stop_date: Any, error: str | None, cause: str | None) -> None:
            original_stop(execution, stop_date=stop_date, error=error, cause=cause)
            if execution.exec_status == ExecutionStatus.RUNNING:
                execution.exec_status, execution.stop_date = ExecutionStatus.ABORTED, stop_date
                execution.error, execution.cause = error, cause
                execution.rehearsal_aborted = True

        def reflect(comm: Any) -> None:
            if getattr(comm.execution, "rehearsal_aborted", False):
                return  # the abandoned interpreter ended later: the execution stays as StopExecution left it
            original_reflect(comm)

        self._patch(Execution, "stop", stop)
        self._patch(BaseExecutionWorkerCommunication, "_reflect_execution_status", reflect)


def _as_rest(exc: AwsError) -> Exception:
    from moto.core.exceptions import JsonRESTError

    return JsonRESTError(exc.code, exc.message)


def _ec2_error(exc: AwsError) -> Exception:
    from moto.ec2.exceptions import EC2ClientError

    return EC2ClientError(exc.code, exc.message)


def _hooked(hooks: Hooks, original: Any, before: str, after: str) -> Any:
    """An EC2 instance call (Start/Stop/TerminateInstances) with the hooks named ``before`` and ``after`` around
    moto's own."""

    def call(backend: Any, instance_ids: list[str]) -> Any:
        check = getattr(hooks, before)
        if check:
            try:
                check(list(instance_ids))
            except AwsError as exc:
                raise _ec2_error(exc) from exc
        out = original(backend, instance_ids)
        done = getattr(hooks, after)
        if done:
            done([i.id for i, _ in out])
        return out

    return call


def stop_moto_executions(timeout_s: float = 20.0) -> list[str]:
    """Stop every Step Functions execution moto is still interpreting in this process and wait for its threads;
    the names of the threads still alive after ``timeout_s`` (none: every execution ended).

    moto runs each execution (and each Map iteration, Parallel branch and callback wait) in a daemon thread it
    lists in ``TMP_THREADS``; a backend reset forgets the execution but not its threads, which run on and call
    AWS through whatever moto serves by then. The interpreter environments are found on the threads' stacks
    (an execution started a moment ago has none yet, and starts more threads as it goes: so in passes until
    every thread has ended): each is marked stopped, and each task waiting for its token is woken (a stop alone
    does not wake it: it would wait out its timeout), sees the stop and ends.
    """
    import datetime
    import sys
    import time

    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackEndpoint
    from moto.stepfunctions.parser.asl.eval.environment import Environment
    from moto.stepfunctions.parser.utils import TMP_THREADS

    deadline = time.monotonic() + timeout_s
    while True:
        TMP_THREADS[:] = [t for t in TMP_THREADS if t.is_alive()]
        if not TMP_THREADS or time.monotonic() > deadline:
            return [t.name for t in TMP_THREADS]
        now = datetime.datetime.now(datetime.timezone.utc)
        frames = sys._current_frames()
        found: dict[int, Any] = {}
        for t in list(TMP_THREADS):
            frame = frames.get(t.ident) if t.ident is not None else None
            while frame is not None:
                for value in list(frame.f_locals.values()):
                    if isinstance(value, (Environment, CallbackEndpoint)):
                        found[id(value)] = value
                frame = frame.f_back
        del frames
        for value in found.values():
            if isinstance(value, Environment):
                try:
                    value.set_stop(stop_date=now, error="Moto.Stopped", cause="stopped before moto's state was reset")
                except Exception:  # noqa: BLE001  (an environment ending as it is stopped)
                    pass
                # an environment caught inside its own __init__ has no pool yet: a later pass finds it whole
                pool = getattr(value, "callback_pool_manager", None)
                waiting = list(getattr(pool, "_pool", {}).values())
            else:
                waiting = [value]
            for endpoint in waiting:
                endpoint.interrupt_all()
        for t in list(TMP_THREADS):
            t.join(0.05)
