"""`neuronpipe query "SQL"`: DuckDB with one view per table (and the derived views) over committed results."""
from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("query", help="run SQL over the committed results (local directory or s3://)")
    p.add_argument("sql", help='e.g. "select count(*) from host_bench"')
    p.add_argument("--results", default="results", help="results root: directory or s3://bucket/prefix")
    p.add_argument("--run-id", action="append", default=None, help="restrict to these runs (repeatable)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import duckdb

    from analytics.store import open_store
    from analytics.views import connect

    con = connect(open_store(args.results), run_ids=args.run_id)
    try:
        rel = con.sql(args.sql)
    except duckdb.Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if rel is None:
        return 0
    if args.format == "table":
        rel.show(max_rows=10_000, max_width=10_000)
    elif args.format == "csv":
        import csv

        writer = csv.writer(sys.stdout)
        writer.writerow(rel.columns)
        writer.writerows(rel.fetchall())
    else:
        import json

        cols = rel.columns
        for row in rel.fetchall():
            print(json.dumps(dict(zip(cols, row)), default=str))
    return 0
