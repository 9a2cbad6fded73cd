"""What the SSM commands of a plan run on a box: the lane, harness sync and cache push scripts, their comment and
where their output goes.

The SSM agent runs the command file with ``/bin/sh``; the state machine puts ``#!/bin/bash`` first and every
rendered script starts with :data:`BASH_GUARD` (hands over to bash when run as ``sh file``) before
``set -euo pipefail``. Absolute box paths are prefixed by ``${NEURONPIPE_BOX_ROOT:-}`` (empty on a box; a sandbox
in the rehearsal) and IMDS is reached at ``${NEURONPIPE_IMDS_ENDPOINT:-http://169.254.169.254}``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from pipeline.lanes import CELL_ENV, LaneSpec

if TYPE_CHECKING:
    from control_plane.models import RunRequest

DEFAULT_HARNESS_DIR = "/opt/neuronpipe"

# First line of every rendered script: run by dash (`sh file`), hand the file over to bash.
BASH_GUARD = '[ -n "${BASH_VERSION:-}" ] || exec /bin/bash "$0" "$@"'
BOX_ROOT = "${NEURONPIPE_BOX_ROOT:-}"
IMDS_ENDPOINT = "${NEURONPIPE_IMDS_ENDPOINT:-http://169.254.169.254}"

# IMDSv2: the box states its own id, type and region (the runner records them).
_IMDS = (
    f'imds() {{ local t; t=$(curl -sf -X PUT "{IMDS_ENDPOINT}/latest/api/token" '
    "-H 'X-aws-ec2-metadata-token-ttl-seconds: 60'); "
    f'curl -sf -H "X-aws-ec2-metadata-token: $t" "{IMDS_ENDPOINT}/latest/meta-data/$1"; }}\n'
    'export NEURONPIPE_INSTANCE_ID="$(imds instance-id)" NEURONPIPE_INSTANCE_TYPE="$(imds instance-type)" '
    'AWS_DEFAULT_REGION="$(imds placement/region)"\n'
)
_PROLOGUE = f"{BASH_GUARD}\nset -euo pipefail\n"
# A box commits by proposal (analytics.store.S3Store): its markers go to v1/_proposed/, the control plane's
# commit_lane writes the commit after the callback (its role may not write v1/_commits/).
_PROPOSE = "export NEURONPIPE_COMMITS=propose\n"

# An ephemeral box's first boot (its user data) installs the harness while its SSM agent already answers: the
# sync waits for the boot's marker (infra/user_data BOOT_DONE_PATH) before it touches the harness.
BOOT_DONE_PATH = "/run/neuronpipe/boot.done"
FIRST_BOOT_WAIT_S = 1500

_STAMP = (
    'stamp() { mkdir -p "$stamps"; date -u +%Y-%m-%dT%H:%M:%S.%3N+00:00 > "$stamps/.$1.tmp" '
    '&& mv "$stamps/.$1.tmp" "$stamps/$1"; }'
)


@dataclass(frozen=True)
class Harness:
    """Where the harness lives on a box, and (optionally) the package to install there first."""

    directory: str = DEFAULT_HARNESS_DIR
    package_uri: str | None = None


DEFAULT_HARNESS = Harness()  # the harness directory of every box, no package to install first


def box_path(path: str) -> str:
    """A shell word for an absolute box path, under ``$NEURONPIPE_BOX_ROOT`` when it is set."""
    quoted = shlex.quote(path)
    return f'"{BOX_ROOT}"{quoted}' if path.startswith("/") else quoted


def comment_for(what: str, run_id: str) -> str:
    """The SSM command comment of a lane or a segment command (`neuronpipe <what> <run id>`, at most 100)."""
    return f"neuronpipe {what} {run_id}"[:100]


def ssm_output_prefix(results_uri: str, *parts: str) -> str:
    """Key prefix for SSM command output, inside the results root (where the box may write)."""
    root = urlparse(results_uri).path.strip("/") if results_uri.startswith("s3://") else ""
    return "/".join(p for p in (root, "logs", *parts) if p)


def _cell_line(cell: str | None) -> str:
    return f"export {CELL_ENV}={shlex.quote(cell)}\n" if cell else ""


def lane_script(
    spec: LaneSpec,
    run_id: str,
    results_uri: str,
    request: RunRequest,
    harness: Harness,
    config: Mapping[str, Any] | None,
    needs: tuple[str, ...] = (),
    cell: str | None = None,
) -> str:
    """The shell script that runs one lane on the box (the token arrives as the line before it); a matrix cell's
    lanes commit as ``<lane>@<cell>`` (``NEURONPIPE_CELL``)."""
    argv = [
        ".venv/bin/python",
        "-m",
        "agents",
        "run-lane",
        spec.name,
        "--run-id",
        run_id,
        "--results",
        results_uri,
        "--profile",
        request.profile,
        "--heartbeat-s",
        str(max(10, spec.heartbeat_s // 4)),
    ]
    if request.force:
        argv.append("--force")
    if needs:
        argv += ["--needs", ",".join(needs)]
    if config:
        argv += ["--config", json.dumps(config, sort_keys=True)]
    cmd = " ".join(shlex.quote(a) for a in argv)
    return (
        _PROLOGUE
        + _IMDS
        + _PROPOSE
        + _cell_line(cell)
        + f"cd {box_path(harness.directory)}\n"
        + f'exec {cmd} --task-token "$NEURONPIPE_TASK_TOKEN"\n'
    )


def sync_script(harness: Harness, results_uri: str | None = None, first_boot_wait_s: int = 0) -> str:
    """Sync the harness, then seed the compile cache from the results store (a failed seed costs a cold compile,
    never the segment), stamping each step for the boot's ``box_boots`` row (``agents.cache_cli``). On an ephemeral
    box (``first_boot_wait_s``) it first waits for the first boot to finish installing the harness."""
    wait = []
    if first_boot_wait_s:
        done = box_path(BOOT_DONE_PATH)
        wait = [
            f"waited=0; while [ ! -f {done} ]; do "
            f"if [ $waited -ge {first_boot_wait_s} ]; then "
            f'echo "neuronpipe: the first boot did not finish within {first_boot_wait_s} s" >&2; exit 1; fi; '
            "sleep 2; waited=$((waited + 2)); done"
        ]
    lines = [
        _PROLOGUE.rstrip("\n"),
        *wait,
        f"stamps={box_path('/run/neuronpipe/stamps')}",
        _STAMP,
        "stamp sync_started",
        # Step Functions' time of the start request (the state machine exports it before this script)
        'if [ -n "${NEURONPIPE_START_REQUESTED_AT:-}" ]; then '
        'printf "%s" "$NEURONPIPE_START_REQUESTED_AT" > "$stamps/start_requested"; fi',
        _IMDS.rstrip("\n"),
        f"cd {box_path(harness.directory)}",
    ]
    if harness.package_uri:
        lines += [
            'pkg="$(mktemp -d)/neuronpipe-harness.tar.gz"',
            f'aws s3 cp {shlex.quote(harness.package_uri)} "$pkg"',
            '.venv/bin/python -m pip install --quiet --no-deps --force-reinstall "$pkg"',
        ]
    else:
        # Boxes built by the CDK app carry neuronpipe-sync: it reinstalls the harness only when the
        # zip named by the <prefix>/harness/uri SSM parameter has changed since the last sync.
        sync = box_path("/usr/local/bin/neuronpipe-sync")
        lines += [f"if [ -x {sync} ]; then {sync}; fi"]
    lines += [".venv/bin/python -m agents lanes > /dev/null", "stamp harness_synced"]
    if results_uri:
        lines += [
            f".venv/bin/python -m agents cache seed --results {shlex.quote(results_uri)} "
            '|| echo "neuronpipe: compile-cache seed failed (this boot compiles cold)" >&2'
        ]
    lines += [
        'aws stepfunctions send-task-success --region "$AWS_DEFAULT_REGION" '
        '--task-token "$NEURONPIPE_TASK_TOKEN" --task-output "{\\"harness\\": \\"ready\\"}"'
    ]
    return "\n".join(lines) + "\n"


def cache_push_script(run_id: str, results_uri: str, box_role: str, wave: int, harness: Harness) -> str:
    """The segment's last command (``PushCompileCache``): upload what the box compiled, record the boot; it calls
    back with the token (the token arrives as the line before it)."""
    argv = [
        ".venv/bin/python",
        "-m",
        "agents",
        "cache",
        "push",
        "--results",
        results_uri,
        "--run-id",
        run_id,
        "--box-role",
        box_role,
        "--segment",
        str(wave),
    ]
    cmd = " ".join(shlex.quote(a) for a in argv)
    return (
        _PROLOGUE
        + _IMDS
        + _PROPOSE
        + f"cd {box_path(harness.directory)}\n"
        + f'exec {cmd} --task-token "$NEURONPIPE_TASK_TOKEN"\n'
    )
