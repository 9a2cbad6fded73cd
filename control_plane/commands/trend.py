"""`neuronpipe trend`: each metric of one request across its runs, with its change points and what changed.

The series are ``report_trend``'s (81_report_trend.sql): per (request fingerprint, instance type, point · metric),
the value per run with its interval, in run order; :mod:`analytics.report.trend` finds the change points
(E-divisive means, analytics.changepoints), the noise band of each regime and, at each change point, what
provenance says changed between the runs on either side.

Which series: ``--run RUN`` (that run's request fingerprint and instance type), or ``--fingerprint FP`` (with
``--instance-type``), else every series in the store; ``--metric`` keeps one metric family. Bad input gets one line
and exit 2: an unknown run, a run without a fingerprint (it was never finalized by the control plane), no series,
and a series too short for change points (one line naming each; the others print).
"""

from __future__ import annotations

import argparse
import json
import sys

EXIT_REFUSED = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trend", help="a request's metrics across its runs: values, noise band, change points")
    p.add_argument("--results", default="results", help="results root: directory or s3://bucket/prefix")
    p.add_argument("--run", default=None, help="the series of this run's request fingerprint and instance type")
    p.add_argument("--fingerprint", default=None, help="the series of this request fingerprint")
    p.add_argument("--instance-type", default=None, help="with --fingerprint: only this instance type")
    p.add_argument("--metric", default=None, help="only this metric family (e.g. p99_ttft_ms)")
    p.add_argument("--json", action="store_true", help="print the series as JSON (the report's trend section)")
    p.set_defaults(func=trend_command)


def trend_command(args: argparse.Namespace) -> int:
    from analytics.report.rows import clean
    from analytics.report.trend import trend_section
    from analytics.views import connect
    from control_plane.commands._results import ResultsInputError, open_results, read_errors

    try:
        store = open_results(args.results, [args.run] if args.run else None)
        con = connect(store)
        try:
            fp, itype = args.fingerprint, args.instance_type
            if args.run:
                found = con.execute(
                    "SELECT request_fingerprint, instance_type FROM report_trend_runs WHERE run_id = ?", [args.run]
                ).fetchall()
                if not found:
                    raise ResultsInputError(
                        f"--run {args.run}: no request fingerprint (the control plane commits it when it finalizes "
                        "a run; this run was not finalized by it)"
                    )
                fp, itype = found[0]
            present = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
            section = trend_section(con, present, fp, itype, args.metric)
        finally:
            con.close()
    except ResultsInputError as exc:
        print(f"trend: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except read_errors() as exc:
        print(f"trend: cannot read {args.results}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    series = [s for s in (section or {}).get("series", []) if args.metric in (None, s["metric"])]
    if not series:
        what = f"request {fp}" if fp else "the store"
        print(
            f"trend: no series of two runs or more for {what}{f' and metric {args.metric}' if args.metric else ''}",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    short = [s for s in series if s["note"]]
    for s in short:
        print(f"trend: series {s['series']} ({s['instance_type'] or 'local'}): {s['note']}", file=sys.stderr)
    shown = [s for s in series if not s["note"]]
    if args.json:
        print(json.dumps(clean({"method": section["method"], "series": shown}), indent=2, default=str))
    else:
        print(f"method: {section['method']}")
        for s in shown:
            print(render_series(s))
    return 0 if shown else EXIT_REFUSED


def render_series(s: dict) -> str:
    """One series as text: header, a row per run (value, interval, band), then its change points."""
    from analytics.report.format import fmt

    lines = [f"\n{s['series']} · {s['instance_type'] or 'local'} · request {s['request_fingerprint']}"]
    order = [p["run_id"] for p in s["points"]]
    band = {}
    for seg in s["segments"]:
        for rid in order[order.index(seg["from_run"]) : order.index(seg["to_run"]) + 1]:
            band[rid] = seg
    for p in s["points"]:
        seg = band[p["run_id"]]
        lines.append(
            f"  {p['run_id']:<28} {fmt(p['value']):>10}  [{fmt(p['ci_low'])}, {fmt(p['ci_high'])}]  "
            f"band {fmt(seg['band_low'])}–{fmt(seg['band_high'])}"
        )
    for cp in s["change_points"]:
        lines.append(
            f"  change point before {cp['run_after']} (after {cp['run_before']}): {cp['pct']:+.1f} %, "
            f"p = {fmt(cp['p_value'])}; {cp['what_changed_text']}"
        )
    if not s["change_points"]:
        lines.append("  no change point at α = 0.05")
    return "\n".join(lines)
