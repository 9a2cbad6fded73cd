"""Headline metrics of a comparison, their deltas between runs, and whether each delta is real.

Points match across runs on the measurement key (lane, model, server config, shape, concurrency, rate);
what matches in one run only is listed, never dropped silently. :func:`compare_runs` is the plain
arithmetic on comparison.json values. :func:`deltas_section` (comparison.json ``deltas``) adds, for each
serving headline of a point matched in both runs, a 95 % interval of the delta and a two-sample test
over the point's per-request values (latency quantiles) or per-batch rates (throughput), and a verdict:

    real  = Holm-adjusted test p < ALPHA (0.05)  and  the interval excludes 0  and  the delta has the interval's sign
    verdict = "faster" | "slower" when real (by the sign and whether higher is better), else "within noise";
              "untested" when the metric has no per-sample values here (the note says why)
    regression = verdict "slower" and |pct| >= the fail threshold (FAIL_PCT = 5 %, `compare --fail-pct`)

Latency (p50/p99 TTFT, TPOT, E2EL): Mann–Whitney U on the successful requests' values, percentile
bootstrap of the quantile difference. Training tokens/s: Mann–Whitney U over the per-step tokens/s (steps after
the first), bootstrap of the median difference. Throughput (output tok/s): Welch's t on the point's per-batch rates
(view point_rate_batches), Welch interval of the difference of means. The p-values of one comparison are
adjusted together (Holm–Bonferroni over its distinct tests: a Mann–Whitney test shared by a metric's p50 and p99
counts once), so a comparison of many points and metrics raises a false verdict with probability at most ALPHA.
docs/explanation/compare.md states the rule.

Part of the report's data stage: it imports no render module (a delta's text, the verdict summary line and
REPORT.md's side-by-side section are :mod:`analytics.report.deltas_md`'s).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from analytics.report.rows import clean

SERVING_HEADLINES = ("output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms")
# tested in the deltas only (REPORT.md's serving tables and `compare_runs` keep the five headlines)
SERVING_TESTED_EXTRA = ("p50_e2el_ms", "p99_e2el_ms")
TRAINING_HEADLINES = ("tokens_per_s", "mfu", "last_loss")
COMPILE_HEADLINES = ("cold_wall_s", "warm_wall_s")
SUSTAINED_HEADLINES = ("retention_vs_first", "retention_vs_peak")

ALPHA = 0.05
FAIL_PCT = 5.0
MIN_REQUESTS = 10  # per run and metric: the normal approximation of Mann-Whitney U needs ~10 per sample
MIN_BATCHES = 2    # per run: Welch needs a variance from each side
VERDICTS = ("faster", "slower", "within noise", "untested")
# per-request column of request_metrics behind each latency headline, and its quantile
LATENCY_SOURCE = {f"p{q}_{m}_ms": (f"{m}_ms", q / 100.0) for q in (50, 99) for m in ("ttft", "tpot", "e2el")}
# per-batch column of point_rate_batches behind each throughput headline
RATE_SOURCE = {"output_throughput": "output_rate", "request_throughput": "request_rate",
               "total_token_throughput": "total_token_rate", "goodput": "good_rate"}
HIGHER_IS_BETTER = ("throughput", "goodput", "tokens_per_s", "mfu", "retention")
UNTESTED_WHY = {
    "compile": "one wall time per compile and run: no per-sample values",
    "training": "one value per training run: no per-sample values (tokens/s is tested over its steps)",
    "sustained": "a ratio of window medians: no per-sample test",
    "aggregate": "aggregate only: the source kept no per-request values",
}


class UnknownRunError(KeyError):
    def __init__(self, run_id: str, known: Iterable[str]):
        super().__init__(f"run {run_id!r} is not in the results; runs found: {', '.join(sorted(known)) or 'none'}")

    def __str__(self) -> str:
        return self.args[0]


def metric_value(row: dict[str, Any], name: str) -> Any:
    """A metric by its vLLM name; ``p50_*`` falls back to vLLM's ``median_*`` spelling."""
    if row.get(name) is None and name.startswith("p50_"):
        return row.get("median_" + name[4:])
    return row.get(name)


def is_headline_point(p: dict[str, Any]) -> bool:
    """RULES.md 7: a point without telemetry, or flagged invalid, stays out of headline tables."""
    return (p.get("telemetry_samples") or 0) > 0 and p.get("valid") is not False


def point_key(p: dict[str, Any]) -> str:
    """The measurement key a point matches on across runs."""
    key = (f"{p.get('lane')} {p.get('model')} {p.get('server_config')} in={p.get('input_len')} "
           f"out={p.get('output_len')} conc={p.get('max_concurrency')}")
    if p.get("request_rate") is not None:
        key += f" rate={p['request_rate']}"
    return key


def metric_name(p: dict[str, Any], m: str) -> str:
    # a coalesced point's TPOT is a delivery rate: keyed apart so it never compares as decode speed
    return f"{m} (delivery rate)" if p.get("coalesced") and "tpot" in m else m


def headline_metrics(c: dict[str, Any], run_id: str,
                     serving: tuple[str, ...] = SERVING_HEADLINES) -> dict[str, Any]:
    """{"section · key · metric": value} for one run."""
    out: dict[str, Any] = {}
    for r in c["compile"]["summary"]:
        if r["run_id"] == run_id:
            for m in COMPILE_HEADLINES:
                out[f"compile · {r['what']} {r.get('model')} {r.get('config') or ''}".rstrip() + f" · {m}"] = r.get(m)
    for r in c["training"]["runs"]:
        if r["run_id"] == run_id:
            for m in TRAINING_HEADLINES:
                out[f"training · {r['lane']} {r['model']} · {m}"] = r.get(m)
    for p in c["serving"]["points"]:
        if p.get("run_id") == run_id and is_headline_point(p):
            for m in serving:
                out[f"serving · {point_key(p)} · {metric_name(p, m)}"] = metric_value(p, m)
    for r in c["sustained"]["retention"]:
        if r.get("run_id") == run_id:
            for m in SUSTAINED_HEADLINES:
                if m in r:
                    out[f"sustained · {r.get('lane')} {r.get('model')} {r.get('point_id')} · {m}"] = r.get(m)
    return out


@dataclass(frozen=True)
class Delta:
    metric: str
    a: Any
    b: Any

    @property
    def delta(self) -> float | None:
        if isinstance(self.a, (int, float)) and isinstance(self.b, (int, float)) \
                and not isinstance(self.a, bool) and not isinstance(self.b, bool):
            return self.b - self.a
        return None

    @property
    def pct(self) -> float | None:
        d = self.delta
        if d is None or not self.a:
            return None
        return 100.0 * d / abs(self.a)


def compare_runs(c: dict[str, Any], run_a: str, run_b: str) -> tuple[list[Delta], list[str], list[str]]:
    """Deltas of B against A on every shared headline key; keys only in A; keys only in B."""
    known = {r["run_id"] for r in c["runs"]}
    for rid in (run_a, run_b):
        if rid not in known:
            raise UnknownRunError(rid, known)
    ha, hb = headline_metrics(c, run_a), headline_metrics(c, run_b)
    shared = sorted(set(ha) & set(hb))
    return ([Delta(k, ha[k], hb[k]) for k in shared], sorted(set(ha) - set(hb)), sorted(set(hb) - set(ha)))


# ---- verdicts: is a delta real? -----------------------------------------------------------------------
def better_of(metric: str) -> str:
    """"higher" for rates, MFU and retention; "lower" for latencies, wall times and loss."""
    return "higher" if any(h in metric for h in HIGHER_IS_BETTER) else "lower"


def decide(delta: float | None, low: float | None, high: float | None, p_value: float | None, better: str,
           alpha: float = ALPHA) -> str:
    """The verdict rule (module docstring): real only when the test rejects and the interval excludes 0."""
    if None in (delta, low, high, p_value):
        return "untested"
    real = p_value < alpha and (low > 0 or high < 0) and (delta > 0) == (low > 0) and delta != 0
    if not real:
        return "within noise"
    return "faster" if (delta > 0) == (better == "higher") else "slower"


def is_regression(row: dict[str, Any], fail_pct: float = FAIL_PCT) -> bool:
    pct = row.get("pct")
    return row.get("verdict") == "slower" and pct is not None and abs(pct) >= fail_pct


def _row(metric: str, a: Any, b: Any) -> dict[str, Any]:
    d = Delta(metric, a, b)
    return {"metric": metric, "a": a, "b": b, "delta": d.delta, "pct": d.pct, "delta_ci_low": None,
            "delta_ci_high": None, "test": None, "interval": None, "p_value": None, "p_adjusted": None,
            "n_a": None, "n_b": None,
            "verdict": "untested", "better": better_of(metric), "regression": False, "note": None}


def _samples(con: Any, table: str, columns: dict[str, str], run_ids: tuple[str, str],
             point_ids: list[str]) -> dict[tuple[str, str, str], dict[str, list[float]]]:
    """One query for the run pair: {(run, lane, point): {name: [values]}} of the matched points."""
    sel = ", ".join(f"{expr} AS {name}" for name, expr in columns.items())
    rel = con.execute(f"""SELECT run_id, lane, point_id, {sel} FROM {table}
                          WHERE run_id IN (?, ?) AND list_contains(?, point_id) GROUP BY run_id, lane, point_id""",
                      [*run_ids, point_ids])
    names = [d[0] for d in rel.description]
    return {tuple(r[:3]): {n: [v for v in (x or []) if v is not None] for n, x in zip(names[3:], r[3:])}
            for r in rel.fetchall()}


def _latency_values(con: Any, run_ids: tuple[str, str], point_ids: list[str]) -> dict:
    cols = {f"{m}_ms": f"list({m}_ms) FILTER (WHERE success AND {m}_ms IS NOT NULL)" for m in ("ttft", "tpot", "e2el")}
    return _samples(con, "request_metrics", cols, run_ids, point_ids)


def _batch_rates(con: Any, run_ids: tuple[str, str], point_ids: list[str]) -> dict | None:
    present = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    if "point_rate_batches" not in present:
        return None
    cols = {c: f"list({c} ORDER BY batch)" for c in RATE_SOURCE.values()}
    return _samples(con, "point_rate_batches", cols, run_ids, point_ids)


def _test_latency(row: dict[str, Any], va: list[float], vb: list[float], q: float, cache: dict,
                  key: tuple) -> None:
    from analytics.report.stats import bootstrap_quantile_diff, mann_whitney_u

    row["n_a"], row["n_b"] = len(va), len(vb)
    if min(len(va), len(vb)) < MIN_REQUESTS:
        row["note"] = f"too few requests (A {len(va)}, B {len(vb)}; the test needs ≥ {MIN_REQUESTS} per run)"
        return
    if key not in cache:  # one test and one set of resamples per metric, shared by its p50 and p99
        ci = bootstrap_quantile_diff(va, vb, (0.5, 0.99))
        cache[key] = mann_whitney_u(va, vb).p_value, {0.5: ci[0], 0.99: ci[1]}
    p, cis = cache[key]
    row.update(test="mann-whitney U", interval="bootstrap quantile difference", p_value=p,
               delta_ci_low=cis[q][0], delta_ci_high=cis[q][1], _test_id=key)


def _step_rates(con: Any, run_ids: tuple[str, str]) -> dict[tuple[str, str, str], list[float]]:
    """{(run, lane, model): per-step tokens/s} of the steps after the first (the headline's own steps:
    tokens_per_s = tokens per step / median step time over the steps after the first)."""
    rel = con.execute("""SELECT run_id, lane, model,
                                list(tokens / step_s ORDER BY step) FILTER (WHERE step > 1 AND step_s > 0
                                                                            AND tokens IS NOT NULL)
                         FROM train_steps WHERE run_id IN (?, ?) AND lane <> 'precompile' GROUP BY ALL""",
                      list(run_ids))
    return {tuple(r[:3]): [v for v in (r[3] or []) if v is not None] for r in rel.fetchall()}


def _test_steps(row: dict[str, Any], va: list[float], vb: list[float]) -> None:
    """Training tokens/s: Mann–Whitney U over the per-step tokens/s, bootstrap interval of the median difference."""
    from analytics.report.stats import bootstrap_quantile_diff, mann_whitney_u

    row["n_a"], row["n_b"] = len(va), len(vb)
    if min(len(va), len(vb)) < MIN_REQUESTS:
        row["note"] = f"too few steps (A {len(va)}, B {len(vb)}; the test needs ≥ {MIN_REQUESTS} per run)"
        return
    (low, high), = bootstrap_quantile_diff(va, vb, (0.5,))
    row.update(test="mann-whitney U", interval="bootstrap median difference (per-step tokens/s)",
               p_value=mann_whitney_u(va, vb).p_value, delta_ci_low=low, delta_ci_high=high,
               _test_id=("steps", row["metric"]))


def _test_rate(row: dict[str, Any], ba: list[float], bb: list[float]) -> None:
    from analytics.report.stats import StatsInputError, welch

    row["n_a"], row["n_b"] = len(ba), len(bb)
    if min(len(ba), len(bb)) < MIN_BATCHES:
        row["note"] = f"too few batches (A {len(ba)}, B {len(bb)}; Welch needs ≥ {MIN_BATCHES} per run)"
        return
    try:
        w = welch(ba, bb)
    except StatsInputError as exc:
        row["note"] = str(exc)
        return
    row.update(test="welch t", interval="welch", p_value=w.p_value, delta_ci_low=w.ci_low, delta_ci_high=w.ci_high,
               _test_id=("welch", row["metric"]))


def pair_deltas(c: dict[str, Any], run_a: str, run_b: str, con: Any = None,
                fail_pct: float = FAIL_PCT) -> dict[str, Any]:
    """The ``deltas`` entry of B against A. Without ``con`` no per-sample values are read: all untested."""
    known = {r["run_id"] for r in c["runs"]}
    for rid in (run_a, run_b):
        if rid not in known:
            raise UnknownRunError(rid, known)
    tested = SERVING_HEADLINES + SERVING_TESTED_EXTRA
    ha, hb = headline_metrics(c, run_a, tested), headline_metrics(c, run_b, tested)
    for run, h in ((run_a, ha), (run_b, hb)):
        for p in c["serving"].get("aggregate_points") or []:
            if p.get("run_id") == run:
                for m in SERVING_HEADLINES:
                    h[f"serving (aggregate only) · {point_key(p)} · {m}"] = metric_value(p, m)
    points = {run: {point_key(p): p for p in c["serving"]["points"] if p.get("run_id") == run and is_headline_point(p)}
              for run in (run_a, run_b)}
    matched = sorted(set(points[run_a]) & set(points[run_b]))
    lat = rates = None
    if con is not None and matched:
        ids = sorted({points[r][k]["point_id"] for r in (run_a, run_b) for k in matched})
        lat, rates = _latency_values(con, (run_a, run_b), ids), _batch_rates(con, (run_a, run_b), ids)
    rows, cache = {}, {}
    steps = None
    if con is not None and any(k.startswith("training · ") and k.endswith(" · tokens_per_s") for k in ha):
        steps = _step_rates(con, (run_a, run_b))
    trained = {(r["run_id"], f"{r['lane']} {r['model']}"): (r["lane"], r["model"]) for r in c["training"]["runs"]}
    for metric in sorted(set(ha) & set(hb)):
        row = rows[metric] = _row(metric, ha[metric], hb[metric])
        section, *rest = metric.split(" · ")
        if section == "training" and rest[1] == "tokens_per_s" and steps is not None and row["delta"] is not None:
            (la, ma), (lb, mb) = trained[(run_a, rest[0])], trained[(run_b, rest[0])]
            _test_steps(row, steps.get((run_a, la, ma), []), steps.get((run_b, lb, mb), []))
            continue
        if section != "serving":
            row["note"] = UNTESTED_WHY["aggregate" if "aggregate" in section else section]
            continue
        pk, name = rest[0], rest[1].split(" ")[0]
        if row["delta"] is None:
            row["note"] = "value missing in one run"
            continue
        if con is None:
            row["note"] = "per-sample values not read (no results connection)"
            continue
        pa_, pb_ = (points[r][pk] for r in (run_a, run_b))
        ka, kb = ((r, p["lane"], p["point_id"]) for r, p in ((run_a, pa_), (run_b, pb_)))
        if name in LATENCY_SOURCE:
            col, q = LATENCY_SOURCE[name]
            _test_latency(row, lat.get(ka, {}).get(col, []), lat.get(kb, {}).get(col, []), q, cache, (pk, col))
        elif name in RATE_SOURCE and rates is None:
            row["note"] = "view point_rate_batches is not installed: no per-batch rates"
        elif name in RATE_SOURCE:
            col = RATE_SOURCE[name]
            _test_rate(row, rates.get(ka, {}).get(col, []), rates.get(kb, {}).get(col, []))
    tests = adjust_p_values(rows.values(), fail_pct)
    return {"baseline": run_a, "run": run_b, "alpha": ALPHA, "fail_pct": fail_pct, "correction": "holm",
            "tests": tests,
            "rows": [rows[k] for k in sorted(rows)],
            "only_baseline": sorted(set(ha) - set(hb)), "only_run": sorted(set(hb) - set(ha))}


def adjust_p_values(rows: Iterable[dict[str, Any]], fail_pct: float = FAIL_PCT) -> int:
    """Holm-adjust the comparison's distinct tests together, then decide each tested row; the number of tests."""
    from analytics.report.stats import holm

    rows = list(rows)
    tests: dict[Any, float] = {}
    for row in rows:
        if row.get("_test_id") is not None:
            tests.setdefault(row["_test_id"], row["p_value"])
    adjusted = dict(zip(tests, holm(list(tests.values()))))
    for row in rows:
        test_id = row.pop("_test_id", None)
        if test_id is None:
            continue
        row["p_adjusted"] = adjusted[test_id]
        row["verdict"] = decide(row["delta"], row["delta_ci_low"], row["delta_ci_high"], row["p_adjusted"],
                                row["better"])
        row["regression"] = is_regression(row, fail_pct)
    return len(tests)


def deltas_section(con: Any, c: dict[str, Any], fail_pct: float = FAIL_PCT) -> list[dict[str, Any]]:
    """comparison.json ``deltas``: one entry per run after the first, against the first (runs found only)."""
    known = {r["run_id"] for r in c["runs"]}
    ids = [r for r in c["run_ids"] if r in known]
    return [clean(pair_deltas(c, ids[0], other, con, fail_pct)) for other in ids[1:]]


def verdict_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
