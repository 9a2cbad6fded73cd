"""``finalize_run``: build the run's report with DuckDB (REPORT.md, comparison.json and the self-contained
REPORT.html; no PNGs: the layer has no matplotlib) and write it to ``s3://<bucket>/<reports_prefix>/<run_id>/``.
The report builder is injected; ``neuronpipe status`` and ``report --from`` link to the page (presigned, 1 h).

The answer's ``report_status`` says what came of it: ``written`` (with the files' URIs), ``failed`` (the report could
not be built or uploaded: ``error`` and a bounded ``message``; the run's results stay committed, so ``neuronpipe
report`` can build it again) or ``refused`` (a malformed payload, logged in one line). The state machine ends a run
whose report was not written ``Report.Failed`` (``statemachine.build``): a run without its report is not a success.
Every failure of the build is answered, never raised, so its message crosses Step Functions bounded."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from control_plane.aws import ReportBucket
from control_plane.handlers.observability import logger, metrics, parse_event, tracer
from control_plane.models import RUN_ID_PATTERN, RunStatus
from control_plane.settings import get_settings

ReportBuilder = Callable[[str, Sequence[str], str], Sequence[Any]]
REQUIRED_FILES = ("REPORT.md", "comparison.json", "REPORT.html")
REPORT_MESSAGE_LIMIT = 2000  # characters of a failure's message in the answer (the log has it whole)


class ReportBuildError(RuntimeError):
    """The report could not be built (or came out without a required file)."""


class FinalizeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    run_id: str = Field(pattern=RUN_ID_PATTERN)
    results_uri: str
    status: RunStatus  # the run's outcome status (succeeded | partial | failed)
    outcome: dict[str, Any] | None = None  # pipeline.graph.RunOutcome.to_json(), from the scheduler
    failure: dict[str, Any] | None = None


def load_report_builder() -> ReportBuilder:
    """The project's report builder (``analytics.report.files.build_report_files``), REPORT.html included (the
    layer carries plotly.min.js: ``infra.bundling``)."""
    from functools import partial

    try:
        from analytics.report.files import build_report_files
    except ModuleNotFoundError as exc:
        raise ReportBuildError(
            f"the report builder (analytics.report.files) cannot be imported in this build: {exc}"
        ) from exc
    return partial(build_report_files, html=True)


def judge(request: FinalizeRequest, store: Any, blobs: Any) -> Any:
    """The run judged against its baseline before its report is built (the report's first section reads the
    verdict rows): a :class:`control_plane.history.Judgement`, or None when the planners kept no request."""
    from control_plane.history import judge_run, read_history

    if request.status == "failed":  # a failed run neither joins the history nor is judged against it
        return None
    kept = read_history(blobs, request.run_id)
    if kept is None:
        return None
    run_request, schedule = kept
    return judge_run(store, request.run_id, run_request, schedule=schedule)


def announce(judgement: Any, store: Any, topic_arn: str | None, report_uri: str | None, sns: Any = None) -> bool:
    """Publish a regressed run to the alert topic (metric, size with interval, runs, what changed, the report);
    False when there is nothing to announce or no topic."""
    from control_plane.history import alert_message, what_changed

    if judgement is None or judgement.outcome != "regressed" or not topic_arn:
        return False
    subject, body = alert_message(
        judgement, report_uri, what_changed(store, judgement.baseline_runs[-1], judgement.run_id)
    )
    if sns is None:
        import boto3

        sns = boto3.client("sns")
    sns.publish(TopicArn=topic_arn, Subject=subject, Message=body)
    return True


def finalize(
    request: FinalizeRequest,
    reports: ReportBucket,
    build_report: ReportBuilder,
    judged: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    judgement = None
    if judged is not None:
        try:
            judgement = judged()
        except Exception as exc:  # noqa: BLE001 - a baseline that cannot be judged is said, the report still written
            logger.warning("run not judged against its baseline", extra={"error": f"{type(exc).__name__}: {exc}"})
            judgement = exc
    with tempfile.TemporaryDirectory(prefix="neuronpipe-report-") as out:
        try:
            paths = [Path(p) for p in build_report(request.results_uri, [request.run_id], out)]
        except Exception as exc:
            raise ReportBuildError(f"report for run {request.run_id} failed: {type(exc).__name__}: {exc}") from exc
        names = {p.name for p in paths}
        missing = [n for n in REQUIRED_FILES if n not in names]
        if missing:
            raise ReportBuildError(f"report for run {request.run_id} lacks {', '.join(missing)}")
        uris = reports.upload(request.run_id, [p for p in paths if p.is_file()])
    report_uri = next(u for u in uris if u.endswith("/REPORT.md"))
    page_uri = next((u for u in uris if u.endswith("/REPORT.html")), None)
    return {
        "run_id": request.run_id,
        "status": request.status,
        "report_status": "written",
        "report_uri": report_uri,
        "report_html_uri": page_uri,
        "files": uris,
        "judgement": _judgement_answer(judgement),
    }


def _judgement_answer(judgement: Any) -> dict[str, Any] | None:
    if judgement is None:
        return None
    if isinstance(judgement, Exception):
        return {"outcome": "not judged", "event": None, "note": _bounded(f"{type(judgement).__name__}: {judgement}")}
    return judgement.answer()


def _bounded(text: str, limit: int = REPORT_MESSAGE_LIMIT) -> str:
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# The correlation id comes from the event before the event is logged: a warm worker must not log a new run's
# event under the previous run's id.
@logger.inject_lambda_context(log_event=True, correlation_id_path="run_id")
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    event, message = parse_event(event, FinalizeRequest)
    if event is None:
        return {"status": "refused", "report_status": "refused", "error": "MalformedEventError", "message": message}
    try:
        settings = get_settings().require("results_uri")
        from analytics.store import open_store
        from control_plane.control_data import S3ControlBlobs

        store = open_store(event.results_uri)
        holder: dict[str, Any] = {}

        def judged() -> Any:
            holder["j"] = judge(event, store, S3ControlBlobs(settings.results_bucket))
            return holder["j"]

        result = finalize(
            event, ReportBucket(settings.results_bucket, settings.reports_prefix), load_report_builder(), judged
        )
        try:
            announced = announce(holder.get("j"), store, settings.alert_topic_arn, result.get("report_html_uri"))
        except Exception as exc:  # noqa: BLE001 - the report stands; the alert's failure is logged and counted
            logger.exception("regression not announced", extra={"error": type(exc).__name__})
            metrics.add_metric(name="AnnouncementsFailed", unit=MetricUnit.Count, value=1)
            announced = False
        if announced:
            metrics.add_metric(name="RegressionsAnnounced", unit=MetricUnit.Count, value=1)
        result["announced"] = announced
    except Exception as exc:  # noqa: BLE001 - every failure is answered (bounded), never a success
        error = type(exc.__cause__ or exc).__name__ if isinstance(exc, ReportBuildError) else type(exc).__name__
        logger.exception("report not written", extra={"run_status": event.status, "error": error})
        metrics.add_metric(name="ReportsFailed", unit=MetricUnit.Count, value=1)
        return {
            "run_id": event.run_id,
            "status": event.status,
            "report_status": "failed",
            "error": error,
            "message": _bounded(f"{type(exc).__name__}: {exc}"),
        }
    metrics.add_metric(name="ReportsWritten", unit=MetricUnit.Count, value=1)
    logger.info("report written", extra={"report_uri": result["report_uri"], "run_status": event.status})
    return result
