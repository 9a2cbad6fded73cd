"""`neuronpipe report --results URI [--run-id ...] --out DIR [--html]`: comparison.json, REPORT.md, plots and
(``--html``) the self-contained REPORT.html.

Bad input gets one line and exit 2 (a results root that is missing or a file, an unknown or malformed run
id, an --out that is a file or cannot be written, --html without the plotly package, an unknown --pricing model,
a horizon of zero or less hours), before anything is written. The Decision is read for --pricing and the horizon
(control_plane.commands._decision).
Every output is written to a temp name and renamed, so a failure leaves the previous report whole. Damaged
attempts are left out with one warning line and listed in the report's exclusions.

From a bucket (``--from s3://bucket/results``, the same as ``--results``), it also prints a presigned link to each
reported run's REPORT.html that the finalize Lambda wrote beside the results (``<reports prefix>/<run id>/``), valid
for :data:`control_plane.aws.REPORT_URL_EXPIRY_S` (1 h): the page opens in a browser without AWS credentials.
"""

from __future__ import annotations

import argparse
import sys

from control_plane.commands import REGION_HELP
from control_plane.commands._decision import DecisionChoiceError, add_decision_arguments, decision_choice


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="write comparison.json, REPORT.md, plots and (--html) REPORT.html from committed results"
    )
    p.add_argument(
        "--results",
        "--from",
        dest="results",
        default="results",
        help="results root: directory or s3://bucket/prefix (from a bucket, each run's REPORT.html there "
        "is linked too: a presigned URL valid 1 h)",
    )
    p.add_argument(
        "--run-id",
        action="append",
        default=None,
        help="runs to report side by side (repeatable; the first is the baseline; default: all)",
    )
    p.add_argument("--out", default="report", help="output directory")
    p.add_argument(
        "--html",
        action="store_true",
        help="also write REPORT.html: one self-contained interactive page (data and plotly.js inlined; "
        "opens with no network; docs/reference/report-html.md)",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="check every file's SHA-256 against its marker (also: NEURONPIPE_VERIFY_HASHES=1)",
    )
    p.add_argument("--region", default=None, help="an s3:// results root: " + REGION_HELP)
    add_decision_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from analytics.report.comparison import ComparisonError
    from analytics.report.files import build_report_files
    from analytics.report.html_assets import ChartLibraryMissingError, chart_library_path
    from control_plane.commands._results import ResultsInputError, check_out_dir, open_results, read_errors

    try:
        choice = decision_choice(args)
    except DecisionChoiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        store = open_results(args.results, args.run_id)
        check_out_dir(args.out)
        if args.html:
            chart_library_path()
    except ResultsInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ChartLibraryMissingError as exc:
        print(f"error: --html: {exc}", file=sys.stderr)
        return 2
    try:
        paths = build_report_files(
            args.results, args.run_id, args.out, verify=args.verify, html=args.html, choice=choice
        )
    except ComparisonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except read_errors() as exc:  # a full disk, a read-only --out, S3 access: one line; the old report stays
        print(f"error: report not written: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for p in paths:
        print(p)
    if str(args.results).startswith("s3://"):
        print_report_links(args.results, args.run_id or _only_run(store), args.region)
    return 0


def _only_run(store) -> list[str]:
    """Without --run-id: the bucket's one run, if it holds exactly one (a link per run of a long history is noise)."""
    runs = store.run_ids()
    return runs if len(runs) == 1 else []


def print_report_links(results_uri: str, run_ids: list[str], region: str | None = None, client=None) -> None:
    """One line per run: the presigned URL of its REPORT.html in the bucket, or why there is none."""
    from analytics.report.html import HTML_FILE
    from control_plane.aws import ReportBucket, default_region
    from control_plane.commands._results import read_errors
    from control_plane.settings import get_settings

    bucket = ReportBucket.for_results(
        results_uri, get_settings().reports_prefix, client=client, region=region or default_region()
    )
    for run_id in run_ids:
        try:
            link = bucket.presigned(run_id, HTML_FILE)
        except read_errors() as exc:
            print(f"run {run_id}: no link to {HTML_FILE}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        if link is None:
            print(
                f"run {run_id}: no {HTML_FILE} at s3://{bucket.bucket}/{bucket.key(run_id, HTML_FILE)} (the finalize "
                "Lambda writes it when the run ends)",
                file=sys.stderr,
            )
        else:
            print(f"run {run_id}: {link.line()}")
