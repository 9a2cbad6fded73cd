"""An adaptive 4-type matrix through the wave scheduler (control_plane.waves.schedule, what the schedule_wave Lambda
runs between waves) over a store: each wave's segments are answered by committing their lanes as a box would — a
serve_sweep cell's rows from tests/support/matrix.py (synthetic requests, another seed per run, priced as its type:
inf2.8xlarge's $/M is about 2.6 times the cheapest's, clearly dominated) — until the scheduler says the run is done.
Every cell's runs made up to ``max_repeats`` (the same draws where both ran) are the full matrix. And a 2-type
matrix with the capacity lane whose brackets send both cells to a capacity bisection. Not a Step Functions
rehearsal: the state machine's Map, the boxes and their launches are not in it (docs/dev/testing.md)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from analytics.decision_noise import store_connection
from analytics.store import LocalStore
from control_plane.adaptive import ranking
from control_plane.matrix_plan import Fleet
from control_plane.models import parse_request
from control_plane.plan import plan_run
from control_plane.waves import schedule
from tests.support import attempts
from tests.support.matrix import CONCURRENCIES, commit_lane
from tests.support.synthetic import T0

RUN = "r-adaptive"
TYPES = ["inf2.xlarge", "g6.xlarge", "g5.xlarge", "inf2.8xlarge"]  # on-demand $/hour 0.76, 0.80, 1.01, 1.97
MAX_REPEATS = 2
CARRIED = ("next_wave", "box_failures", "stop_failed", "distributed")


@pytest.fixture(scope="module")
def plan():
    req = parse_request(
        {
            "lanes": ["provenance", "preflight", "serve_sweep"],
            "server_configs": ["A"],
            "models": ["llama-3.1-8b-instruct"],
            "profile": "tiny",
            "max_cost_usd": 50,
            "matrix": {"instance_types": TYPES, "adaptive": {"max_repeats": MAX_REPEATS}},
        }
    )
    return plan_run(req, run_id=RUN, results_uri="s3://bkt/results", fleet=Fleet(("subnet-a",)))


def run_segment(store: LocalStore, seg: dict) -> None:
    """A box's segment: its serve_sweep committed with the cell's rows (seed: the cell and its run), the rest
    committed succeeded."""
    for step in seg["lanes"]:
        lane = step["result_lane"]
        if lane.startswith("serve_sweep@"):
            points = [(f"A-c{c}", c, None, 1.0) for c in CONCURRENCIES]
            commit_lane(store, RUN, lane, seg["instance_type"], "A", "llama", points, seed=sum(map(ord, lane)))
        else:
            row = attempts.lane_row(
                "succeeded", 0.0, "inf2", seg["instance_type"], "cpu", "t", datetime.now(timezone.utc)
            )
            attempts.commit(store, RUN, lane, None, "succeeded", lane_runs=row)


def box_hours(store: LocalStore) -> float:
    """The cells' lanes' wall time, as the scheduler counts box-hours."""
    return sum(r["wall_s"] for r in store.read_table("lane_runs", [RUN]).to_pylist()) / 3600


def test_an_adaptive_matrix_stops_the_dominated_type_first_and_ends_on_the_full_ranking_in_fewer_box_hours(
    plan, tmp_path, capsys
):
    data = json.loads(json.dumps(plan.execution_input()))
    cell_of = {c["cell"]: c["instance_type"] for c in plan.cells}
    store = LocalStore(tmp_path / "adaptive")
    answer = schedule({**data, "schedule": {"next_wave": 0}, "results": []}, store)
    waves = [[s["box"] for s in answer["segments"]]]
    while not answer["done"]:
        for seg in answer["segments"]:
            run_segment(store, seg)
        results = [
            {"box": s["box"], "box_role": "inf2", "status": "completed", "lanes": []} for s in answer["segments"]
        ]
        payload = {**data, "schedule": {k: answer[k] for k in CARRIED}, "results": results}
        answer = schedule(payload, store)
        if not answer["done"]:
            # a retried call (the Lambda's Retry) finds the wave decided in the store: the same repeats, no new rows
            assert schedule(payload, store)["segments"] == answer["segments"]
            waves.append([s["box"] for s in answer["segments"]])
            seg = answer["segments"][0]
            again = seg["lanes"][-1]["result_lane"]  # a repeat: the cell's lanes under <lane>@<cell>r<run>
            assert (
                again.startswith(f"serve_sweep@{seg['box']}r")
                and f"NEURONPIPE_CELL={again.split('@')[1]}\n" in (seg["lanes"][-1]["script"])
            )
            assert f" --segment {seg['wave']} " in seg["cache_push"]["script"] and seg["wave"] >= len(plan.waves)
    assert answer["outcome"]["status"] == "succeeded", answer["outcome"]
    stops = store.read_table("matrix_stops", [RUN]).to_pylist()
    first_decision = len(plan.waves)
    dominated = [s for s in stops if cell_of[s["cell"]] == "inf2.8xlarge"]
    assert [(s["wave"], s["kind"], s["runs"]) for s in dominated] == [(first_decision, "dominated", 1)]
    assert dominated[0]["p_bound"] < 0.05 and "against inf2.xlarge" in dominated[0]["reason"]
    assert {cell_of[s["cell"]] for s in stops} == set(TYPES) and all(s["reason"] for s in stops)
    repeats = store.read_table("matrix_repeats", [RUN]).to_pylist()
    assert len(repeats) == len({(r["wave"], r["cell"]) for r in repeats}) and "inf2.8xlarge" not in {
        r["instance_type"] for r in repeats
    }

    (got,) = ranking(store_connection(store, [RUN])).values()
    adaptive_h = box_hours(store)
    # the full matrix: the same store with every cell's runs made up to MAX_REPEATS (the same draws where both ran)
    ran = {r["lane"] for r in store.read_table("lane_runs", [RUN]).to_pylist()}
    for seg in plan.waves[0].segments:
        for k in range(1, MAX_REPEATS + 1):
            lane = f"serve_sweep@{seg.box}" + (f"r{k}" if k > 1 else "")
            if lane not in ran:
                run_segment(store, {"instance_type": seg.instance_type, "lanes": [{"result_lane": lane}]})
    (want,) = ranking(store_connection(store, [RUN])).values()
    full_h = box_hours(store)
    assert got == want and got[-1] == "inf2.8xlarge"
    assert adaptive_h < full_h
    kinds = sorted({(cell_of[s["cell"]], s["kind"], s["wave"]) for s in stops})
    with capsys.disabled():
        print(
            f"\nadaptive matrix: cells per wave {waves}; box-hours {adaptive_h:.4f} adaptive, {full_h:.4f} full "
            f"({full_h - adaptive_h:.4f} saved, {(full_h - adaptive_h) / full_h:.0%}); ranking {' < '.join(got)}; "
            f"stops {kinds}"
        )


CAPACITY_TYPES = ["inf2.xlarge", "g6.xlarge"]  # $/hour 0.76 and 0.80: in contention on the same rates


def test_a_cell_whose_capacity_bracket_keeps_it_open_runs_its_capacity_lane_alone_bisecting_the_bracket(tmp_path):
    """Both cells' searches pass 1 req/s and miss 2 (tests/support/matrix.py commit_capacity): ln 2 wide, wider than
    the sd of the $/M gap, so the next run of each is a capacity run on [1, 2] req/s; its search (1 passes, 1.5
    misses) is a Decision row of its own at the rate basis."""
    req = parse_request(
        {
            "lanes": ["provenance", "preflight", "serve_sweep", "capacity"],
            "server_configs": ["A"],
            "models": ["llama-3.1-8b-instruct"],
            "profile": "tiny",
            "max_cost_usd": 50,
            "matrix": {"instance_types": CAPACITY_TYPES, "adaptive": {"max_repeats": 2}},
        }
    )
    run_id = "r-capacity"
    plan = plan_run(req, run_id=run_id, results_uri="s3://b/r", fleet=Fleet(("s",)))
    data = json.loads(json.dumps(plan.execution_input()))
    store = LocalStore(tmp_path / "store")

    def run(segments: list[dict]) -> list[dict]:
        for seg in segments:
            for step in seg["lanes"]:
                lane, cell = step["result_lane"], step["result_lane"].split("@")[1]
                if lane.startswith("serve_sweep@"):
                    commit_lane(store, run_id, lane, seg["instance_type"], "A", "llama", [("A-c1", 1, None, 1.0)])
                elif lane.startswith("capacity@"):
                    top = 2.0 if cell == seg["box"] else 1.5  # the bisection narrows the bracket
                    points = [("r1", 4, 1.0, 1.0), ("r2", 4, top, 50.0)]
                    commit_lane(store, run_id, lane, seg["instance_type"], "A", "llama", points)
                else:
                    row = attempts.lane_row("succeeded", 0.0, "inf2", seg["instance_type"], "cpu", "t", T0)
                    attempts.commit(store, run_id, lane, None, "succeeded", lane_runs=row)
        return [{"box": s["box"], "box_role": "inf2", "status": "completed", "lanes": []} for s in segments]

    answer = schedule({**data, "schedule": {"next_wave": 0}, "results": []}, store)
    while answer["segments"][0]["wave"] < len(data["waves"]) - 1:
        results = run(answer["segments"])
        answer = schedule({**data, "schedule": {k: answer[k] for k in CARRIED}, "results": results}, store)
    results = run(answer["segments"])  # the plan's last wave: then the first decision
    payload = {**data, "schedule": {k: answer[k] for k in CARRIED}, "results": results}
    answer = schedule(payload, store)
    assert schedule(payload, store)["segments"] == answer["segments"]  # a retry reads the committed runs back
    repeats = store.read_table("matrix_repeats", [run_id]).to_pylist()
    assert sorted((r["cell"], r["run"], r["use"], r["rate_min"], r["rate_max"]) for r in repeats) == [
        ("c01", 2, "capacity", 1.0, 2.0),
        ("c02", 2, "capacity", 1.0, 2.0),
    ]
    assert all("wider than the sd of the ln $/M gap" in r["use_reason"] for r in repeats), repeats
    assert not answer["done"]
    for seg in answer["segments"]:
        new = f"{seg['box']}r2"
        assert [s["result_lane"] for s in seg["lanes"]] == [f"provenance@{new}", f"preflight@{new}", f"capacity@{new}"]
        script = seg["lanes"][-1]["script"]
        assert '"rate_max": 2.0, "rate_min": 1.0' in script and script.endswith(
            '--task-token "$NEURONPIPE_TASK_TOKEN"\n'
        )
    run(answer["segments"])  # the capacity runs
    rows = (
        store_connection(store, [run_id])
        .execute(
            """SELECT lane, ranked_basis, candidate, max_rate_meeting_slo, lowest_rate_missing_slo
           FROM report_decision_hardware WHERE instance = 'inf2.xlarge' ORDER BY lane"""
        )
        .fetchall()
    )
    # the first run's serving lane answers with its own cell's search; the bisection is a row of its own
    assert rows == [("capacity@c01r2", "rate", True, 1.0, 1.5), ("serve_sweep@c01", "rate", True, 1.0, 2.0)]
