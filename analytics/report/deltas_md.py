"""REPORT.md's "Runs side by side": each run's headline deltas against the first, with their intervals, tests,
noise floor and verdicts (comparison.json ``deltas``, built by :mod:`analytics.report.compare`), and the two lines the
``compare`` command prints the same way: a delta's interval and the verdict summary.
"""
from __future__ import annotations

from typing import Any

from analytics.report.accuracy_md import delta_lines
from analytics.report.compare import FAIL_PCT, pair_deltas, verdict_counts
from analytics.report.document import Comparison
from analytics.report.format import fmt, none_line, table


def verdict_summary(rows: list[dict[str, Any]], fail_pct: float) -> str:
    """``2 faster, 1 slower, 11 within noise, 2 untested; 1 regression(s) beyond 5 %`` (the CLI and REPORT.md)."""
    n = verdict_counts(rows)
    return (f"{n['faster']} faster, {n['slower']} slower, {n['within noise']} within noise, {n['untested']} untested; "
            f"{sum(bool(r.get('regression')) for r in rows)} regression(s) beyond {fail_pct:g} %")


def delta_interval_text(row: dict[str, Any]) -> str | None:
    """``[low, high]`` of a delta's 95 % interval: the run-level one where the row has units, else the
    per-request one (context); None when the row has neither."""
    low, high = ("run_ci_low", "run_ci_high") if row.get("run_ci_low") is not None else ("delta_ci_low",
                                                                                         "delta_ci_high")
    if row.get(low) is None:
        return None
    return f"[{fmt(row[low])}, {fmt(row[high])}]"


def unit_text(row: dict[str, Any]) -> str:
    """``run 3 v 3`` / ``repeat 5 v 5`` (the unit of the test and the units per side), or ``one run``."""
    if not row.get("unit"):
        return "one run"
    return f"{row['unit']} {row.get('units_a')} v {row.get('units_b')}"


def delta_cell(r: dict[str, Any], k: str) -> Any:
    """A deltas row's cell as REPORT.md shows it: the interval, the unit, the test, the verdict (regressions said)."""
    if k == "ci":
        return delta_interval_text(r)
    if k == "verdict":
        return r["verdict"] + (" (regression)" if r.get("regression") else "")
    if k == "test":
        return r.get("test") or (f"— {r['note']}" if r.get("note") else None)
    if k == "unit":
        return unit_text(r)
    return r.get(k)


def floor_text(entry: dict[str, Any]) -> str:
    """One line per measured floor family, and what the rest rests on (the CLI and REPORT.md)."""
    floors = entry.get("noise_floor") or []
    measured = [f for f in floors if f.get("measured")]
    lines = [entry.get("floor_heading") or
             f"noise floor (run-to-run spread, 95 % band of one A/A unit against another, at least the "
             f"{fmt(entry.get('margin_pct'))} % margin; a row of several runs per side is held to the band of "
             f"their means, its floor %):"]
    lines += [f"  {f['family']}: {fmt(f['floor_pct'])} % (spread {fmt(f['spread_pct'])} % between {f['unit']}s, "
              f"df {f['df']}; {f['source']})" for f in measured]
    rest = [f["family"] for f in floors if not f.get("measured")]
    if rest:
        lines.append(f"  not measured (margin {fmt(entry.get('margin_pct'))} % only): {', '.join(rest)}")
    return "\n".join(lines)


def s_side_by_side(c: Comparison) -> list[str]:
    ids = c.run_ids
    if len(ids) < 2:
        return []
    # comparison.json's deltas (tests and verdicts from the per-request values); a comparison built without
    # them gets the plain deltas, every one "untested"
    entries = c.deltas if c.deltas is not None else [pair_deltas(c.as_written(), ids[0], other)
                                                      for other in ids[1:]]
    lines = ["## Runs side by side", "",
             f"Headline deltas against the first run, `{ids[0]}`. The verdict rests on what varies between runs "
             "(rule 13): where both sides hold ≥ 2 units (runs, or a run's repeats of the point) a run-level "
             "test — Welch's t on the log per-unit values, Holm-adjusted over the comparison (p run) — must reject, "
             "its 95 % interval exclude 0, and |%| reach the metric family's noise floor (floor %: the measured "
             "A/A spread, at least the practical margin) for `faster` or `slower`, else `within noise`. With one "
             "run per side there is no between-run variance: `untested` (one run per side) unless a measured floor "
             "decides. The per-request test (Mann–Whitney U over requests, Welch's t over per-batch rates; p req, "
             "Holm-adjusted) is context, never the answer. A regression is a `slower` delta of at least the fail "
             "threshold (docs/explanation/compare.md).", ""]
    cols = [("metric", "metric"), ("a", "baseline"), ("b", "run"), ("delta", "delta"), ("pct", "%"),
            ("ci", "95 % CI of delta"), ("unit", "unit"), ("run_p_adjusted", "p run"), ("floor_pct", "floor %"),
            ("test", "per-request test"), ("p_adjusted", "p req"), ("verdict", "verdict")]

    cell = delta_cell

    for e in entries:
        rows = e["rows"]
        lines += [f"### `{e['run']}` vs `{e['baseline']}`", ""]
        lines += table(rows, [(k, {"a": e["baseline"], "b": e["run"]}.get(k, h)) for k, h in cols], cell) \
            if rows else none_line("shared headline metrics")
        if rows:
            lines += [verdict_summary(rows, e.get("fail_pct", FAIL_PCT)) + ".", ""]
            if "noise_floor" in e:
                lines += [floor_text(e).replace("\n  ", "\n- "), ""]
        if e.get("accuracy") or e.get("accuracy_note"):
            lines += ["Accuracy per task (each run's own documents; the paired test and its delta on the documents "
                      "both evaluated, exact McNemar, Holm-adjusted with the run-level tests above; `worse` by at "
                      "least the fail threshold relative to the baseline's accuracy is a regression):", ""]
            lines += delta_lines(e, e.get("fail_pct", FAIL_PCT))
        if e["only_baseline"] or e["only_run"]:
            lines += [f"Only in `{e['baseline']}`: {len(e['only_baseline'])} metric(s); "
                      f"only in `{e['run']}`: {len(e['only_run'])}.", ""]
    return lines
