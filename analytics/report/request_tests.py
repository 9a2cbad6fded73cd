"""The per-sample tests of a delta: per-request latencies, per-batch rates, per-step training rates.

Each side of a comparison is one or more runs (and a run may repeat a point): a side's samples for one headline
are the pooled values of every matching point of its runs. These tests see each request (batch, step) as an
independent draw, which requests of one run are not (they share the run's state): their verdict is the
per-request rule (``request_verdict``), kept as context; the verdict itself is :mod:`analytics.report.run_level`'s.

Latency (p50/p99 TTFT, TPOT, E2EL): Mann–Whitney U on the successful requests' values, percentile bootstrap of
the quantile difference. Training tokens/s: Mann–Whitney U over the per-step tokens/s (steps after the first),
bootstrap of the median difference. Throughput: Welch's t on the per-batch rates (view point_rate_batches).
"""
from __future__ import annotations

from typing import Any, Iterable

MIN_REQUESTS = 10  # per side and metric: the normal approximation of Mann-Whitney U needs ~10 per sample
MIN_BATCHES = 2    # per side: Welch needs a variance from each side
# per-request column of request_metrics behind each latency headline, and its quantile
LATENCY_SOURCE = {f"p{q}_{m}_ms": (f"{m}_ms", q / 100.0) for q in (50, 99) for m in ("ttft", "tpot", "e2el")}
# per-batch column of point_rate_batches behind each throughput headline
RATE_SOURCE = {"output_throughput": "output_rate", "request_throughput": "request_rate",
               "total_token_throughput": "total_token_rate", "goodput": "good_rate"}

Samples = dict[tuple[str, str, str], dict[str, list[float]]]


def _samples(con: Any, table: str, columns: dict[str, str], run_ids: Iterable[str], point_ids: list[str]) -> Samples:
    """One query for the comparison's runs: {(run, lane, point): {name: [values]}} of the matched points."""
    sel = ", ".join(f"{expr} AS {name}" for name, expr in columns.items())
    rel = con.execute(f"""SELECT run_id, lane, point_id, {sel} FROM {table}
                          WHERE list_contains(?, run_id) AND list_contains(?, point_id) GROUP BY run_id, lane, point_id""",
                      [sorted(run_ids), point_ids])
    names = [d[0] for d in rel.description]
    return {tuple(r[:3]): {n: [v for v in (x or []) if v is not None] for n, x in zip(names[3:], r[3:])}
            for r in rel.fetchall()}


def latency_values(con: Any, run_ids: Iterable[str], point_ids: list[str]) -> Samples:
    cols = {f"{m}_ms": f"list({m}_ms) FILTER (WHERE success AND {m}_ms IS NOT NULL)" for m in ("ttft", "tpot", "e2el")}
    return _samples(con, "request_metrics", cols, run_ids, point_ids)


def batch_rates(con: Any, run_ids: Iterable[str], point_ids: list[str]) -> Samples | None:
    present = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    if "point_rate_batches" not in present:
        return None
    cols = {c: f"list({c} ORDER BY batch)" for c in RATE_SOURCE.values()}
    return _samples(con, "point_rate_batches", cols, run_ids, point_ids)


def pooled(samples: Samples, keys: Iterable[tuple[str, str, str]], column: str) -> list[float]:
    """One side's values of ``column`` over its points (runs and repeats), in key order."""
    return [v for k in keys for v in samples.get(k, {}).get(column, [])]


def latency_test(row: dict[str, Any], va: list[float], vb: list[float], q: float, cache: dict, key: tuple) -> None:
    from analytics.report.stats import bootstrap_quantile_diff, mann_whitney_u

    row["n_a"], row["n_b"] = len(va), len(vb)
    if min(len(va), len(vb)) < MIN_REQUESTS:
        row["note"] = f"too few requests (A {len(va)}, B {len(vb)}; the test needs ≥ {MIN_REQUESTS} per side)"
        return
    if key not in cache:  # one test and one set of resamples per metric, shared by its p50 and p99
        ci = bootstrap_quantile_diff(va, vb, (0.5, 0.99))
        cache[key] = mann_whitney_u(va, vb).p_value, {0.5: ci[0], 0.99: ci[1]}
    p, cis = cache[key]
    row.update(test="mann-whitney U", interval="bootstrap quantile difference", p_value=p,
               delta_ci_low=cis[q][0], delta_ci_high=cis[q][1], _test_id=key)


# One optimizer step's tokens/s (train_steps): the per-step rate the tests and REPORT.html's step plot read.
STEP_TOKENS_PER_S_SQL = "tokens / step_s"


def step_rates(con: Any, run_ids: Iterable[str]) -> dict[tuple[str, str, str], list[float]]:
    """{(run, lane, model): per-step tokens/s} of the steps after the first (the headline's own steps:
    tokens_per_s = tokens per step / median step time over the steps after the first)."""
    rel = con.execute(f"""SELECT run_id, lane, model,
                                list({STEP_TOKENS_PER_S_SQL} ORDER BY step) FILTER (WHERE step > 1 AND step_s > 0
                                                                            AND tokens IS NOT NULL)
                         FROM train_steps WHERE list_contains(?, run_id) AND lane <> 'precompile' GROUP BY ALL""",
                      [sorted(run_ids)])
    return {tuple(r[:3]): [v for v in (r[3] or []) if v is not None] for r in rel.fetchall()}


def steps_test(row: dict[str, Any], va: list[float], vb: list[float]) -> None:
    """Training tokens/s: Mann–Whitney U over the per-step tokens/s, bootstrap interval of the median difference."""
    from analytics.report.stats import bootstrap_quantile_diff, mann_whitney_u

    row["n_a"], row["n_b"] = len(va), len(vb)
    if min(len(va), len(vb)) < MIN_REQUESTS:
        row["note"] = f"too few steps (A {len(va)}, B {len(vb)}; the test needs ≥ {MIN_REQUESTS} per side)"
        return
    (low, high), = bootstrap_quantile_diff(va, vb, (0.5,))
    row.update(test="mann-whitney U", interval="bootstrap median difference (per-step tokens/s)",
               p_value=mann_whitney_u(va, vb).p_value, delta_ci_low=low, delta_ci_high=high,
               _test_id=("steps", row["metric"]))


def rate_test(row: dict[str, Any], ba: list[float], bb: list[float]) -> None:
    from analytics.report.stats import StatsInputError, welch

    row["n_a"], row["n_b"] = len(ba), len(bb)
    if min(len(ba), len(bb)) < MIN_BATCHES:
        row["note"] = f"too few batches (A {len(ba)}, B {len(bb)}; Welch needs ≥ {MIN_BATCHES} per side)"
        return
    try:
        w = welch(ba, bb)
    except StatsInputError as exc:
        row["note"] = str(exc)
        return
    row.update(test="welch t", interval="welch", p_value=w.p_value, delta_ci_low=w.ci_low, delta_ci_high=w.ci_high,
               _test_id=("welch", row["metric"]))
