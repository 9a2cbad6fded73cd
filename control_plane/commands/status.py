"""`neuronpipe status RUN_ID`: where a run is, read from its execution history (name = run id).

Once the run has ended it shows the run's outcome (succeeded / partial / failed, the failed and skipped lanes
with their reasons: ``$.outcome`` of the execution's output, or the failed execution's cause) and a presigned link
to the REPORT.html the finalize Lambda wrote (valid :data:`control_plane.aws.REPORT_URL_EXPIRY_S`, 1 h; in ``--json``
as ``report_html``), and exits as ``run --aws`` does (0 succeeded, 3 partial, 1 failed)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from typing import Any

from control_plane.commands import REGION_HELP
from control_plane.progress import LaneProgress, RunProgress, progress_from_history
from pipeline.printable import visible

STATUS_STYLE = {
    "waiting": "dim",
    "running": "bold cyan",
    "succeeded": "green",
    "skipped": "yellow",
    "failed": "bold red",
    "timed_out": "bold red",
    "not run": "magenta",
}
OUTCOME_STYLE = {"succeeded": "bold green", "partial": "bold yellow", "failed": "bold red"}


def _elapsed(lp: LaneProgress, now: datetime | None) -> str:
    if lp.started is None:
        return ""
    end = lp.ended or now
    if end is None:
        return ""
    m, s = divmod(int((end - lp.started).total_seconds()), 60)
    return f"{m:d}:{s:02d}"


def render_progress(progress: RunProgress, now: datetime | None = None):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"run {progress.run_id or '?'}: {progress.status}")
    for col in ("box", "lane", "status", "elapsed", "detail"):
        table.add_column(col)
    for lp in progress.lanes:
        table.add_row(
            lp.box_role,
            lp.lane,
            Text(lp.status, style=STATUS_STYLE.get(lp.status, "")),
            _elapsed(lp, now),
            Text(visible(lp.detail[:160]), overflow="ellipsis"),
        )
    phases = Text("  ".join(f"{p.box_role} {p.instance_id or ''}: {p.state}" for p in progress.phases))
    parts: list[Any] = [table, phases]
    if progress.outcome:
        oc = progress.outcome
        line = f"outcome: {oc['status']}"
        if oc.get("failed"):
            line += f"; failed: {', '.join(oc['failed'])}"
        if oc.get("skipped"):
            line += f"; skipped: {', '.join(oc['skipped'])}"
        if oc.get("why"):
            line += f"; {oc['why']}"
        parts.append(Text(visible(line), style=OUTCOME_STYLE.get(oc["status"], "")))
    if progress.report_failure is not None:
        rebuild = (
            f"neuronpipe report --results {progress.results_uri} --run-id {progress.run_id}"
            if progress.results_uri
            else "neuronpipe report --run-id …"
        )
        parts.append(
            Text(
                visible(
                    f"error: {progress.error}: {progress.report_failure}; the lanes' results are "
                    f"committed: `{rebuild}` builds the report"
                ),
                style="red",
            )
        )
    elif progress.error:
        parts.append(Text(visible(f"error: {progress.error}: {progress.cause or ''}"), style="red"))
    return Group(*parts)


def follow_shown(console: Any, follow: Any, live: bool) -> RunProgress:
    """Follow an execution while showing it: ``follow(callback)`` calls back with each RunProgress and returns the
    last. ``live``: a table redrawn in place and erased at the end (the caller prints the final one, once; on a pipe
    or a log Live would print its last frame too, and the table came out twice); else one line per change."""
    from rich.live import Live

    if not live:

        def show(progress: RunProgress) -> None:
            line = "  ".join(f"{lp.box_role}:{lp.lane}={lp.status}" for lp in progress.lanes)
            console.print(f"[{progress.status}] {line}")

        return follow(show)
    with Live(console=console, refresh_per_second=2, transient=True) as view:
        return follow(lambda p: view.update(render_progress(p, datetime.now(timezone.utc))))


def report_page(progress: RunProgress, settings: Any, region: str | None, client: Any = None) -> tuple[Any, str]:
    """A presigned link to the ended run's REPORT.html (``control_plane.aws.ReportBucket``: 1 h), or why there is
    none: the run still going, no results bucket known, no page written yet, or the bucket refusing."""
    from botocore.exceptions import BotoCoreError, ClientError

    from control_plane.aws import REPORT_PAGE, ReportBucket

    if not progress.done:
        return None, ""
    results = progress.results_uri or settings.results_uri
    if not results or not str(results).startswith("s3://") or not progress.run_id:
        return None, "no link to REPORT.html: the run's results bucket is not known (set NEURONPIPE_RESULTS_URI)"
    bucket = ReportBucket.for_results(results, settings.reports_prefix, client=client, region=region)
    try:
        link = bucket.presigned(progress.run_id)
    except (BotoCoreError, ClientError) as exc:
        return None, f"no link to REPORT.html: {type(exc).__name__}: {exc}"
    if link is None:
        return None, f"no {REPORT_PAGE} at s3://{bucket.bucket}/{bucket.key(progress.run_id, REPORT_PAGE)} (yet)"
    return link, ""


def _with_store(progress: RunProgress, history: list[dict[str, Any]], region: str | None) -> RunProgress:
    """The progress with a Distributed Map wave's lanes filled in from the run's results store (one warning line
    and the history's view where the store cannot be read from here)."""
    from analytics.store import open_store
    from control_plane.aws import aws_client
    from control_plane.progress import CommittedLanes, read_committed

    def committed(run_id: str, since: datetime | None) -> dict[str, str]:
        return CommittedLanes(open_store(str(progress.results_uri), aws_client("s3", region)))(run_id, since)

    known = read_committed(committed, progress)
    return progress if known is None else progress_from_history(history, known)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status",
        help="show where an AWS run is (phases, lanes, errors; once it has ended, a "
        "presigned link to its REPORT.html, valid 1 h)",
    )
    p.add_argument("run_id")
    p.add_argument("--json", action="store_true", help="print the progress as JSON")
    p.add_argument("--region", default=None, help=REGION_HELP)
    p.set_defaults(func=status_command)


def status_command(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from control_plane.aws import ExecutionNotFoundError, Executions, aws_client, default_region
    from control_plane.console import make_console
    from control_plane.settings import get_settings

    settings = get_settings()
    executions = Executions(aws_client("stepfunctions", args.region or default_region()))
    try:
        arn = settings.state_machine_arn or executions.find_state_machine(settings.state_machine_name)
        history = executions.history(Executions.execution_arn(arn, args.run_id))
    except ExecutionNotFoundError as exc:
        print(f"error: no run {args.run_id}: {exc}", file=sys.stderr)
        return 2
    progress = progress_from_history(history)
    if progress.distributed and progress.run_id and progress.results_uri:  # its lanes' events are not in the history
        progress = _with_store(progress, history, args.region or default_region())
    link, why = report_page(progress, settings, args.region or default_region())
    if args.json:
        page = (
            None
            if link is None
            else {
                "uri": link.uri,
                "url": link.url,
                "expires_in_s": link.expires_in_s,
                "expires_at": link.expires_at.isoformat(),
            }
        )
        print(json.dumps({**asdict(progress), "report_html": page}, default=str, indent=2))
    else:
        make_console().print(
            render_progress(progress, datetime.now(tz=history[-1]["timestamp"].tzinfo) if history else None)
        )
        if link is not None:
            print(f"report: {link.line()}")
        elif why:
            print(f"report: {why}", file=sys.stderr)
    return progress.exit_code()
