"""What REPORT.html embeds beside comparison.json (the report's data stage): each serving point's latency
distribution, for the CDF a reader opens by clicking the point, and each training run's per-step series.

Both are queries over the views every other number comes from; Python only shapes their rows
(:mod:`analytics.report.rows`):

* ``distributions`` — per point of ``request_metrics`` (the successful, non-warm-up requests: the rows
  serving_points aggregates), ``quantile_cont`` of TTFT, TPOT and E2EL at :data:`CDF_PROBABILITIES`. These are
  the linear-interpolated percentiles docs/reference/metrics.md defines, so the curve passes through the table's p50 and p99
  exactly; a point of a million requests embeds the same 103 values per metric as one of ten (the size is bounded
  by the number of points, not of requests).
* ``training_steps`` — per training run, every optimizer step's loss and tokens/s (``train_steps``: tokens / step_s,
  the per-step rate the run-level tests read too; the headline tokens/s stays the training lane's own, in
  comparison.json; a precompile lane has no rows, rule 4).
"""
from __future__ import annotations

from typing import Any, Iterable

import duckdb

from analytics.report.document import Comparison
from analytics.report.request_tests import STEP_TOKENS_PER_S_SQL
from analytics.report.rows import rows

HTML_DATA_SCHEMA = "neuronpipe.report-html-data/1"
# 0, 0.01, ..., 1 and the tail: p99.5 and p99.9 (the CDF's upper end is where a p99 lives)
CDF_PROBABILITIES: tuple[float, ...] = tuple(sorted({round(i / 100, 2) for i in range(101)} | {0.995, 0.999}))
DISTRIBUTION_METRICS = ("ttft_ms", "tpot_ms", "e2el_ms")


def point_key(run_id: Any, lane: Any, point_id: Any) -> str:
    """The key a point's distribution is filed under (the page looks a clicked point up by it)."""
    return f"{run_id}|{lane}|{point_id}"


def latency_distributions(con: duckdb.DuckDBPyConnection,
                          points: Iterable[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """{point_key: {"n": successful requests, "ttft_ms": [quantiles], ...}} for ``points`` (all when None)."""
    probs = ", ".join(repr(p) for p in CDF_PROBABILITIES)
    metrics = ",\n".join(f"quantile_cont({m}, [{probs}]) FILTER (WHERE success AND {m} IS NOT NULL) AS {m}"
                         for m in DISTRIBUTION_METRICS)
    found = rows(con, f"""SELECT run_id, lane, point_id, count(*) FILTER (WHERE success) AS n, {metrics}
                          FROM request_metrics GROUP BY run_id, lane, point_id ORDER BY ALL""")
    wanted = None if points is None else {point_key(p.get("run_id"), p.get("lane"), p.get("point_id"))
                                          for p in points}
    out = {}
    for r in found:
        key = point_key(r["run_id"], r["lane"], r["point_id"])
        if wanted is None or key in wanted:
            out[key] = {"n": r["n"], **{m: r[m] for m in DISTRIBUTION_METRICS}}
    return out


def training_steps(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Per (run, lane, model): step, loss and tokens/s of every optimizer step, in step order."""
    return rows(con, f"""
        SELECT run_id, lane, model, list(step ORDER BY step) AS step, list(loss ORDER BY step) AS loss,
               list({STEP_TOKENS_PER_S_SQL} ORDER BY step) AS tokens_per_s
        FROM train_steps WHERE lane <> 'precompile'
        GROUP BY run_id, lane, model ORDER BY run_id, lane, model""")


def html_data(con: duckdb.DuckDBPyConnection, comparison: Comparison) -> dict[str, Any]:
    """The page's second data block: distributions of the points comparison.json lists, training steps (empty
    where the connection has no such view: a store without request or step rows)."""
    from analytics.report.comparison import existing_views

    present = existing_views(con)
    points = comparison.serving.points
    return {"schema": HTML_DATA_SCHEMA, "cdf_probabilities": list(CDF_PROBABILITIES),
            "distributions": latency_distributions(con, points) if "request_metrics" in present else {},
            "training_steps": training_steps(con) if "train_steps" in present else []}
