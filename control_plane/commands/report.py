"""`neuronpipe report --results URI [--run-id ...] --out DIR`: comparison.json, REPORT.md and plots.

Bad input gets one line and exit 2 (a results root that is missing or a file, an unknown or malformed run
id, an --out that is a file or cannot be written), before anything is written. Every output is written to a
temp name and renamed, so a failure leaves the previous report whole. Damaged attempts are left out with one
warning line and listed in the report's exclusions.
"""
from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write comparison.json, REPORT.md and plots from committed results")
    p.add_argument("--results", default="results", help="results root: directory or s3://bucket/prefix")
    p.add_argument("--run-id", action="append", default=None,
                   help="runs to report side by side (repeatable; the first is the baseline; default: all)")
    p.add_argument("--out", default="report", help="output directory")
    p.add_argument("--verify", action="store_true",
                   help="check every file's SHA-256 against its marker (also: NEURONPIPE_VERIFY_HASHES=1)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from analytics.report.comparison import ComparisonError
    from analytics.report.files import build_report_files
    from control_plane.commands._results import ResultsInputError, check_out_dir, open_results, read_errors

    try:
        open_results(args.results, args.run_id)
        check_out_dir(args.out)
    except ResultsInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        paths = build_report_files(args.results, args.run_id, args.out, verify=args.verify)
    except ComparisonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except read_errors() as exc:  # a full disk, a read-only --out, S3 access: one line; the old report stays
        print(f"error: report not written: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for p in paths:
        print(p)
    return 0
