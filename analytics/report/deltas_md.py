"""REPORT.md's "Runs side by side": each run's headline deltas against the first, with their intervals, tests
and verdicts (comparison.json ``deltas``, built by :mod:`analytics.report.compare`), and the two lines the
``compare`` command prints the same way: a delta's interval and the verdict summary.
"""
from __future__ import annotations

from typing import Any

from analytics.report.compare import FAIL_PCT, pair_deltas, verdict_counts
from analytics.report.format import fmt, none_line, table


def verdict_summary(rows: list[dict[str, Any]], fail_pct: float) -> str:
    """``2 faster, 1 slower, 11 within noise, 2 untested; 1 regression(s) beyond 5 %`` (the CLI and REPORT.md)."""
    n = verdict_counts(rows)
    return (f"{n['faster']} faster, {n['slower']} slower, {n['within noise']} within noise, {n['untested']} untested; "
            f"{sum(bool(r.get('regression')) for r in rows)} regression(s) beyond {fail_pct:g} %")


def delta_interval_text(row: dict[str, Any]) -> str | None:
    """``[low, high]`` of a delta's 95 % interval; None when the row has none."""
    if row.get("delta_ci_low") is None:
        return None
    return f"[{fmt(row['delta_ci_low'])}, {fmt(row['delta_ci_high'])}]"


def s_side_by_side(c: dict[str, Any]) -> list[str]:
    ids = c["run_ids"]
    if len(ids) < 2:
        return []
    # comparison.json's deltas (tests and verdicts from the per-request values); a comparison built without
    # them gets the plain deltas, every one "untested"
    entries = c["deltas"] if "deltas" in c else [pair_deltas(c, ids[0], other) for other in ids[1:]]
    lines = ["## Runs side by side", "",
             f"Headline deltas against the first run, `{ids[0]}`, with a 95 % interval of the delta and a test: "
             "Mann–Whitney U over the point's per-request values (latency; interval: bootstrap of the quantile "
             "difference), Welch's t over its per-batch rates (throughput), p-values adjusted together by "
             "Holm–Bonferroni (p Holm). A delta is `faster` or `slower` only when the adjusted test rejects at "
             "α = 0.05 and the interval excludes 0, else `within noise`; `untested` "
             "where no per-sample values exist. A regression is a `slower` delta of at least the fail threshold "
             "(docs/explanation/compare.md).", ""]
    cols = [("metric", "metric"), ("a", "baseline"), ("b", "run"), ("delta", "delta"), ("pct", "%"),
            ("ci", "95 % CI of delta"), ("test", "test"), ("p_value", "p"), ("p_adjusted", "p Holm"),
            ("verdict", "verdict")]

    def cell(r: dict[str, Any], k: str) -> Any:
        if k == "ci":
            return delta_interval_text(r)
        if k == "verdict":
            return r["verdict"] + (" (regression)" if r.get("regression") else "")
        if k == "test":
            return r.get("test") or (f"— {r['note']}" if r.get("note") else None)
        return r.get(k)

    for e in entries:
        rows = e["rows"]
        lines += [f"### `{e['run']}` vs `{e['baseline']}`", ""]
        lines += table(rows, [(k, {"a": e["baseline"], "b": e["run"]}.get(k, h)) for k, h in cols], cell) \
            if rows else none_line("shared headline metrics")
        if rows:
            lines += [verdict_summary(rows, e.get("fail_pct", FAIL_PCT)) + ".", ""]
        if e["only_baseline"] or e["only_run"]:
            lines += [f"Only in `{e['baseline']}`: {len(e['only_baseline'])} metric(s); "
                      f"only in `{e['run']}`: {len(e['only_run'])}.", ""]
    return lines
