"""Saturation evidence (analytics/views/sql/39_report_saturation.sql): the accelerator's utilisation samples inside
each sweep point's span, NULL with a reason where there are none, and its cells beside throughput in REPORT.md."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from analytics.report.comparison import build_comparison
from analytics.report.document import Comparison
from analytics.report.markdown import render
from analytics.store import LocalStore
from analytics.views import connect
from tests.support import attempts
from tests.support.synthetic import fixed_request
from tests.support.views import q

T0 = datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc)


def lane_row(**extra):
    return attempts.lane_row(**{"wall_s": 120.0, "box_role": "inf2", "instance_type": "inf2.xlarge", **extra})


def commit(store, run_id, lane, attempt="a1", lane_runs=None, **tables):
    attempts.commit(store, run_id, lane, attempt, lane_runs=lane_runs or lane_row(), **tables)


def point(pid, start=None, end=None, conc=1):
    return {
        "point_id": pid,
        "model": "m",
        "server_config": "c",
        "max_concurrency": conc,
        "mode": "closed",
        "window_start": start,
        "window_end": end,
    }


def request(pid, i, sent_at=None):
    return fixed_request(pid, i, sent_at=sent_at)


def util(second, value, core="nc0", note=None):
    return {
        "ts": T0 + timedelta(seconds=second),
        "source": "neuron_monitor",
        "metric": "accel_util_pct",
        "device": core,
        "value": value,
        "unit": "%",
        "note": note,
    }


def host(second):
    return {"ts": T0 + timedelta(seconds=second), "source": "host", "metric": "host_cpu_util_pct", "value": 5.0}


@pytest.fixture()
def store(tmp_path):
    return LocalStore(tmp_path / "results")


def by_point(con):
    return {r["point_id"]: r for r in q(con, "SELECT * FROM point_saturation")}


def test_samples_busy_fraction_mean_and_p90_inside_the_span_only(store):
    # ticks at 1..5 s inside the window [0, 6]; two cores per tick, the tick's util is their mean
    values = {1: (0.0, 0.0), 2: (40.0, 60.0), 3: (80.0, 100.0), 4: (90.0, 90.0), 5: (20.0, 0.0)}
    tele = [util(s, v, f"nc{i}") for s, pair in values.items() for i, v in enumerate(pair)]
    tele += [util(-5, 99.0), util(30, 99.0), host(2)]  # outside the span: not counted; host rows are not accel
    commit(
        store,
        "r1",
        "serve_sweep",
        sweep_points=[point("p1", T0, T0 + timedelta(seconds=6))],
        requests=[request("p1", i) for i in range(3)],
        telemetry=tele,
    )
    row = by_point(connect(store))["p1"]
    ticks = [0.0, 50.0, 90.0, 90.0, 10.0]
    assert row["accel_samples"] == 5 and row["accel_cores"] == 2
    assert row["accel_busy_threshold_pct"] == 0.0
    assert row["accel_busy_fraction"] == pytest.approx(4 / 5) and row["accel_busy_pct"] == pytest.approx(80.0)
    assert row["accel_util_mean_pct"] == pytest.approx(sum(ticks) / 5)
    # linear-interpolated p90 of [0, 10, 50, 90, 90]: rank 0.9 * 4 = 3.6 -> 90
    assert row["accel_util_p90_pct"] == pytest.approx(90.0)
    assert row["accel_span_source"] == "sweep_points" and row["accel_span_s"] == pytest.approx(6.0)
    assert row["accel_util_reason"] is None and row["accel_util_note"] is None
    assert row["accel_sample_period_s"] == pytest.approx(1.0)


def test_no_sensor_is_null_with_its_note_never_zero(store):
    commit(
        store,
        "r1",
        "serve_sweep",
        sweep_points=[point("p1", T0, T0 + timedelta(seconds=6))],
        requests=[request("p1", 0)],
        telemetry=[util(2, None, None, "neuron-monitor is not on PATH"), host(2)],
    )
    commit(
        store,
        "r1",
        "serve_local",
        lane_runs=lane_row(box_role="local", backend="cpu"),
        sweep_points=[point("p2", T0, T0 + timedelta(seconds=6))],
        requests=[request("p2", 0)],
        telemetry=[host(2)],
    )
    rows = by_point(connect(store))
    for pid in ("p1", "p2"):
        r = rows[pid]
        assert r["accel_util_reason"] == "no sensor"
        assert r["accel_samples"] == 0
        assert (r["accel_busy_fraction"], r["accel_busy_pct"], r["accel_util_mean_pct"], r["accel_util_p90_pct"]) == (
            None,
            None,
            None,
            None,
        )
    assert rows["p1"]["accel_util_note"] == "neuron-monitor is not on PATH"
    assert "no accelerator sensor" in rows["p2"]["accel_util_note"]


def test_span_shorter_than_the_sampling_period_has_no_samples_in_span(store):
    tele = [util(s, 50.0) for s in (1, 2, 3)]
    start = T0 + timedelta(seconds=1.2)
    commit(
        store,
        "r1",
        "serve_sweep",
        sweep_points=[point("short", start, start + timedelta(seconds=0.5))],
        requests=[request("short", 0)],
        telemetry=tele,
    )
    r = by_point(connect(store))["short"]
    assert r["accel_util_reason"] == "no samples in span" and r["accel_busy_pct"] is None
    assert r["accel_util_note"] == "span 0.500 s, sampling period 1.000 s: no sample fell inside it"


def test_in_span_samples_without_a_value_are_no_samples(store):
    tele = [util(1, 50.0), util(3, None, None, "no Neuron runtime is running (no core in use)"), util(9, 50.0)]
    commit(
        store,
        "r1",
        "serve_sweep",
        sweep_points=[point("p1", T0 + timedelta(seconds=2), T0 + timedelta(seconds=4))],
        requests=[request("p1", 0)],
        telemetry=tele,
    )
    r = by_point(connect(store))["p1"]
    assert r["accel_util_reason"] == "no samples in span" and r["accel_samples"] == 0
    assert r["accel_util_note"] == (
        "1 sample(s) in the span, none with a value: no Neuron runtime is running (no core in use)"
    )


def test_a_point_without_a_window_takes_its_span_from_its_requests(store):
    reqs = [request("p1", i, sent_at=T0 + timedelta(seconds=10 + i)) for i in range(3)]
    tele = [util(9, 100.0), util(11, 30.0), util(12.4, 70.0), util(13, 100.0)]  # span 10 .. 12.5 s
    commit(store, "r1", "serve_sweep", sweep_points=[point("p1")], requests=reqs, telemetry=tele)
    r = by_point(connect(store))["p1"]
    assert r["accel_span_source"] == "requests"
    assert r["accel_span_start"] == T0 + timedelta(seconds=10)
    assert r["accel_span_end"] == T0 + timedelta(seconds=12.5)
    assert r["accel_samples"] == 2 and r["accel_util_mean_pct"] == pytest.approx(50.0)


def test_a_point_with_neither_window_nor_send_times_has_no_span(store):
    commit(
        store,
        "r1",
        "serve_sweep",
        sweep_points=[point("p1")],
        requests=[request("p1", 0)],
        telemetry=[util(1, 10.0), util(2, 10.0)],
    )
    r = by_point(connect(store))["p1"]
    assert r["accel_util_reason"] == "no span" and r["accel_span_source"] is None


def test_report_shows_busy_and_p90_beside_throughput_with_a_footnote_for_dashes(store):
    start = T0 + timedelta(seconds=2.2)
    tele = [util(s, v) for s, v in ((1, 0.0), (2, 80.0), (3, 90.0), (4, 100.0))] + [host(1), host(2.3)]
    # p2 keeps a host sample in its window (a headline point) but no accelerator sample falls inside it
    commit(
        store,
        "r1",
        "serve_sweep",
        sweep_points=[
            point("p1", T0, T0 + timedelta(seconds=5)),
            point("p2", start, start + timedelta(seconds=0.3), conc=2),
        ],
        requests=[request(p, i) for p in ("p1", "p2") for i in range(3)],
        telemetry=tele,
    )
    c = build_comparison(connect(store), ["r1"], with_deltas=False)
    points = {p["point_id"]: p for p in c["serving"]["points"]}
    assert points["p1"]["accel_busy_pct"] == pytest.approx(75.0)
    assert points["p1"]["accel_util_p90_pct"] == pytest.approx(97.0)
    assert points["p2"]["accel_util_reason"] == "no samples in span"
    text = render(Comparison.model_validate(c))
    header = next(ln for ln in text.splitlines() if ln.startswith("| conc |"))
    cols = [h.strip() for h in header.strip("|").split("|")]
    assert cols.index("accel busy %") == cols.index("total tok/s") + 1
    assert cols.index("util p90 %") == cols.index("accel busy %") + 1
    body = [ln for ln in text.splitlines() if ln.startswith("| 1 |") or ln.startswith("| 2 |")]
    cells = {ln.split("|")[1].strip(): [x.strip() for x in ln.strip("|").split("|")] for ln in body}
    assert cells["1"][cols.index("accel busy %")] == "75.00" and cells["1"][cols.index("util p90 %")] == "97.00"
    assert cells["2"][cols.index("accel busy %")] == "—" and cells["2"][cols.index("util p90 %")] == "—"
    assert "accel busy % = share of the accelerator utilisation samples inside the point's span above 0.00 %" in text
    assert (
        "— in accel busy % / util p90 % at conc 2: no samples in span (span 0.300 s, sampling period "
        "1.000 s: no sample fell inside it)."
    ) in text
    assert "at conc 1" not in text
