"""`neuronpipe compare A B` / `compare A1,A2,A3 B1,B2,B3`: each headline delta of side B against side A, a
run-level test over the runs (or a run's repeats), the noise floor, and a verdict.

Exit 1 when a delta is a real regression (verdict "slower", |%| ≥ --fail-pct; or an accuracy `worse` by at least
--fail-pct % of the baseline's accuracy), so a scheduled run can alert; 2 on bad input (an unknown run, a run on
both sides, a negative threshold); 4 when nothing was compared (no headline metric and no accuracy row on both
sides: a comparison that saw nothing is no pass); 0 otherwise (:data:`EXIT_CODES`). The rule is in
analytics/report/run_level.py, analytics/report/accuracy.py and docs/explanation/compare.md.
"""

from __future__ import annotations

import argparse
import sys

EXIT_REGRESSION = 1
EXIT_BAD_INPUT = 2
EXIT_NOTHING_COMPARED = 4
EXIT_CODES = f"""exit codes:
  0  no regression: every delta faster, within noise, untested, or slower by less than --fail-pct
  {EXIT_REGRESSION}  a regression: a delta slower by at least --fail-pct %, or an accuracy worse by at least
     --fail-pct % of the baseline's
  {EXIT_BAD_INPUT}  bad input: an unknown run or config, RUN_A equal to RUN_B, a run on both sides, a negative threshold
  {EXIT_NOTHING_COMPARED}  nothing compared: no headline metric and no accuracy row is present on both sides
"""


def register(sub: argparse._SubParsersAction) -> None:
    from analytics.report.compare import FAIL_PCT
    from analytics.report.run_level import PRACTICAL_MARGIN_PCT

    p = sub.add_parser(
        "compare",
        help="headline deltas of side B against side A (runs, comma-separated) with a "
        "run-level test, the noise floor and verdicts (exit 1 on a real regression)",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_a", metavar="RUN_A", help="the baseline: a run, or A/A repeats of it as RUN_A1,RUN_A2,...")
    p.add_argument(
        "run_b",
        metavar="RUN_B",
        nargs="?",
        help="the run(s) compared against it: RUN_B or RUN_B1,RUN_B2,... (omitted with --config/--vs)",
    )
    p.add_argument(
        "--config",
        metavar="CONFIG",
        dest="config_a",
        help="compare two server configs measured in the same run(s) RUN_A: this one is the baseline "
        "(each repeat pairs with the same repeat of --vs: a paired run-level test)",
    )
    p.add_argument("--vs", metavar="CONFIG", dest="config_b", help="the server config compared against --config")
    p.add_argument(
        "--floor-vs",
        metavar="CONFIG",
        dest="floor_config",
        help="with --config/--vs: an identical copy of --config declared in the same runs; its A/A "
        "spread against --config is the noise floor",
    )
    p.add_argument("--results", default="results", help="results root: directory or s3://bucket/prefix")
    p.add_argument(
        "--fail-pct",
        type=float,
        default=FAIL_PCT,
        help=f"a real 'slower' delta at least this many percent (or a 'worse' accuracy at least this "
        f"many percent of the baseline's) is a regression: exit 1 (default {FAIL_PCT:g})",
    )
    p.add_argument(
        "--floor-from",
        default="",
        metavar="RUN1,RUN2,...",
        help="earlier A/A runs (the same setup, the same instance type) whose run-to-run spread is the "
        "noise floor; without it the floor is measured within each side (repeats), else only "
        "the margin applies and one run per side is untested",
    )
    p.add_argument(
        "--margin-pct",
        type=float,
        default=PRACTICAL_MARGIN_PCT,
        help=f"practical-significance margin: the floor is at least this (default {PRACTICAL_MARGIN_PCT:g})",
    )
    p.add_argument("--all", action="store_true", help="also list metrics found on one side only")
    p.add_argument("--json", action="store_true", help="print the comparison.json `deltas` entry instead of a table")
    p.set_defaults(func=run)


def _p(r: dict, key: str = "p_value") -> str:
    p = r.get(key)
    return "-" if p is None else (f"{p:.3g}" if p >= 1e-4 else "<1e-4")


def format_rows(rows: list[dict], run_a: str, run_b: str) -> list[str]:
    from analytics.report.deltas_md import delta_interval_text, unit_text
    from analytics.report.format import fmt

    width = max([len(r["metric"]) for r in rows] + [6])
    wa, wb = max(12, len(run_a)), max(12, len(run_b))
    head = (
        f"{'metric':<{width}}  {run_a:>{wa}}  {run_b:>{wb}}  {'delta':>10}  {'%':>7}  {'95% CI of delta':>22}  "
        f"{'unit':<12}  {'p run':>7}  {'floor %':>7}  {'per-request':<14}  {'p req':>7}  verdict"
    )
    lines = [head]
    for r in rows:
        verdict = r["verdict"] + (" REGRESSION" if r["regression"] else "")
        if r["verdict"] in ("untested", "within noise") and r.get("note"):
            verdict += f" ({r['note']})"
        lines.append(
            f"{r['metric']:<{width}}  {fmt(r['a']):>{wa}}  {fmt(r['b']):>{wb}}  {fmt(r['delta']):>10}  "
            f"{fmt(r['pct']):>7}  {delta_interval_text(r) or '-':>22}  {unit_text(r):<12}  "
            f"{_p(r, 'run_p_adjusted'):>7}  {fmt(r.get('floor_pct')):>7}  {r.get('test') or '-':<14}  "
            f"{_p(r, 'p_adjusted'):>7}  {verdict}"
        )
    return lines


def run(args: argparse.Namespace) -> int:
    from analytics.report.compare import SidesOverlapError, UnknownRunError
    from analytics.report.sides import compare_sides, parse_side
    from control_plane.commands._results import ResultsInputError, open_results

    for name in ("fail_pct", "margin_pct"):
        if not getattr(args, name) >= 0:
            print(f"error: --{name.replace('_', '-')} must be a number ≥ 0, got {getattr(args, name)}", file=sys.stderr)
            return 2
    if args.config_a or args.config_b or args.floor_config:
        return _run_configs(args)
    if not args.run_b:
        print("error: compare needs RUN_B (or --config A --vs B to compare two configs of RUN_A)", file=sys.stderr)
        return 2
    runs_a, runs_b, floor_runs = parse_side(args.run_a), parse_side(args.run_b), parse_side(args.floor_from)
    if runs_a == runs_b:
        print(f"error: RUN_A and RUN_B are the same run ({args.run_a!r}); compare needs two runs", file=sys.stderr)
        return 2
    try:
        store = open_results(args.results)
        entry = compare_sides(store, runs_a, runs_b, floor_runs, args.fail_pct, args.margin_pct)
    except (UnknownRunError, SidesOverlapError, ResultsInputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _print(entry, args)


def _run_configs(args: argparse.Namespace) -> int:
    from analytics.report.compare import SidesOverlapError, UnknownConfigError, UnknownRunError
    from analytics.report.sides import compare_configs, parse_side
    from control_plane.commands._results import ResultsInputError, open_results

    if not (args.config_a and args.config_b):
        print("error: --config and --vs go together (and --floor-vs needs both)", file=sys.stderr)
        return 2
    if args.run_b or args.floor_from:
        print(
            "error: with --config/--vs, name the run(s) once (RUN_A, comma-separated) and no --floor-from; "
            "the floor comes from --floor-vs",
            file=sys.stderr,
        )
        return 2
    try:
        store = open_results(args.results)
        entry = compare_configs(
            store,
            parse_side(args.run_a),
            args.config_a,
            args.config_b,
            args.floor_config,
            args.fail_pct,
            args.margin_pct,
        )
    except (UnknownRunError, UnknownConfigError, SidesOverlapError, ResultsInputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _print(entry, args)


def _print(entry: dict, args: argparse.Namespace) -> int:
    import json

    from analytics.report.accuracy_md import delta_lines
    from analytics.report.deltas_md import floor_text, verdict_summary
    from analytics.report.sides import exit_code

    rows = entry["rows"]
    accuracy = delta_lines(entry, args.fail_pct, markdown=False)
    nothing = not rows and not entry.get("accuracy")
    if args.json:
        print(json.dumps(entry, sort_keys=True, indent=1, ensure_ascii=False))
    elif rows or accuracy:
        if rows:
            print("\n".join(format_rows(rows, entry["baseline"], entry["run"])))
            print("\n" + verdict_summary(rows, args.fail_pct))
            print(floor_text(entry))
        if accuracy:
            print(("\n" if rows else "") + "\n".join(accuracy))
    if not args.json and (entry["only_baseline"] or entry["only_run"]):
        print(
            f"\nonly in {entry['baseline']}: {len(entry['only_baseline'])} metric(s); "
            f"only in {entry['run']}: {len(entry['only_run'])}"
        )
        if args.all:
            for k in entry["only_baseline"]:
                print(f"  < {k}")
            for k in entry["only_run"]:
                print(f"  > {k}")
    if nothing:
        print(
            f"nothing compared: no headline metric is present on both sides ({entry['baseline']} has "
            f"{len(entry['only_baseline'])} of its own, {entry['run']} {len(entry['only_run'])}; --all lists "
            f"them): exit {EXIT_NOTHING_COMPARED}",
            file=sys.stderr,
        )
        return EXIT_NOTHING_COMPARED
    return exit_code(entry, args.fail_pct)
