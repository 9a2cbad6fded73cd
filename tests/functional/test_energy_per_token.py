"""Energy per output token (analytics/views/sql/42_report_energy.sql): the power samples inside each sweep point's span
integrated into joules and divided by the point's output tokens, NULL with a reason where nothing measured power
(Neuron, CPU, too few samples), and its "J/token" column in REPORT.md's serving tables."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from agents.telemetry.neuron_monitor import POWER_NOTE, parse_report
from agents.telemetry.nvidia import parse_nvidia_smi_csv
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
    return attempts.lane_row(
        **{"wall_s": 120.0, "backend": "cuda", "box_role": "cuda", "instance_type": "g5.xlarge", **extra}
    )


def commit(store, run_id, lane, lane_runs=None, **tables):
    attempts.commit(store, run_id, lane, lane_runs=lane_runs or lane_row(), **tables)


def point(pid, seconds=10.0, conc=1, start=T0):
    return {
        "point_id": pid,
        "model": "m",
        "server_config": "c",
        "max_concurrency": conc,
        "mode": "closed",
        "window_start": start,
        "window_end": start + timedelta(seconds=seconds),
    }


def requests(pid, n, tokens):
    """``n`` successful measured requests of ``tokens`` output tokens each (two chunks: the first token, the rest)."""
    return [
        fixed_request(
            pid, i, chunk_times_s=[0.1, 0.5], chunk_tokens=[1, tokens - 1], output_tokens=tokens, output_len=tokens
        )
        for i in range(n)
    ]


def gpu_tick(second, *watts, util=90.0):
    """One nvidia-smi telemetry tick (the sensor's own parser over its CSV), stamped ``second`` after T0."""
    csv = "".join(f"{i}, {util}, 1000, 23028, {w}\n" for i, w in enumerate(watts))
    return [{"ts": T0 + timedelta(seconds=second), **r} for r in parse_nvidia_smi_csv(csv)]


def neuron_tick(second):
    report = {
        "neuron_runtime_data": [
            {
                "report": {
                    "neuroncore_counters": {"neuroncores_in_use": {"0": {"neuroncore_utilization": 80.0}}},
                    "memory_used": {"neuron_runtime_used_bytes": {"neuron_device": 1}},
                }
            }
        ]
    }
    return [{"ts": T0 + timedelta(seconds=second), **r} for r in parse_report(report)]


def host(second):
    return {"ts": T0 + timedelta(seconds=second), "source": "host", "metric": "host_cpu_util_pct", "value": 5.0}


@pytest.fixture()
def store(tmp_path):
    return LocalStore(tmp_path / "results")


def by_point(store):
    return {r["point_id"]: r for r in q(connect(store), "SELECT * FROM point_energy")}


def test_constant_200_w_for_10_s_over_1000_tokens_is_2_j_per_token(store):
    # samples at 0, 1, ..., 10 s of a 10 s window; 4 requests x 250 output tokens
    tele = [r for s in range(11) for r in gpu_tick(s, "200.00")]
    commit(store, "r1", "serve_sweep", sweep_points=[point("p1")], requests=requests("p1", 4, 250), telemetry=tele)
    r = by_point(store)["p1"]
    assert r["energy_j"] == pytest.approx(2000.0)
    assert r["energy_per_output_token_j"] == pytest.approx(2.0)
    assert r["power_mean_w"] == pytest.approx(200.0) and r["power_samples"] == 11
    assert r["energy_output_tokens"] == 1000 and r["energy_span_s"] == pytest.approx(10.0)
    assert r["power_source"] == "nvidia_smi" and r["power_devices"] == 1
    assert r["energy_reason"] is None and r["energy_note"] is None


def test_edges_are_held_at_the_nearest_sample_and_inner_gaps_are_trapezoids(store):
    # samples at 1 s (100 W), 4 s (400 W), 9 s (200 W) inside [0, 10]:
    # edge 0..1 at 100 W = 100 J; 1..4 trapezoid 750 J; 4..9 trapezoid 1500 J; edge 9..10 at 200 W = 200 J
    tele = gpu_tick(1, "100") + gpu_tick(4, "400") + gpu_tick(9, "200")
    tele += gpu_tick(-3, "999") + gpu_tick(12, "999")  # outside the span: not counted
    commit(store, "r1", "serve_sweep", sweep_points=[point("p1")], requests=requests("p1", 1, 1275), telemetry=tele)
    r = by_point(store)["p1"]
    assert r["energy_j"] == pytest.approx(2550.0) and r["power_samples"] == 3
    assert r["power_mean_w"] == pytest.approx(255.0)
    assert r["energy_per_output_token_j"] == pytest.approx(2.0)


def test_every_gpu_of_the_box_is_summed_and_a_tick_with_a_gpu_na_is_no_sample(store):
    tele = [r for s in range(0, 11, 2) for r in gpu_tick(s, "150", "50")]  # 200 W in all at 0, 2, ..., 10
    tele += gpu_tick(5, "150", "[N/A]")  # one GPU unreadable: not 150 W
    commit(store, "r1", "serve_sweep", sweep_points=[point("p1")], requests=requests("p1", 2, 500), telemetry=tele)
    r = by_point(store)["p1"]
    assert r["power_devices"] == 2 and r["power_samples"] == 6
    assert r["energy_j"] == pytest.approx(2000.0) and r["energy_per_output_token_j"] == pytest.approx(2.0)


def test_neuron_rows_are_null_with_the_monitors_note_never_zero(store):
    commit(
        store,
        "r1",
        "serve_sweep",
        lane_runs=lane_row(backend="neuron", box_role="inf2", instance_type="inf2.xlarge"),
        sweep_points=[point("p1")],
        requests=requests("p1", 4, 250),
        telemetry=[r for s in range(11) for r in neuron_tick(s)],
    )
    r = by_point(store)["p1"]
    assert (r["energy_j"], r["energy_per_output_token_j"], r["power_mean_w"]) == (None, None, None)
    assert r["power_samples"] == 0
    assert r["energy_reason"] == "no sensor" and r["energy_note"] == POWER_NOTE
    assert "neuron-monitor" in r["energy_note"]


def test_a_cpu_run_has_no_power_sensor(store):
    commit(
        store,
        "r1",
        "serve_local",
        lane_runs=lane_row(backend="cpu", box_role="local", instance_type=None),
        sweep_points=[point("p1")],
        requests=requests("p1", 2, 10),
        telemetry=[host(s) for s in range(11)],
    )
    r = by_point(store)["p1"]
    assert r["energy_j"] is None and r["energy_reason"] == "no sensor"
    assert r["energy_note"].startswith("no power sensor")


def test_one_sample_in_the_span_is_too_few_and_says_so(store):
    start = T0 + timedelta(seconds=2.2)
    tele = [r for s in range(6) for r in gpu_tick(s, "200")]
    commit(
        store,
        "r1",
        "serve_sweep",
        sweep_points=[point("short", 0.5, start=start + timedelta(seconds=0.5))],
        requests=requests("short", 1, 10),
        telemetry=tele,
    )
    commit(
        store,
        "r1",
        "serve_sweep2",
        sweep_points=[point("none", 0.5, start=start)],
        requests=requests("none", 1, 10),
        telemetry=tele,
    )
    rows = by_point(store)
    r = rows["short"]  # [2.7, 3.2] holds the sample at 3 s
    assert r["energy_j"] is None and r["energy_reason"] == "too few samples" and r["power_samples"] == 1
    assert r["energy_note"] == "1 power sample(s) inside the 0.500 s span, the integral needs at least 2"
    assert rows["none"]["energy_reason"] == "too few samples" and rows["none"]["power_samples"] == 0


def test_energy_without_output_tokens_has_no_j_per_token(store):
    reqs = requests("p1", 1, 10)
    reqs[0].update(success=False, output_tokens=0, error="boom", error_type="HttpStatusError")
    tele = [r for s in range(11) for r in gpu_tick(s, "200")]
    commit(store, "r1", "serve_sweep", sweep_points=[point("p1")], requests=reqs, telemetry=tele)
    r = by_point(store)["p1"]
    assert r["energy_j"] == pytest.approx(2000.0) and r["energy_per_output_token_j"] is None
    assert r["energy_reason"] == "no output tokens" and "no J/token" in r["energy_note"]


def _serving_table(text):
    lines = text.splitlines()
    header = next(ln for ln in lines if ln.startswith("| conc |"))
    cols = [h.strip() for h in header.strip("|").split("|")]
    body = [ln for ln in lines if ln.startswith("| 1 |") or ln.startswith("| 2 |")]
    return cols, {ln.split("|")[1].strip(): [x.strip() for x in ln.strip("|").split("|")] for ln in body}


def test_report_shows_j_per_token_beside_the_points_with_null_and_its_reason(store):
    tele = [r for s in range(11) for r in gpu_tick(s, "200")] + [host(s) for s in range(11)]
    start = T0 + timedelta(seconds=2.2)
    commit(
        store,
        "r1",
        "serve_sweep",
        sweep_points=[point("p1"), point("p2", 0.5, conc=2, start=start + timedelta(seconds=0.5))],
        requests=requests("p1", 4, 250) + requests("p2", 1, 10),
        telemetry=tele,
    )
    c = build_comparison(connect(store), ["r1"], with_deltas=False)
    points = {p["point_id"]: p for p in c["serving"]["points"]}
    assert points["p1"]["energy_per_output_token_j"] == pytest.approx(2.0)
    assert points["p2"]["energy_reason"] == "too few samples"
    text = render(Comparison.model_validate(c))
    cols, cells = _serving_table(text)
    assert "J/token" in cols
    assert cells["1"][cols.index("J/token")] == "2.00" and cells["2"][cols.index("J/token")] == "NULL"
    assert (
        "NULL in J/token at conc 2: too few samples (1 power sample(s) inside the 0.500 s span, the integral "
        "needs at least 2)."
    ) in text
    assert "J/token = the accelerators' energy over the point's span" in text


def test_report_on_neuron_has_no_j_per_token_column_but_says_why(store):
    tele = [r for s in range(11) for r in neuron_tick(s)]
    commit(
        store,
        "r1",
        "serve_sweep",
        lane_runs=lane_row(backend="neuron", box_role="inf2", instance_type="inf2.xlarge"),
        sweep_points=[point("p1")],
        requests=requests("p1", 4, 250),
        telemetry=tele,
    )
    text = render(Comparison.model_validate(build_comparison(connect(store), ["r1"], with_deltas=False)))
    cols, _ = _serving_table(text)
    assert "J/token" not in cols
    assert f"J/token: NULL at every point: no sensor ({POWER_NOTE})." in text
