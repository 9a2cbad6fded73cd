"""`neuronpipe loadgen --search capacity` against the synthetic server: bad inputs, a failing server, the
committed points in the capacity views, a resume from committed points, and capacity_points on fixed rows."""

from __future__ import annotations

import pytest

from control_plane.cli import main
from tests.functional.test_loadgen_synthetic import Server

BASE = ["loadgen", "--server-kind", "synthetic", "--model", "synthetic", "--input-len", "8", "--output-len", "4"]


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--slo", "ttft_ms=100,tpot_ms=10", "--rate-min", "0"], "--rate-min must be > 0"),
        (["--slo", "ttft_ms=100,tpot_ms=10", "--rate-min", "5", "--rate-max", "1"], "above --rate-max"),
        (["--slo", "ttft_ms=100,tpot_ms=10", "--precision", "1.5"], "--precision must be in (0, 1)"),
        (["--slo", "percentile=99"], "missing"),
        ([], "needs --slo"),
        (
            ["--slo", "ttft_ms=100,tpot_ms=10", "--confirm-overload", "0.9"],
            "--confirm-overload must be in [0.005, 0.5]",
        ),
        (["--slo", "ttft_ms=100,tpot_ms=10", "--confirm-max-s", "0"], "--confirm-max-s must be in [0.5, 86,400] s"),
        (
            ["--slo", "ttft_ms=100,tpot_ms=10", "--point-duration", "5", "--max-search-s", "3"],
            "too small for one point",
        ),
    ],
)
def test_bad_search_input_is_one_line_exit_2_and_nothing_sent(extra, words, capsys, tmp_path):
    # port 9 (discard) on loopback: were anything sent, the run would fail differently
    rc = main(
        BASE + ["--base-url", "http://127.0.0.1:9", "--search", "capacity", "--results", str(tmp_path / "r"), *extra]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and words in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_a_server_failing_every_request_ends_with_no_rate_meets_exit_1_rows_committed(tmp_path, capsys):
    from analytics.store import open_store
    from analytics.views import connect

    server = Server("--error-rate", "1.0")
    try:
        rc = main(
            BASE
            + [
                "--base-url",
                server.url,
                "--search",
                "capacity",
                "--slo",
                "ttft_ms=500,tpot_ms=50",
                "--rate-min",
                "4",
                "--point-duration",
                "1",
                "--results",
                str(tmp_path / "r"),
                "--run-id",
                "fail",
            ]
        )
    finally:
        server.stop()
    out = capsys.readouterr()
    assert rc == 1 and "no rate meets the SLO" in out.err
    con = connect(open_store(str(tmp_path / "r")))
    rows = con.execute("SELECT passed, fail_reason FROM capacity_points").fetchall()
    assert rows and not any(r[0] for r in rows) and all(r[1] for r in rows)
    cap = con.execute("SELECT found, outcome FROM report_capacity").fetchall()
    assert cap == [(False, cap[0][1])] and cap[0][1].startswith("no rate meets the SLO")


def _tpot_ms(r: dict) -> float:
    n = r["output_tokens"] or 0
    return (r["e2el_s"] - r["ttft_s"]) * 1000 / (n - 1) if n > 1 else 0.0


def _good_share(measured: list[dict], ttft_ms: float, tpot_ms: float) -> float:
    """Share of a point's measured requests meeting both bounds, from the raw rows (goodput's per-request rule)."""
    return sum(r["success"] and r["ttft_s"] * 1000 <= ttft_ms and _tpot_ms(r) <= tpot_ms for r in measured) / len(
        measured
    )


def _percentile(values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (DuckDB's quantile_cont)."""
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (pos - lo)


def test_search_commits_a_well_formed_bracket_its_verdicts_follow_the_points_own_latencies(tmp_path, capsys):
    """Behaviour, not the machine's speed: whatever rates pass on a busy machine, the bracket is well formed, it
    is the one the committed verdicts give, and each verdict follows from the point's own requests. (How close
    the bracket comes to the server's true capacity is the benchmark's claim: benchmarks/capacity_search.py.)"""
    from analytics.store import open_store
    from analytics.views import connect
    from pipeline.capacity import Verdict, bracket, within_precision

    # K = 2 decode at once, a 50 ms service time: 40 req/s. The first rate (4 req/s) is a tenth of that and the
    # TTFT bound 8 service times, so some rate passes however busy the machine (a client that falls behind its
    # schedule makes a point invalid, hence failing, at any rate: the search then walks down); an overload still
    # breaks the bound.
    ttft_ms, tpot_ms, attainment, precision = 400.0, 30.0, 0.8, 0.5
    server = Server("--ttft-ms", "20", "--itl-ms", "10", "--max-batch", "2")
    try:
        rc = main(
            BASE
            + [
                "--base-url",
                server.url,
                "--search",
                "capacity",
                "--slo",
                f"ttft_ms={ttft_ms:g},tpot_ms={tpot_ms:g},percentile=90",
                "--attainment",
                str(attainment),
                "--rate-min",
                "4",
                "--precision",
                str(precision),
                "--point-duration",
                "2",
                "--burstiness",
                "20",
                "--confirm-max-s",
                "2",  # the confirmation as long as a point: its path, at no extra cost here
                "--results",
                str(tmp_path / "r"),
                "--run-id",
                "ok",
            ]
        )
    finally:
        server.stop()
    out = capsys.readouterr().out
    assert rc == 0 and "max_rate_meeting_slo" in out, out
    printed = {
        line.split()[0]: line.split()[-1]
        for line in out.splitlines()
        if line.strip().startswith(("max_rate_meeting_slo", "lowest_rate_missing_slo"))
    }
    store = open_store(str(tmp_path / "r"))
    con = connect(store)
    rows = con.execute(
        "SELECT point_id, offered_rate, passed, stop_reason, attained, attainment_target, valid, "
        "fail_reason, overloaded, phase FROM capacity_points ORDER BY step"
    ).fetchall()
    assert len(rows) >= 2 and rows[0][1] == 4.0, rows  # R0 = --rate-min
    # the bracket printed is the one the committed verdicts give, and it is well formed
    b = bracket([Verdict(rate, passed) for _, rate, passed, *_ in rows])
    assert b.lo is not None and b.hi is not None and b.lo < b.hi and within_precision(b.lo, b.hi, precision), rows
    assert (float(printed["max_rate_meeting_slo"]), float(printed["lowest_rate_missing_slo"])) == (b.lo, b.hi)
    # each verdict follows from the point's own requests
    requests = store.read_table("requests", ["ok"]).to_pylist()
    for point_id, _rate, passed, stop_reason, attained, target, valid, fail_reason, overloaded, _ in rows:
        own = [r for r in requests if r["point_id"] == point_id and not r["warmup"]]
        ok = [r for r in own if r["success"]]
        assert attained == pytest.approx(_good_share(own, ttft_ms, tpot_ms)) and target == attainment, point_id
        slo_met = (
            bool(ok)
            and valid is not False
            and (
                _percentile([r["ttft_s"] * 1000 for r in ok], 0.9) <= ttft_ms
                and _percentile([_tpot_ms(r) for r in ok if (r["output_tokens"] or 0) > 1], 0.9) <= tpot_ms
            )
        )
        assert passed == (stop_reason is None and slo_met and attained >= target and not overloaded), point_id
        assert (fail_reason is None) == passed, (point_id, fail_reason)
        assert not overloaded or "overload: " in fail_reason, (point_id, fail_reason)
    points, excluded, outcome, confirmed = con.execute(
        "SELECT points, points_excluded, outcome, confirmed FROM report_capacity"
    ).fetchone()
    assert points == len(rows)
    # the answer is confirmed exactly when a long point at that rate passed (the search measures it before answering)
    assert confirmed == any(phase == "confirm" and passed and rate == b.lo for _, rate, passed, *_, phase in rows)
    # loadgen --results samples the client host's telemetry: no point lacks it, so a point is left out of the
    # capacity view only for its own validity (rule 15: the one rule every table applies)
    kinds = con.execute(
        "SELECT kind, count(*) FROM report_exclusions WHERE kind LIKE 'point_%' GROUP BY kind"
    ).fetchall()
    assert "point_without_telemetry" not in dict(kinds), kinds
    invalid = con.execute(
        "SELECT count(*) FROM serving_points WHERE request_rate IS NOT NULL AND valid IS FALSE"
    ).fetchone()[0]
    assert excluded == invalid, (excluded, invalid, outcome)
    # each measured rate is an ordinary sweep point: open loop, offered rate, arrivals, intervals
    modes = con.execute("SELECT DISTINCT mode FROM serving_points WHERE request_rate IS NOT NULL").fetchall()
    assert modes == [("open",)]


def test_capacity_points_pass_rule_on_fixed_rows():
    from agents.loadgen.metrics import capacity_verdict

    sweep = {
        "point_id": "p",
        "mode": "open",
        "request_rate": 2.0,
        "input_len": 4,
        "output_len": 3,
        "slo_json": '{"name": "t", "ttft_ms": 100, "tpot_ms": 10, "percentile": 50}',
        "search_json": '{"kind": "capacity", "search_id": "s", "attainment": 0.75, "precision": 0.1}',
    }

    def req(i: int, ttft_s: float, ok: bool = True) -> dict:
        return {
            "point_id": "p",
            "request_id": f"r{i}",
            "request_index": i,
            "warmup": False,
            "success": ok,
            "t_scheduled_ns": i * 10**9,
            "t_sent_ns": i * 10**9,
            "t_done_ns": i * 10**9 + 10**8,
            "client_queue_s": 0.0,
            "ttft_s": ttft_s if ok else None,
            "e2el_s": ttft_s + 0.01 if ok else None,
            "prompt_tokens": 4,
            "output_tokens": 3 if ok else None,
            "input_len": 4,
            "output_len": 3,
            "chunk_times_s": [ttft_s, ttft_s + 0.005, ttft_s + 0.01] if ok else [],
            "chunk_tokens": [1, 1, 1] if ok else [],
        }

    good = [req(i, 0.05) for i in range(4)]
    row = capacity_verdict(good, sweep)
    assert row["passed"] and row["attained"] == 1.0 and row["fail_reason"] is None
    # four requests: too few to test for overload (untested, said, never a failure on its own)
    assert row["overloaded"] is None and row["overload_reason"].startswith("overload untested: ")
    # half the requests fail: p50 still fine, attainment 0.5 < 0.75
    mixed = [req(0, 0.05), req(1, 0.05), req(2, 0, ok=False), req(3, 0, ok=False)]
    row = capacity_verdict(mixed, sweep)
    assert not row["passed"] and "attainment 50.0 % < 75.0 %" in row["fail_reason"]
    # cut short by the saturation rule: fails whatever its latencies
    row = capacity_verdict(good, {**sweep, "stop_reason": "saturated: test"})
    assert not row["passed"] and row["fail_reason"].startswith("saturated: test")


def test_the_full_plan_budgets_the_capacity_lane_and_the_tiny_default_runs_it(capsys):
    from pathlib import Path

    from control_plane.local_plan import local_request, plan_local

    rc = main(["plan", "--input", str(Path(__file__).resolve().parents[2] / "examples" / "run-full.json")])
    out = capsys.readouterr().out
    assert rc == 0
    budget = [line for line in out.splitlines() if "capacity" in line and "search budget (max_search_s)" in line]
    assert len(budget) == 1
    tiny = plan_local(local_request(None, profile="tiny"), run_id="tiny-1", results_uri="unused")
    assert "capacity" in [n.lane for n in tiny.nodes]  # what `make run` runs


def _fifo_rows(rate: float, slots: int, service_s: float, duration_s: float) -> list[dict]:
    """Regular arrivals at ``rate`` to a server of ``slots`` FIFO slots of ``service_s`` each: its capacity is
    slots / service_s; a TTFT from arrival (queueing included)."""
    import heapq

    free = [0.0] * slots
    rows = []
    for i in range(int(rate * duration_s)):
        t = i / rate
        start = max(t, heapq.heappop(free))
        heapq.heappush(free, start + service_s)
        ttft, e2el = start - t + 0.01, start + service_s - t
        rows.append(
            {
                "point_id": "p",
                "request_id": f"r{i}",
                "request_index": i,
                "warmup": False,
                "success": True,
                "t_scheduled_ns": int((100 + t) * 1e9),
                "t_sent_ns": int((100 + t) * 1e9),
                "t_done_ns": int((100 + t + e2el) * 1e9),
                "client_queue_s": 0.0,
                "ttft_s": ttft,
                "e2el_s": e2el,
                "prompt_tokens": 4,
                "output_tokens": 3,
                "input_len": 4,
                "output_len": 3,
                "chunk_times_s": [ttft, (ttft + e2el) / 2, e2el],
                "chunk_tokens": [1, 1, 1],
            }
        )
    return rows


def test_an_overloaded_point_fails_whatever_the_slo_bound_and_says_why():
    """Fixed rows of a 40 req/s server (4 slots of 100 ms) under a bound no queue here reaches: 38 req/s passes
    (nothing grows), 44 req/s fails on the overload test alone (in flight grows ~4/s, completions stay at 40/s)."""
    from agents.loadgen.metrics import capacity_verdict

    sweep = {
        "point_id": "p",
        "mode": "open",
        "input_len": 4,
        "output_len": 3,
        "slo_json": '{"name": "loose", "ttft_ms": 100000, "tpot_ms": 100000, "percentile": 90}',
        "search_json": '{"kind": "capacity", "search_id": "s", "attainment": 0.9, "precision": 0.1}',
    }
    below = capacity_verdict(_fifo_rows(38.0, 4, 0.1, 3.0), {**sweep, "request_rate": 38.0})
    assert below["passed"] and below["overloaded"] is False and below["fail_reason"] is None
    assert abs(below["in_flight_growth"]) < 1 and below["p50_e2el_ms"] == pytest.approx(100.0)
    over = capacity_verdict(_fifo_rows(44.0, 4, 0.1, 3.0), {**sweep, "request_rate": 44.0})
    assert over["slo_met"] and over["attained"] == 1.0  # the bound alone would pass it
    assert not over["passed"] and over["overloaded"]
    assert over["completion_rate_ci_high"] < over["span_arrival_rate"] and over["in_flight_slope_ci_low"] > 0
    assert over["in_flight_growth"] == pytest.approx(4.0 * over["overload_span_s"], rel=0.1)
    assert over["fail_reason"].startswith("overload: completions 40.")
    assert "< offered 44" in over["fail_reason"] and "in flight grew" in over["fail_reason"]
