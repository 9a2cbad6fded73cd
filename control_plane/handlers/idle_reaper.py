"""``idle_reaper`` (on a schedule): stop project-tagged instances that no running execution owns.

The last resort behind the state machine's own stops and ``on_execution_status``. It imports
only boto3, the standard library and first-party modules that do the same
(``control_plane.lean``, ``control_plane.aws``), so it keeps working if the Lambda layer is
missing. A malformed event (not a JSON object) is logged in one line and answered
``{"outcome": "refused", ...}``.

What it spares, besides the boxes a running execution runs on (its input's; for one started with a run request,
those its first state planned, read from its history):

* a box started less than the grace ago (``NEURONPIPE_REAPER_GRACE_S``, default
  :data:`~control_plane.lean.DEFAULT_REAPER_GRACE_S`, 30 min: longer than a first boot's 10-15 min, so a box
  an operator just started by hand keeps it too). It is counted from ``LaunchTime``, which EC2 sets again at
  every start of an EBS-backed instance: the last start, not the creation;
* a box whose first bootstrap has not finished: the user data tags the instance
  ``neuronpipe:bootstrap=done`` (:data:`BOOTSTRAP_TAG`) as its last step, so a box without the tag is still in
  its first boot and is left alone for up to :data:`FIRST_BOOT_LIMIT_S` after its start. Past that it is
  stopped like any other (a first boot that hangs must not run up the bill; the user data stops the box
  itself when it ends, whatever its outcome).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from control_plane.aws import Executions, InstanceFleet, ProjectInstance, input_instance_ids
from control_plane.lean import (
    BOOTSTRAP_DONE,
    EPHEMERAL,
    TAG_BOOTSTRAP,
    TAG_EPHEMERAL,
    TAG_RUN,
    LeanSettings,
    LeanSettingsError,
    describe_bad_event,
    emit_metric,
    json_logger,
)

ACTIVE_STATES = ("pending", "running")
# Set by the first boot's user data (infra/user_data/bootstrap.sh) on its own instance when it has finished.
BOOTSTRAP_TAG = TAG_BOOTSTRAP
# How long after its start a box without the bootstrap tag counts as in its first boot: three times the
# 10-15 min a first boot takes (docs/guides/deploy-and-operate.md §3.4), and longer than the grace.
FIRST_BOOT_LIMIT_S = 45 * 60
log = json_logger("neuronpipe.idle_reaper")


def owned_instances(execution_inputs: Iterable[dict[str, Any]]) -> set[str]:
    return {iid for inp in execution_inputs for iid in input_instance_ids(inp)}


def bootstrapped(instance: ProjectInstance) -> bool:
    """The first boot finished (an ephemeral box has no bootstrap tag: its grace is the first boot's limit)."""
    return instance.tags.get(BOOTSTRAP_TAG) == BOOTSTRAP_DONE


def select_idle(
    instances: Iterable[ProjectInstance], owned: set[str], now: datetime, grace_s: int
) -> list[ProjectInstance]:
    """Active instances no running execution names, started (last start: ``LaunchTime``) longer than the grace
    period ago; one still in its first bootstrap (no bootstrap tag) only once :data:`FIRST_BOOT_LIMIT_S` has
    passed since its start."""

    def past(instance: ProjectInstance) -> bool:
        if instance.launch_time is None:
            return True
        spare_s = grace_s if bootstrapped(instance) else max(grace_s, FIRST_BOOT_LIMIT_S)
        return instance.launch_time <= now - timedelta(seconds=spare_s)

    return [i for i in instances if i.state in ACTIVE_STATES and i.instance_id not in owned and past(i)]


def reap(
    fleet: InstanceFleet, executions: Executions, state_machine_arn: str, now: datetime, grace_s: int
) -> dict[str, Any]:
    inputs = list(executions.running_inputs(state_machine_arn))
    owned = owned_instances(inputs)
    running_runs = {str(inp.get("run_id")) for inp in inputs if isinstance(inp, dict) and inp.get("run_id")}
    idle = select_idle(fleet.instances(states=ACTIVE_STATES), owned, now, grace_s)
    # an ephemeral box (a matrix's cell) is terminated once no running execution is its run; a pinned one stopped
    strays = [i for i in idle if i.tags.get(TAG_EPHEMERAL) == EPHEMERAL and i.tags.get(TAG_RUN) not in running_runs]
    pinned = [i for i in idle if i.tags.get(TAG_EPHEMERAL) != EPHEMERAL]
    fleet.stop([i.instance_id for i in pinned])
    fleet.terminate([i.instance_id for i in strays])
    return {
        "stopped": [i.instance_id for i in pinned],
        "terminated": [i.instance_id for i in strays],
        "owned": sorted(owned),
    }


def handler(event: Any, context: Any) -> dict[str, Any]:
    if not isinstance(event, dict):
        message = describe_bad_event(event, "expected a JSON object (the schedule's event)")
        log.warning(message)
        return {"outcome": "refused", "error": "MalformedEventError", "message": message}
    try:
        settings = LeanSettings.from_env()
    except LeanSettingsError as exc:
        log.error(f"idle reaper misconfigured: {exc}")
        return {"outcome": "refused", "error": type(exc).__name__, "message": str(exc)}
    executions = Executions()
    arn = settings.state_machine_arn or executions.find_state_machine(settings.state_machine_name)
    outcome = reap(
        InstanceFleet(settings.project), executions, arn, datetime.now(timezone.utc), settings.reaper_grace_s
    )
    emit_metric("InstancesReaped", len(outcome["stopped"]) + len(outcome["terminated"]))
    log.info("idle reaper", extra={"fields": outcome})
    return outcome
