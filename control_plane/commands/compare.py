"""`neuronpipe compare RUN_A RUN_B`: each headline delta of B against A, its 95 % interval, a test, a verdict.

Exit 1 when a delta is a real regression (verdict "slower", |%| ≥ --fail-pct), so a scheduled run can
alert; 0 otherwise; 2 on bad input (an unknown run, a negative threshold). The rule is in
analytics/report/compare.py and docs/explanation/compare.md.
"""
from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    from analytics.report.compare import FAIL_PCT

    p = sub.add_parser("compare", help="headline deltas of RUN_B against RUN_A with intervals and verdicts "
                                       "(exit 1 on a real regression)")
    p.add_argument("run_a", metavar="RUN_A", help="the baseline run")
    p.add_argument("run_b", metavar="RUN_B", help="the run compared against it")
    p.add_argument("--results", default="results", help="results root: directory or s3://bucket/prefix")
    p.add_argument("--fail-pct", type=float, default=FAIL_PCT,
                   help=f"a real 'slower' delta at least this many percent is a regression: exit 1 "
                        f"(default {FAIL_PCT:g})")
    p.add_argument("--all", action="store_true", help="also list metrics found in one run only")
    p.add_argument("--json", action="store_true", help="print the comparison.json `deltas` entry instead of a table")
    p.set_defaults(func=run)


def _p(r: dict, key: str = "p_value") -> str:
    p = r.get(key)
    return "-" if p is None else (f"{p:.3g}" if p >= 1e-4 else "<1e-4")


def format_rows(rows: list[dict], run_a: str, run_b: str) -> list[str]:
    from analytics.report.deltas_md import delta_interval_text
    from analytics.report.format import fmt

    width = max([len(r["metric"]) for r in rows] + [6])
    head = (f"{'metric':<{width}}  {run_a:>12}  {run_b:>12}  {'delta':>10}  {'%':>7}  {'95% CI of delta':>22}  "
            f"{'test':<14}  {'p':>7}  {'p Holm':>7}  verdict")
    lines = [head]
    for r in rows:
        verdict = r["verdict"] + (" REGRESSION" if r["regression"] else "")
        if r["verdict"] == "untested" and r.get("note"):
            verdict += f" ({r['note']})"
        lines.append(f"{r['metric']:<{width}}  {fmt(r['a']):>12}  {fmt(r['b']):>12}  {fmt(r['delta']):>10}  "
                     f"{fmt(r['pct']):>7}  {delta_interval_text(r) or '-':>22}  {r.get('test') or '-':<14}  {_p(r):>7}  {_p(r, 'p_adjusted'):>7}  {verdict}")
    return lines


def run(args: argparse.Namespace) -> int:
    import json

    from analytics.report.compare import UnknownRunError, is_regression
    from analytics.report.comparison import build_comparison
    from analytics.report.deltas_md import verdict_summary
    from analytics.store import open_store
    from analytics.views import connect

    if not args.fail_pct >= 0:
        print(f"error: --fail-pct must be a number ≥ 0, got {args.fail_pct}", file=sys.stderr)
        return 2
    if args.run_a == args.run_b:
        print(f"error: RUN_A and RUN_B are the same run ({args.run_a!r}); compare needs two runs", file=sys.stderr)
        return 2
    con = connect(open_store(args.results), run_ids=[args.run_a, args.run_b])
    try:
        comparison = build_comparison(con, [args.run_a, args.run_b])
    finally:
        con.close()
    known = {r["run_id"] for r in comparison["runs"]}
    for rid in (args.run_a, args.run_b):
        if rid not in known:
            print(f"error: {UnknownRunError(rid, known)}", file=sys.stderr)
            return 2
    entry = next(d for d in comparison["deltas"] if d["baseline"] == args.run_a and d["run"] == args.run_b)
    rows, entry["fail_pct"] = entry["rows"], args.fail_pct
    for r in rows:
        r["regression"] = is_regression(r, args.fail_pct)
    if args.json:
        print(json.dumps(entry, sort_keys=True, indent=1, ensure_ascii=False))
    elif not rows:
        print("no headline metric is present in both runs")
    else:
        print("\n".join(format_rows(rows, args.run_a, args.run_b)))
        print("\n" + verdict_summary(rows, args.fail_pct))
    if not args.json and (entry["only_baseline"] or entry["only_run"]):
        print(f"\nonly in {args.run_a}: {len(entry['only_baseline'])} metric(s); "
              f"only in {args.run_b}: {len(entry['only_run'])}")
        if args.all:
            for k in entry["only_baseline"]:
                print(f"  < {k}")
            for k in entry["only_run"]:
                print(f"  > {k}")
    return 1 if any(r["regression"] for r in rows) else 0
