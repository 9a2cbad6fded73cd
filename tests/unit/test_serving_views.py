"""The serving views (analytics/views/sql/1*_serving_*.sql) against hand-computed values (docs/reference/metrics.md
serving, sustained)."""

from __future__ import annotations

import math

import pytest

from agents.loadgen.metrics import connect_rows, point_metrics, sustained_metrics

S = 1_000_000_000  # ns per second


def req(
    i,
    *,
    ttft,
    chunks,
    tokens=None,
    out=None,
    prompt=8,
    sent=None,
    done=None,
    sched=None,
    success=True,
    warmup=False,
    point="p",
    input_len=8,
    output_len=None,
    error_type=None,
):
    sent = i * S if sent is None else sent
    out = sum(tokens) if out is None and tokens else (len(chunks) if out is None else out)
    return {
        "point_id": point,
        "request_id": f"{point}-{i}",
        "request_index": i,
        "warmup": warmup,
        "t_scheduled_ns": sent if sched is None else sched,
        "t_sent_ns": sent,
        "t_done_ns": done if done is not None else sent + int((chunks[-1] if chunks else 0) * S),
        "client_queue_s": ((sent - (sent if sched is None else sched)) / S),
        "ttft_s": ttft if success else None,
        "e2el_s": chunks[-1] if success and chunks else None,
        "chunk_times_s": chunks,
        "chunk_tokens": tokens or [1] * len(chunks),
        "prompt_tokens": prompt if success else None,
        "output_tokens": out if success else None,
        "input_len": input_len,
        "output_len": output_len if output_len is not None else out,
        "success": success,
        "error_type": error_type,
        "error": "boom" if not success else None,
    }


def test_multi_token_chunks_one_token_output_and_failures():
    rows = [
        # A: 3 chunks carrying 1, 2, 1 tokens: ITLs 200 ms and 100 ms; ITL per token 100 and 100
        req(0, ttft=0.1, chunks=[0.1, 0.3, 0.4], tokens=[1, 2, 1]),
        # B: one-token output: no TPOT, no ITL
        req(1, ttft=0.2, chunks=[0.2], tokens=[1], output_len=1),
        # C: failed: excluded from latency stats, counted as failed
        req(2, ttft=None, chunks=[0.05], success=False, done=2 * S + int(0.5 * S), error_type="StreamClosedError"),
        # warm-up: excluded from everything
        req(3, ttft=9.0, chunks=[9.0, 9.5], warmup=True, sent=-10 * S),
    ]
    m = point_metrics(rows, {"point_id": "p", "slo_json": '{"ttft_ms": 150, "tpot_ms": 200}'})
    assert (m["sent"], m["completed"], m["failed"]) == (3, 2, 1)
    assert m["mean_ttft_ms"] == pytest.approx(150.0)
    assert m["median_ttft_ms"] == pytest.approx(150.0)
    assert m["std_ttft_ms"] == pytest.approx(50.0)  # population std
    assert m["p90_ttft_ms"] == pytest.approx(100 + 0.9 * 100)  # linear interpolation
    # TPOT only for A: (400 - 100) / (4 - 1)
    assert m["mean_tpot_ms"] == pytest.approx(100.0)
    # ITL: pooled gaps 200 and 100; per token 100 and 100
    assert m["mean_itl_ms"] == pytest.approx(150.0)
    assert m["p99_itl_ms"] == pytest.approx(100 + 0.99 * 100)
    assert m["mean_itl_per_token_ms"] == pytest.approx(100.0)
    # duration: first measured dispatch (0 s) -> last completion (C ends at 2.5 s)
    assert m["duration"] == pytest.approx(2.5)
    assert m["request_throughput"] == pytest.approx(2 / 2.5)
    assert m["output_throughput"] == pytest.approx(5 / 2.5)
    assert m["total_token_throughput"] == pytest.approx((16 + 5) / 2.5)
    # goodput: A meets ttft 100 <= 150 and tpot 100 <= 200; B fails ttft 200 > 150
    assert m["good_completed"] == 1
    assert m["request_goodput"] == pytest.approx(1 / 2.5)
    assert m["first_error_type"] == "StreamClosedError"
    assert m["valid"] is True and m["invalid_reason"] is None


def test_goodput_counts_tpot_as_zero_for_one_token_outputs_and_is_null_without_slo():
    rows = [req(0, ttft=0.1, chunks=[0.1], output_len=1)]
    m = point_metrics(rows, {"point_id": "p", "slo_json": '{"tpot_ms": 1}'})
    assert m["good_completed"] == 1
    assert point_metrics(rows, {"point_id": "p"})["request_goodput"] is None


def test_validity_flags_client_lag_lengths_and_rate():
    rows = [req(i, ttft=0.1, chunks=[0.1, 0.2], sched=i * S - int(0.2 * S)) for i in range(3)]
    rows.append(req(3, ttft=0.1, chunks=[0.1, 0.2], prompt=9))  # the server saw 9 prompt tokens, not 8
    m = point_metrics(rows, {"point_id": "p", "client_lag_bound_ms": 50.0})
    assert m["client_queue_p99_ms"] == pytest.approx(200.0)
    assert m["client_lag_ok"] is False
    assert m["length_mismatches"] == 1 and m["input_len_mismatches"] == 1 and m["lengths_ok"] is False
    assert m["valid"] is False
    assert "client queue p99" in m["invalid_reason"] and "missed the requested lengths" in m["invalid_reason"]
    # open loop: scheduled every 0.1 s but sent every 1 s -> the achieved rate falls short
    late = [req(i, ttft=0.1, chunks=[0.1], sched=int(i * 0.1 * S)) for i in range(5)]
    m = point_metrics(late, {"point_id": "p", "request_rate": 10.0})
    assert m["scheduled_rate"] == pytest.approx(10.0) and m["achieved_rate"] == pytest.approx(1.0)
    assert m["rate_ok"] is False and m["valid"] is False


def test_sustained_windows_retention_and_drift():
    # 8 windows of 1 s; one request per window, sent at the window start, chunks at +0.1..+0.1k s.
    # Window w carries tokens_by_window[w] tokens (one chunk of that many tokens).
    tokens_by_window = [1, 10, 10, 9, 8, 8, 7, 6]
    rows = [
        req(w, ttft=0.1, chunks=[0.1], tokens=[t], out=t, output_len=t, sent=w * S)
        for w, t in enumerate(tokens_by_window)
    ]
    sp = {
        "point_id": "p",
        "mode": "sustained",
        "window_s": 1.0,
        "warmup_windows": 1,
        "retention_k": 2,
        "duration_limit_s": 8.0,
    }
    windows, summary = sustained_metrics(rows, sp)
    assert [w["window"] for w in windows] == list(range(8))
    assert [w["output_tokens"] for w in windows] == tokens_by_window
    assert [w["warmup"] for w in windows] == [True] + [False] * 7
    assert summary["windows"] == 7
    assert summary["first_k_throughput"] == pytest.approx(10.0)  # median(10, 10)
    assert summary["last_k_throughput"] == pytest.approx(6.5)  # median(7, 6)
    assert summary["peak_k_throughput"] == pytest.approx(10.0)
    assert summary["retention_vs_first"] == pytest.approx(0.65)
    assert summary["retention_vs_peak"] == pytest.approx(0.65)
    # drift: least squares over (t_mid_min, throughput) of windows 1..7
    xs = [(w + 0.5) / 60 for w in range(1, 8)]
    ys = tokens_by_window[1:]
    mx, my = sum(xs) / 7, sum(ys) / 7
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    resid = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys))
    half = 2.571 * math.sqrt(resid / 5 / sxx)  # t(0.975, df=5)
    assert summary["throughput_slope_per_min"] == pytest.approx(slope)
    assert summary["throughput_slope_ci_low"] == pytest.approx(slope - half)
    assert summary["throughput_slope_ci_high"] == pytest.approx(slope + half)
    assert summary["throughput_slope_ci_high"] < 0  # a real decline


def test_sustained_with_a_single_measured_window_has_no_retention_and_no_error():
    rows = [req(w, ttft=0.1, chunks=[0.1], tokens=[5], out=5, output_len=5, sent=w * S) for w in range(2)]
    sp = {
        "point_id": "p",
        "mode": "sustained",
        "window_s": 1.0,
        "warmup_windows": 1,
        "retention_k": 1,
        "duration_limit_s": 2.0,
    }
    windows, summary = sustained_metrics(rows, sp)
    assert summary["windows"] == 1
    assert summary["retention_vs_first"] is None  # first and last K would overlap
    assert summary["throughput_slope_ci_low"] is None  # no CI from one point


def test_views_load_through_the_store(tmp_path):
    from analytics.store import open_store
    from analytics.views import connect

    store = open_store(tmp_path)
    w = store.begin_attempt("r1", "serve_sweep")
    w.add_rows("requests", [req(0, ttft=0.1, chunks=[0.1, 0.2])])
    w.add_rows("sweep_points", [{"point_id": "p", "max_concurrency": 4}])
    w.commit("succeeded")
    con = connect(store)
    got = con.execute("SELECT run_id, lane, completed, median_itl_ms, max_concurrency FROM serving_points").fetchall()
    assert got == [("r1", "serve_sweep", 1, pytest.approx(100.0), 4)]


def test_only_create_view_statements():
    con = connect_rows({})
    names = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    assert {
        "request_metrics",
        "request_itls",
        "serving_points",
        "sustained_window_metrics",
        "sustained_summary",
    } <= names
