"""The 95 % intervals of the serving views (analytics/views/sql/1*_serving_*.sql) against independent pure-Python
computations.

docs/reference/metrics.md "Confidence intervals" states the methods; each test recomputes one from the fixed rows.
"""

from __future__ import annotations

import math
import statistics

import duckdb
import pytest

from agents.loadgen.metrics import connect_rows, point_metrics, sustained_metrics
from tests.unit.test_serving_views import S, req

Z = 1.96
QS = (0.5, 0.9, 0.95, 0.99)
# t(0.975, df) for the rows these tests reach (a df between rows takes the next smaller row)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 9: 2.262, 30: 2.042, 40: 2.021, 60: 2.000}


def t95(df: int) -> float:
    return T95[max(d for d in T95 if d <= df)]


def order_interval(values: list[float], p: float) -> tuple[float | None, float | None]:
    """[x(l), x(u)], 1-based, l = floor(np − z·sd), u = ceil(np + z·sd) + 1; a rank outside 1..n: None."""
    xs, n = sorted(values), len(values)
    sd = math.sqrt(n * p * (1 - p))
    lo, hi = math.floor(n * p - Z * sd), math.ceil(n * p + Z * sd) + 1
    return (xs[lo - 1] if 1 <= lo <= n else None), (xs[hi - 1] if 1 <= hi <= n else None)


def binom_tail_misses(n: int, p: float) -> tuple[float, float]:
    """(P(B < l), P(B ≥ u)) for B ~ Binomial(n, p): how often each side of the order interval misses."""
    sd = math.sqrt(n * p * (1 - p))
    lo, hi = math.floor(n * p - Z * sd), math.ceil(n * p + Z * sd) + 1
    pmf = [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]
    return (sum(pmf[:lo]) if lo >= 1 else 0.0), (sum(pmf[hi:]) if hi <= n else 0.0)


def latency_rows(n: int) -> list[dict]:
    # distinct TTFTs (a permutation, so the sort matters) and 3 chunks each: 2 ITL gaps per request
    rows = []
    for i in range(n):
        ttft = 0.05 + ((i * 7) % n) * 0.001
        rows.append(
            req(
                i,
                ttft=ttft,
                chunks=[ttft, ttft + 0.01 + (i % 5) * 0.002, ttft + 0.03 + (i % 3) * 0.004],
                sent=i * S // 4,
            )
        )
    return rows


def test_the_rank_rule_keeps_each_side_within_2_5_percent():
    for p in QS:
        for n in (10, 40, 64, 200, 600):
            low_miss, high_miss = binom_tail_misses(n, p)
            assert low_miss <= 0.025 and high_miss <= 0.025, (n, p, low_miss, high_miss)


def test_quantile_and_mean_intervals_match_an_independent_computation_and_small_n_gives_null():
    rows = latency_rows(40)
    m = point_metrics(rows, {"point_id": "p"})
    per_metric = {
        "ttft": [r["ttft_s"] * 1000 for r in rows],
        "e2el": [r["e2el_s"] * 1000 for r in rows],
        "tpot": [(r["e2el_s"] - r["ttft_s"]) * 1000 / 2 for r in rows],
        "itl": [(b - a) * 1000 for r in rows for a, b in zip(r["chunk_times_s"], r["chunk_times_s"][1:])],
    }
    for metric, values in per_metric.items():
        for p in QS:
            lo, hi = order_interval(values, p)
            q = f"p{round(p * 100)}_{metric}_ms"
            assert m[f"{q}_ci_low"] == pytest.approx(lo) if lo is not None else m[f"{q}_ci_low"] is None
            assert m[f"{q}_ci_high"] == pytest.approx(hi) if hi is not None else m[f"{q}_ci_high"] is None
            if lo is not None and hi is not None:
                assert m[f"{q}_ci_low"] <= m[q] <= m[f"{q}_ci_high"]
        mean, n = statistics.fmean(values), len(values)
        half = t95(n - 1) * statistics.stdev(values) / math.sqrt(n)
        assert m[f"mean_{metric}_ms_ci_low"] == pytest.approx(mean - half)
        assert m[f"mean_{metric}_ms_ci_high"] == pytest.approx(mean + half)
    # n = 40: p50 has both sides; the upper ranks of p90/p95/p99 fall beyond n (NULL, never the maximum)
    assert m["p50_ttft_ms_ci_high"] is not None
    assert m["p90_ttft_ms_ci_high"] is None and m["p99_ttft_ms_ci_high"] is None
    assert m["p99_ttft_ms_ci_low"] is not None  # ranks are per side: the low one exists
    assert "TTFT n=40: p90 high, p95 high, p99 high" in m["ci_note"]
    assert "ITL n=80" in m["ci_note"]


def test_one_request_has_no_interval_and_says_why():
    m = point_metrics([req(0, ttft=0.1, chunks=[0.1, 0.2])], {"point_id": "p"})
    assert m["p50_ttft_ms_ci_low"] is None and m["p50_ttft_ms_ci_high"] is None
    assert m["mean_ttft_ms_ci_low"] is None and m["output_throughput_ci_low"] is None
    assert "TTFT n=1: p50 low+high" in m["ci_note"] and "mean (needs n >= 2)" in m["ci_note"]
    assert "rates: 1 completed, batch means need >= 6" in m["ci_note"]


def rate_rows(n: int) -> list[dict]:
    # uneven sends and lengths; 2-token chunks whose sum (usage 6 tokens) differs from the chunk count
    rows = []
    for i in range(n):
        k = 2 + i % 3
        chunks = [0.1 + 0.2 * j + 0.05 * (i % 4) for j in range(k)]
        rows.append(
            req(
                i,
                ttft=chunks[0],
                chunks=chunks,
                tokens=[2] * k,
                out=6,
                output_len=6,
                prompt=8 + i % 2,
                input_len=8 + i % 2,
                sent=int((i**1.3) * 0.3 * S),
            )
        )
    return rows


def python_batches(rows: list[dict], b: int, slo_ttft_ms: float) -> dict[str, list[float]]:
    t0 = min(r["t_sent_ns"] for r in rows)
    t1 = max(r["t_done_ns"] for r in rows)
    width = (t1 - t0) / b

    def idx(t: float) -> int:
        return min(max(int((t - t0) // width), 0), b - 1)

    out = {k: [0.0] * b for k in ("req", "good", "out", "total")}
    for r in rows:
        d = idx(r["t_done_ns"])
        out["req"][d] += 1
        out["good"][d] += r["ttft_s"] * 1000 <= slo_ttft_ms
        out["total"][d] += r["prompt_tokens"]
        scale = r["output_tokens"] / sum(r["chunk_tokens"])
        for t, k in zip(r["chunk_times_s"], r["chunk_tokens"]):
            out["out"][idx(r["t_sent_ns"] + t * S)] += k * scale
            out["total"][idx(r["t_sent_ns"] + t * S)] += k * scale
    return {k: [x / (width / S) for x in v] for k, v in out.items()}


@pytest.mark.parametrize("n, batches", [(30, 10), (9, 4)])
def test_rate_intervals_are_batch_means_whose_average_is_the_point_rate(n, batches):
    rows = rate_rows(n)
    sp = {"point_id": "p", "slo_json": '{"ttft_ms": 200}'}
    con = connect_rows({"requests": rows, "sweep_points": [sp]})
    got = con.execute(
        "SELECT batch, batches, request_rate, output_rate, total_token_rate, good_rate "
        "FROM point_rate_batches ORDER BY batch"
    ).fetchall()
    m = point_metrics(rows, sp)
    assert [g[0] for g in got] == list(range(1, batches + 1)) and {g[1] for g in got} == {batches}
    want = python_batches(rows, batches, 200.0)
    for col, key in ((2, "req"), (3, "out"), (4, "total"), (5, "good")):
        assert [g[col] for g in got] == pytest.approx(want[key])
    for key, rate in (
        ("req", "request_throughput"),
        ("out", "output_throughput"),
        ("total", "total_token_throughput"),
        ("good", "goodput"),
    ):
        assert statistics.fmean(want[key]) == pytest.approx(m[rate])  # the batch mean is the point's rate
        half = t95(batches - 1) * statistics.stdev(want[key]) / math.sqrt(batches)
        assert m[f"{rate}_ci_low"] == pytest.approx(max(m[rate] - half, 0.0))
        assert m[f"{rate}_ci_high"] == pytest.approx(m[rate] + half)


def test_few_completions_have_no_rate_interval_and_goodput_needs_an_slo():
    m = point_metrics(rate_rows(5), {"point_id": "p", "slo_json": '{"ttft_ms": 200}'})
    assert m["request_throughput"] is not None and m["request_throughput_ci_low"] is None
    assert "rates: 5 completed" in m["ci_note"]
    m = point_metrics(rate_rows(12), {"point_id": "p"})
    assert m["output_throughput_ci_low"] is not None
    assert m["goodput"] is None and m["goodput_ci_low"] is None and m["goodput_ci_high"] is None


def test_retention_intervals_match_the_delta_method_from_the_windows():
    tokens_by_window = [1, 10, 12, 11, 9, 8, 8, 7, 6, 7]  # window 0 is warm-up
    rows = [
        req(w, ttft=0.1, chunks=[0.1], tokens=[t], out=t, output_len=t, sent=w * S)
        for w, t in enumerate(tokens_by_window)
    ]
    sp = {
        "point_id": "p",
        "mode": "sustained",
        "window_s": 1.0,
        "warmup_windows": 1,
        "retention_k": 3,
        "duration_limit_s": 10.0,
    }
    _, summary = sustained_metrics(rows, sp)
    measured, k = tokens_by_window[1:], 3
    first, last = measured[:k], measured[-k:]
    peak = max((measured[i : i + k] for i in range(len(measured) - k + 1)), key=statistics.median)

    def interval(ref: list[int]) -> tuple[float, float]:
        ratio = statistics.median(last) / statistics.median(ref)
        v_last = statistics.variance(last) / (k * statistics.fmean(last) ** 2)
        v_ref = statistics.variance(ref) / (k * statistics.fmean(ref) ** 2)
        df = math.floor((v_last + v_ref) ** 2 / ((v_last**2 + v_ref**2) / (k - 1)))
        half = t95(df) * math.sqrt(v_last + v_ref)
        return ratio * math.exp(-half), ratio * math.exp(half)

    assert summary["retention_vs_first"] == pytest.approx(7 / 11)
    lo, hi = interval(first)
    assert (summary["retention_vs_first_ci_low"], summary["retention_vs_first_ci_high"]) == pytest.approx((lo, hi))
    lo, hi = interval(peak)
    assert (summary["retention_vs_peak_ci_low"], summary["retention_vs_peak_ci_high"]) == pytest.approx((lo, hi))
    assert summary["retention_vs_first_ci_low"] < summary["retention_vs_first"] < summary["retention_vs_first_ci_high"]


def test_retention_interval_is_null_for_k_below_2():
    rows = [
        req(w, ttft=0.1, chunks=[0.1], tokens=[5 + w % 2], out=5 + w % 2, output_len=5 + w % 2, sent=w * S)
        for w in range(6)
    ]
    sp = {
        "point_id": "p",
        "mode": "sustained",
        "window_s": 1.0,
        "warmup_windows": 0,
        "retention_k": 1,
        "duration_limit_s": 6.0,
    }
    _, summary = sustained_metrics(rows, sp)
    assert summary["retention_vs_first"] is not None
    assert summary["retention_vs_first_ci_low"] is None and summary["retention_vs_peak_ci_high"] is None


def test_serving_points_all_carries_the_intervals_and_aggregate_rows_say_why_not():
    from analytics.schema import TABLES, conform, empty_table
    from analytics.views import derived_sql_files

    con = duckdb.connect(":memory:")
    # irregular dispatch (perfectly regular rows give every batch the same rate: no interval, see below)
    rows = [
        req(
            i,
            ttft=0.05 + (i % 7) * 0.003,
            chunks=[0.05 + (i % 7) * 0.003, 0.08 + (i % 5) * 0.01],
            sent=i * S // 4 + (i * i % 13) * S // 9,
        )
        for i in range(40)
    ]
    data = {
        "requests": rows,
        "sweep_points": [{"point_id": "p"}],
        "serving_aggregates": [{"point_id": "agg", "completed": 10, "failed": 0, "p99_ttft_ms": 5.0}],
    }
    for name in TABLES:
        table = (
            conform(name, data[name], defaults={"run_id": "r", "lane": "l", "attempt": "a"})
            if name in data
            else empty_table(name)
        )
        con.register(f"__{name}", table)
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM __{name}")
    for _, text in derived_sql_files():
        con.execute(text)
    rel = con.execute(
        "SELECT point_id, metric_basis, p50_ttft_ms_ci_low, p99_ttft_ms_ci_high, "
        "output_throughput_ci_low, ci_note FROM serving_points_all ORDER BY point_id"
    )
    agg, req_row = rel.fetchall()
    assert agg[:5] == ("agg", "aggregate", None, None, None)
    assert agg[5] == "aggregate only: the source kept no per-request values, so no interval"
    assert req_row[1] == "requests" and req_row[2] is not None and req_row[3] is None and req_row[4] is not None


def test_a_rate_identical_in_every_batch_has_no_interval_and_says_so():
    # 40 requests dispatched every S/4 with the same shape: every batch completes the same count and tokens
    m = point_metrics(latency_rows(40), {"point_id": "p"})
    assert m["request_throughput"] > 0 and m["request_throughput_ci_low"] is None
    assert m["request_throughput_ci_high"] is None
    assert "request" in m["ci_note"] and "identical in all 10 batches: no spread, no interval" in m["ci_note"]


def test_report_shows_intervals_beside_the_headline_numbers():
    from analytics.report.markdown import s_serving, s_sustained
    from tests.support.comparison import document

    point = {
        "run_id": "r",
        "lane": "serve_sweep",
        "model": "m",
        "server_config": "A",
        "point_id": "p",
        "mode": "closed",
        "max_concurrency": 4,
        "completed": 40,
        "failed": 0,
        "valid": True,
        "telemetry_samples": 3,
        "p50_ttft_ms": 12.3,
        "p50_ttft_ms_ci_low": 11.9,
        "p50_ttft_ms_ci_high": 12.8,
        "p99_ttft_ms": 30.0,
        "p99_ttft_ms_ci_low": 25.0,
        "p99_ttft_ms_ci_high": None,
        "output_throughput": 100.0,
        "output_throughput_ci_low": 90.0,
        "output_throughput_ci_high": 110.0,
        "ci_note": "TTFT n=40: p99 high",
    }
    c = {
        "serving": {"available": True, "points": [point], "grids": []},
        "cost": {"points": []},
        "sustained": {
            "summary": [{"run_id": "r"}],
            "retention": [
                {
                    "run_id": "r",
                    "retention_vs_first": 0.65,
                    "retention_vs_first_ci_low": 0.5,
                    "retention_vs_first_ci_high": 0.8,
                    "retention_vs_peak": None,
                }
            ],
            "iterations": [],
            "lanes": [],
        },
    }
    text = "\n".join(s_serving(document(c)))
    assert "12.30 [11.90–12.80]" in text and "30.00 [25.00–?]" in text and "100.00 [90.00–110.00]" in text
    assert "`?` = that bound is not defined" in text
    sus = "\n".join(s_sustained(document(c)))
    assert "0.65 [0.5–0.8]" in sus
