"""`neuronpipe compare RUN_A RUN_B --results URI`: deltas of the headline metrics, B against A."""
from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="print headline-metric deltas of RUN_B against RUN_A")
    p.add_argument("run_a", metavar="RUN_A", help="the baseline run")
    p.add_argument("run_b", metavar="RUN_B", help="the run compared against it")
    p.add_argument("--results", default="results", help="results root: directory or s3://bucket/prefix")
    p.add_argument("--all", action="store_true", help="also list metrics found in one run only")
    p.set_defaults(func=run)


def format_deltas(deltas: list, run_a: str, run_b: str) -> list[str]:
    from analytics.report.markdown import fmt

    width = max([len(d.metric) for d in deltas] + [6])
    lines = [f"{'metric':<{width}}  {run_a:>14}  {run_b:>14}  {'delta':>12}  {'%':>8}"]
    for d in deltas:
        lines.append(f"{d.metric:<{width}}  {fmt(d.a):>14}  {fmt(d.b):>14}  {fmt(d.delta):>12}  {fmt(d.pct):>8}")
    return lines


def run(args: argparse.Namespace) -> int:
    from analytics.report.compare import UnknownRunError, compare_runs
    from analytics.report.comparison import build_comparison
    from analytics.store import open_store
    from analytics.views import connect

    con = connect(open_store(args.results), run_ids=[args.run_a, args.run_b])
    try:
        comparison = build_comparison(con, [args.run_a, args.run_b])
    finally:
        con.close()
    try:
        deltas, only_a, only_b = compare_runs(comparison, args.run_a, args.run_b)
    except UnknownRunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not deltas:
        print("no headline metric is present in both runs")
    else:
        print("\n".join(format_deltas(deltas, args.run_a, args.run_b)))
    if only_a or only_b:
        print(f"\nonly in {args.run_a}: {len(only_a)} metric(s); only in {args.run_b}: {len(only_b)}")
        if args.all:
            for k in only_a:
                print(f"  < {k}")
            for k in only_b:
                print(f"  > {k}")
    return 0
