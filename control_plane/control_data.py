"""Control data: the objects only the control plane authors, and the checks that keep a box from authoring them.

A run keeps three kinds of object in S3 besides its results: its plan, when it is not the execution input (a
matrix's plan too large for it, or the plan of an execution started with a run request, which planned itself;
``control/<run_id>/plan.json``, written by ``control_plane.launch.prepare``), a Distributed Map wave's items
(``control/<run_id>/wave-<n>/items.json``, written by the scheduler) and that wave's segment results
(``control/<run_id>/wave-<n>/results/<box>.json``, written by the state machine's child executions). They live at the
bucket's root under :data:`CONTROL_PREFIX`, where no box role may write (its policy and the bucket policy deny it;
``docs/explanation/security.md``), and each is written create-only.

What is read back is checked, never trusted: the plan's SHA-256 travels in the execution input (``plan_digest``,
which nothing but ``StartExecution`` sets) or, for an execution that planned itself, in the state's ``planned``,
which nothing but its ``PlanRequest`` task sets from the plan_execution Lambda's answer (a box's callback reaches a
lane's iteration, never the run's state); the scheduler refuses a plan whose bytes differ; the items' digest
travels in the scheduler's own answer and is checked again after the wave; the segments it hands on are validated
against the plan's models and bounds (:func:`check_segments`); a segment result must name its own box, a known status
and only its own lanes. A refusal is :class:`ControlDataError`, one line naming the object and its digest: the
scheduler's Lambda raises it, the state machine's Catch ends the run (RunBroke), no box is started or sent a command.

Import-light (the standard library and ``control_plane.models``): the scheduler's Lambda and the tests use it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

CONTROL_PREFIX = "control"  # control_plane.lean.CONTROL_PREFIX (this module stays import-free of the Lambda settings)
# Bounds a segment read back must keep, whatever wrote it: what a plan can make (a lane's Step Functions timeout, the
# script's first line, the comment's shape). The digest, not these, is what proves a plan is the one launched.
LANE_TIMEOUT_MAX_S = 48 * 3600
SEGMENT_STATUSES = ("completed", "gate_failed", "failed", "stop_failed", "capacity_unavailable")
_TEMPLATE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,127}$")


class ControlDataError(ValueError):
    """A control object is missing its digest, differs from it, or holds what the plan cannot have made."""


class Blobs(Protocol):
    """The results bucket's control objects (``control/<run_id>/…``)."""

    bucket: str

    def get(self, key: str) -> bytes | None: ...

    def put_new(self, key: str, body: bytes) -> None:
        """Create ``key`` (create-only); :class:`FileExistsError` when it exists."""


class S3ControlBlobs:
    """Control objects through boto3: ``get`` (None when absent) and ``put_new`` (``If-None-Match: *``; an existing
    key is :class:`FileExistsError`) — ``control_plane.control_data.Blobs``."""

    def __init__(self, bucket: str, client: object | None = None):
        if client is None:
            import boto3

            client = boto3.client("s3")
        self.bucket = bucket
        self._s3: Any = client

    def get(self, key: str) -> bytes | None:
        from botocore.exceptions import ClientError

        try:
            return self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return None
            raise

    def put_new(self, key: str, body: bytes) -> None:
        from botocore.exceptions import ClientError

        try:
            self._s3.put_object(Bucket=self.bucket, Key=key, Body=body, IfNoneMatch="*", ContentType="application/json")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise FileExistsError(key) from None
            raise


def control_key(run_id: str, *parts: str) -> str:
    """``control/<run_id>/<parts>``: a key at the results bucket's root (never under the boxes' results/)."""
    return "/".join(p for p in (CONTROL_PREFIX, run_id, *parts) if p)


def digest(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def write_new(blobs: Blobs, key: str, body: bytes) -> str:
    """Write a control object create-only; its digest. An object already there with the same bytes is this write's
    own (a retried call); any other is refused: something else wrote it first."""
    want = digest(body)
    try:
        blobs.put_new(key, body)
    except FileExistsError:
        there = blobs.get(key)
        if there is None or digest(there) != want:
            raise ControlDataError(
                f"control object s3://{blobs.bucket}/{key} exists with digest "
                f"{digest(there) if there is not None else 'none'}, not {want}: written by "
                "something other than this run's control plane"
            ) from None
    return want


def read_verified(blobs: Blobs, key: str, expected: str | None, what: str) -> bytes:
    """The object's bytes if their digest is ``expected``; :class:`ControlDataError` naming both otherwise."""
    uri = f"s3://{blobs.bucket}/{key}"
    if not expected or not str(expected).startswith("sha256:"):
        raise ControlDataError(f"{what} {uri}: the execution carries no digest for it, so it cannot be trusted")
    body = blobs.get(key)
    if body is None:
        raise ControlDataError(f"{what} {uri} does not exist (expected digest {expected})")
    got = digest(body)
    if got != expected:
        raise ControlDataError(f"{what} {uri} has digest {got}, not {expected}: it was changed after it was written")
    return body


def _refuse(where: str, why: str) -> ControlDataError:
    return ControlDataError(f"{where}: {why}")


def check_segments(
    waves: Sequence[Mapping[str, Any]], run_id: str, boxes: Sequence[Mapping[str, Any]], source: str
) -> None:
    """Every segment of ``waves`` is one the plan's models accept (``control_plane.models.Segment``: no unknown
    field, every type right) within the bounds a plan keeps: this run's id, a pinned segment on one of the execution's
    own instances, a launch from a template named for its own instance type, lanes whose timeouts are at most
    :data:`LANE_TIMEOUT_MAX_S`, whose scripts begin as every rendered script does and name their own lane and run,
    and whose comments are the plan's. ``source`` names where the waves came from (the digest-checked plan, the
    execution input, an items file)."""
    from pydantic import ValidationError

    from control_plane.box_scripts import BASH_GUARD, comment_for
    from control_plane.models import COST_FIELDS, Segment

    instances = {str(b.get("instance_id")) for b in boxes if b.get("instance_id")}
    for w, wave in enumerate(waves):
        for s, raw in enumerate(wave.get("segments") or []):
            where = f"{source}: wave {wave.get('wave', w)} segment {s}"
            try:
                seg = Segment.model_validate({**{f: 0.0 for f in COST_FIELDS}, **dict(raw)})
            except ValidationError as exc:
                first = exc.errors()[0]
                raise _refuse(where, f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
            where = f"{where} ({seg.box or seg.box_role})"
            if seg.run_id and seg.run_id != run_id:
                raise _refuse(where, f"run_id {seg.run_id!r} is not this run's ({run_id!r})")
            if seg.launch is None:
                if not seg.instance_id or seg.instance_id not in instances:
                    raise _refuse(
                        where,
                        f"instance_id {seg.instance_id!r} is not one of this execution's boxes "
                        f"({', '.join(sorted(instances)) or 'none'})",
                    )
            else:
                slug = seg.instance_type.replace(".", "-")
                if seg.instance_id is not None:
                    raise _refuse(where, "a launched segment names an instance_id")
                if not _TEMPLATE.match(seg.launch.template) or not seg.launch.template.endswith("-" + slug):
                    raise _refuse(
                        where,
                        f"launch.template {seg.launch.template!r} is not a fleet template for {seg.instance_type}",
                    )
            for command, name in ((seg.sync, "sync"), (seg.cache_push, "cache_push")):
                if not command.script.startswith(BASH_GUARD):
                    raise _refuse(where, f"{name}.script is not one the plan renders")
            for step in seg.lanes:
                lane_where = f"{where} lane {step.result_lane or step.lane}"
                if step.timeout_s > LANE_TIMEOUT_MAX_S or step.heartbeat_s > step.timeout_s:
                    raise _refuse(
                        lane_where,
                        f"timeout_s {step.timeout_s} / heartbeat_s {step.heartbeat_s} beyond "
                        f"what a plan makes (timeout at most {LANE_TIMEOUT_MAX_S} s)",
                    )
                if step.execution_timeout != [str(step.timeout_s)]:
                    raise _refuse(lane_where, "execution_timeout differs from timeout_s")
                if (
                    not step.script.startswith(BASH_GUARD)
                    or f" run-lane {step.lane} --run-id {run_id} " not in step.script
                ):
                    raise _refuse(lane_where, "script is not the one the plan renders for this lane and run")
                if step.comment != comment_for(step.lane, run_id):
                    raise _refuse(lane_where, f"comment {step.comment!r} is not the plan's")


def check_segment_result(result: Any, box: str, lanes: Sequence[str], uri: str) -> dict[str, Any]:
    """A Distributed Map segment's result as the scheduler folds it: its own box, a known status, its own lanes only;
    anything else is refused (:class:`ControlDataError`)."""
    if not isinstance(result, dict):
        raise ControlDataError(f"segment result {uri}: not a JSON object")
    if str(result.get("box") or result.get("box_role")) != box:
        raise ControlDataError(f"segment result {uri}: names box {result.get('box')!r}, not {box!r}")
    if result.get("status") not in SEGMENT_STATUSES:
        raise ControlDataError(
            f"segment result {uri}: status {result.get('status')!r} is not one of {', '.join(SEGMENT_STATUSES)}"
        )
    for lane in result.get("lanes") or []:
        name = lane.get("result_lane") if isinstance(lane, dict) else None
        if name is not None and name not in lanes:
            raise ControlDataError(f"segment result {uri}: lane {name!r} is not one of box {box}'s lanes")
    return result


def canonical(data: Any) -> bytes:
    """The bytes a control object is written as (its digest is over these)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
