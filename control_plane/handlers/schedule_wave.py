"""``schedule_wave``: called by the state machine before each wave of a run and once after the last.

Thin over :func:`control_plane.waves.schedule` (read the run's lane statuses from the results store, record the
lanes that cannot run, return the next wave's box segments or the run's outcome). Payload (the state machine's
``ScheduleWave`` state, or ``ScheduleWavePlanned`` for an execution that planned itself): ``run_id``, ``results_uri``,
``waves`` and ``nodes`` and ``boxes`` (from the execution input, or the state's reference to the plan kept in S3:
``plan_uri`` and ``plan_digest``, the waves and nodes read back from there), ``schedule`` (this function's previous
answer), ``results`` (the last wave's segment results).

Unlike the event-driven handlers, a payload it cannot read raises (``ScheduleInputError``): the state machine's
Catch ends the run FAILED with that error, the boxes already stopped (it is called only between waves)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from control_plane.control_data import S3ControlBlobs
from control_plane.handlers.observability import logger, metrics, tracer
from control_plane.waves import ScheduleInputError, schedule


def open_results(results_uri: Any) -> Any:
    from analytics.store import open_store

    if not isinstance(results_uri, str) or not results_uri.startswith("s3://"):
        raise ScheduleInputError(f"schedule payload: results_uri must be s3://..., got {results_uri!r}")
    return open_store(results_uri)


def inline_max_bytes() -> int:
    """A wave's segments above this run as a Distributed Map (``NEURONPIPE_INLINE_SEGMENTS_MAX_BYTES``, default
    :data:`control_plane.waves.INLINE_SEGMENTS_MAX_BYTES`; lower only, never above it: the state must hold them)."""
    import os

    from control_plane.waves import INLINE_SEGMENTS_MAX_BYTES

    raw = os.environ.get("NEURONPIPE_INLINE_SEGMENTS_MAX_BYTES", "")
    try:
        value = int(raw) if raw.strip() else INLINE_SEGMENTS_MAX_BYTES
    except ValueError:
        raise ScheduleInputError(f"NEURONPIPE_INLINE_SEGMENTS_MAX_BYTES={raw!r}: expected a number of bytes") from None
    return max(0, min(value, INLINE_SEGMENTS_MAX_BYTES))


@logger.inject_lambda_context(log_event=False, correlation_id_path="run_id")
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    if not isinstance(event, dict):
        raise ScheduleInputError(f"schedule payload: expected a JSON object, got {type(event).__name__}")
    store = open_results(event.get("results_uri"))
    blobs = S3ControlBlobs(str(event["results_uri"]).removeprefix("s3://").split("/", 1)[0])
    result = schedule(event, store, blobs=blobs, inline_max_bytes=inline_max_bytes())
    if result["recorded"]:
        metrics.add_metric(
            name="LanesRecordedByScheduler",
            unit=MetricUnit.Count,
            value=result.get("recorded_count", len(result["recorded"])),
        )
    logger.info(
        "run done" if result["done"] else f"wave {result['wave']} scheduled",
        extra={
            "next_wave": result["next_wave"],
            "box_failures": result["box_failures"],
            "recorded": result["recorded"],
            "outcome": result.get("outcome"),
            "distributed": result.get("distributed"),
            "segments": [
                f"{s.get('box') or s['box_role']}:{','.join(step['lane'] for step in s['lanes'])}"
                for s in result.get("segments", [])
            ],
        },
    )
    return result
