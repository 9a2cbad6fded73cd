"""`neuronpipe report --results URI [--run-id ...] --out DIR`: comparison.json, REPORT.md and plots."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def build_report_files(results_uri: str, run_ids: list[str] | None, out_dir: str | Path,
                       s3_client: Any = None, duckdb_config: dict[str, Any] | None = None) -> list[Path]:
    """Build the report for ``run_ids`` (all runs when None) from a results root; return the files written.

    ``duckdb_config`` goes to ``duckdb.connect`` (e.g. ``{"memory_limit": "4GB"}`` on a shared machine).
    """
    from analytics.report import write_report
    from analytics.store import open_store
    from analytics.views import connect

    store = open_store(results_uri, s3_client=s3_client)
    con = connect(store, run_ids=run_ids, **(duckdb_config or {}))
    try:
        return write_report(con, run_ids, out_dir)
    finally:
        con.close()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write comparison.json, REPORT.md and plots from committed results")
    p.add_argument("--results", default="results", help="results root: directory or s3://bucket/prefix")
    p.add_argument("--run-id", action="append", default=None,
                   help="runs to report side by side (repeatable; the first is the baseline; default: all)")
    p.add_argument("--out", default="report", help="output directory")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from analytics.report.comparison import ComparisonError

    try:
        paths = build_report_files(args.results, args.run_id, args.out)
    except ComparisonError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0
