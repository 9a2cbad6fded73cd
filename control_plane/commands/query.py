"""`neuronpipe query "SQL"`: DuckDB with one view per table (and the derived views) over committed results.

Bad input gets one line and exit 2: a results root that is missing or a file, an unknown or malformed run
id, empty or non-UTF-8 SQL, SQL that fails (at parse or while rows are produced). A damaged attempt is left
out of the views with one warning line; the query runs over the rest.
"""
from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("query", help="run SQL over the committed results (local directory or s3://)")
    p.add_argument("sql", help='e.g. "select count(*) from host_bench"')
    p.add_argument("--results", default="results", help="results root: directory or s3://bucket/prefix")
    p.add_argument("--run-id", action="append", default=None, help="restrict to these runs (repeatable)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument("--verify", action="store_true",
                   help="check every file's SHA-256 against its marker (also: NEURONPIPE_VERIFY_HASHES=1)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import duckdb

    from analytics.views import connect
    from control_plane.commands._results import (ResultsInputError, open_results, read_errors, stdout_closed,
                                                 utf8_text)

    try:
        sql = utf8_text(args.sql, "the SQL")
        if not sql.strip():
            raise ResultsInputError("the SQL is empty")
        store = open_results(args.results, args.run_id)
    except ResultsInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        con = connect(store, run_ids=args.run_id, verify=args.verify)
    except read_errors() as exc:
        print(f"error: cannot read {args.results}: {exc}", file=sys.stderr)
        return 2
    try:
        with stdout_closed():
            return _print(con.sql(sql), args.format)
    except duckdb.Error as exc:
        print(f"error: {type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


def _print(rel, fmt: str) -> int:
    if rel is None:
        return 0
    if fmt == "table":
        rel.show(max_rows=10_000, max_width=10_000)
    elif fmt == "csv":
        import csv

        rows = rel.fetchall()  # fetched before the header: a run-time error prints nothing half-way
        writer = csv.writer(sys.stdout)
        writer.writerow(rel.columns)
        writer.writerows(rows)
    else:
        import json

        cols, rows = rel.columns, rel.fetchall()
        for row in rows:
            print(json.dumps(dict(zip(cols, row)), default=str))
    return 0
