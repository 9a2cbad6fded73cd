"""The fleet's fault cases (issue 29 point 7), each driven through the rehearsal engine: a run matrix's cells on
ephemeral boxes the state machine launches from the synthesized launch templates (emulated EC2 RunInstances, each
box's first boot from its template's user data), Step Functions' Map with its concurrency limit, the Distributed
Map path, and the clean-up rule. Each case prints ``fleet <name>: N boxes launched, instances left running: M``
and asserts M == 0. The adaptive matrix's rehearsal (the last case) shares the world: its serving fixture
(tests/fixtures/rehearsal_sweep.py) is registered as ``serve_sweep`` beside the fault lanes, which no fault case
runs.

A module of its own, with its own world (tests.support.faults.fault_rehearsal; the pinned boxes' cases are
tests/rehearsal/test_fault_matrix.py): xdist (``--dist loadfile``) hands whole files to its workers, and these
cases run several boxes at once, so they are kept apart from the pinned cases rather than behind them in one
file. TEST-ONLY changes of the deployed definition as there (every Retry waits 1 s; MaxAttempts unchanged).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from control_plane.models import parse_request
from statemachine.build import STOP_FAILED_ERROR, STOP_RETRY
from tests.fixtures import rehearsal_sweep
from tests.support.faults import client, fault_rehearsal, start_run, wait_for

STOP_CALLS = 1 + STOP_RETRY[0]["MaxAttempts"]  # what the state machine tries before it gives up on a terminate


@pytest.fixture(scope="module")
def rehearsal(cfn_assembly, tmp_path_factory):
    import tests.support.matrix
    import tests.support.synthetic

    sweep = {
        rehearsal_sweep.MODULE: Path(rehearsal_sweep.__file__),
        "tests.support.matrix": Path(tests.support.matrix.__file__),
        "tests.support.synthetic": Path(tests.support.synthetic.__file__),
    }
    yield from fault_rehearsal(
        cfn_assembly, tmp_path_factory.mktemp("fleet-faults"), sweep, rehearsal_sweep.EXTRA_LANES
    )


FLEET_TYPES = ["inf2.xlarge", "inf2.8xlarge", "g6.xlarge", "g5.xlarge"]


def fleet_matrix(max_concurrency: int = 2, types=FLEET_TYPES, lane: str = "ok") -> Any:
    return parse_request(
        {
            "lanes": ["provenance", "preflight"],
            "models": ["tiny-llama"],
            "profile": "tiny",
            "server_configs": ["A"],
            "trigger": "rehearsal-fleet",
            "matrix": {"instance_types": types, "lanes": [lane], "max_concurrency": max_concurrency},
        }
    )


def fleet_ended(r, arn: str, deadline_s: float = 240) -> dict[str, Any]:
    sfn = client(r, "stepfunctions")
    wait_for(
        lambda: sfn.describe_execution(executionArn=arn)["status"] != "RUNNING",
        f"{arn} to end",
        deadline_s,
        poll_s=0.25,
    )
    r.settle()
    return sfn.describe_execution(executionArn=arn)


def left_running(r, say, name: str) -> list[str]:
    wait_for(lambda: not r.fleet_running(), "the clean-up to terminate the cells", 60, poll_s=0.25)
    running = r.fleet_running() + [i for i in r.running_boxes() if i not in r.launched]
    say(f"fleet {name}: {len(r.launched)} boxes launched, instances left running: {len(running)}")
    return running


def launched_types(r, run_id: str) -> list[str]:
    ec2 = client(r, "ec2")
    out = []
    for res in ec2.describe_instances(Filters=[{"Name": "tag:neuronpipe:run", "Values": [run_id]}])["Reservations"]:
        out += [i["InstanceType"] for i in res["Instances"]]
    return sorted(out)


def max_at_once(r, execution_arn: str) -> int:
    """The most segments (a cell's box each) the Map ran at once: from each iteration's first state (MarkStart) to
    its last (SegmentDone), in the execution's history."""
    live = peak = 0
    for e in r.history(execution_arn):
        name = (e.get("stateEnteredEventDetails") or {}).get("name")
        if name == "MarkStart":
            live += 1
            peak = max(peak, live)
        elif name == "SegmentDone":
            live -= 1
    return peak


def test_a_matrix_fans_out_two_at_once_a_type_refused_everywhere_and_a_hung_lane_stay_in_their_cells(
    rehearsal, faults, say
):
    """One matrix run, four cells of four types and two families, at most two boxes at once: g6.xlarge refused for
    capacity in every AZ (its cell recorded, never launched), c01's lane past its timeout (only that cell fails),
    the other two cells' lanes committed; every box launched is terminated."""
    r = rehearsal
    r.refuse_capacity = {"g6.xlarge"}  # every subnet, every AZ

    def c01_hangs(data: dict) -> dict:  # nap takes 3 s, heartbeating; c01's timeout (and heartbeat) cut to 1 s
        for seg in data["waves"][0]["segments"]:
            for step in seg["lanes"]:
                if step["result_lane"] == "nap@c01":  # a plan's own bounds: the heartbeat within the timeout
                    step["timeout_s"] = step["heartbeat_s"] = 1
                    step["execution_timeout"] = ["1"]
        return data

    try:
        launched = start_run(r, fleet_matrix(2, lane="nap"), "fleet-ok", c01_hangs)
        desc = fleet_ended(r, launched.execution_arn)
    finally:
        r.refuse_capacity = set()
    assert len(launched.plan.cells) == 4 and launched.plan.max_concurrency == 2
    assert desc["status"] == "SUCCEEDED", (desc.get("error"), desc.get("cause"))  # partial: cells contain failures
    out = json.loads(desc["output"])["outcome"]
    assert out["status"] == "partial", out
    assert "cell c01 failed: Lane.TimedOut" in out["why"] and "cell c03 failed: Capacity.Unavailable" in out["why"]
    assert "c02" not in out["why"] and "c04" not in out["why"], out
    tried = [c for c in r.launch_log if c["instance_type"] == "g6.xlarge" and c["refused"]]
    assert len({c["subnet_id"] for c in tried}) == len(launched.plan.waves[0].segments[2].launch.subnets) >= 2
    assert len({c["availability_zone"] for c in tried}) >= 2  # every configured AZ was tried
    assert left_running(r, say, "matrix") == []
    assert launched_types(r, "fleet-ok") == sorted(t for t in FLEET_TYPES if t != "g6.xlarge")
    assert max_at_once(r, launched.execution_arn) == 2
    from analytics.store import S3Store

    store = S3Store(r.settings().results_uri, client=client(r, "s3"))
    for cell in ("c02", "c04"):
        marker = store.latest_committed("fleet-ok", f"nap@{cell}")
        assert marker is not None and marker.status == "succeeded", cell


def test_a_terminate_that_fails_is_retried_then_the_clean_up_rule_terminates_the_box(rehearsal, faults, say):
    r = rehearsal
    r.terminate_failures = STOP_CALLS  # every retry of the state machine's terminate fails, the clean-up's works
    try:
        launched = r.start(fleet_matrix(1, ["g5.xlarge"]), "fleet-terminate")
        desc = fleet_ended(r, launched.execution_arn)
        assert desc["status"] == "FAILED" and desc["error"] == STOP_FAILED_ERROR, desc.get("cause")
        assert left_running(r, say, "terminate-fails") == []
    finally:
        r.terminate_failures = 0


def test_the_operator_stopping_the_execution_mid_fan_out_terminates_every_cell(rehearsal, faults, say):
    r = rehearsal
    launched = r.start(fleet_matrix(2, lane="nap"), "fleet-abort")
    wait_for(lambda: len(r.fleet_running()) == 2, "the first two cells' boxes to be up", 120, poll_s=0.2)
    client(r, "stepfunctions").stop_execution(
        executionArn=launched.execution_arn, error="Operator.Stop", cause="rehearsal: stopped mid-fan-out"
    )
    desc = fleet_ended(r, launched.execution_arn)
    assert desc["status"] == "ABORTED"
    assert len(launched_types(r, "fleet-abort")) == 2  # the other two cells were never launched
    assert left_running(r, say, "operator-stop") == []


def test_a_wave_too_large_for_the_state_runs_as_a_distributed_map_and_its_results_come_back(rehearsal, faults, say):
    r = rehearsal
    # the scheduler's inline limit lowered to nothing: every wave goes through an items file in S3
    faults.lambda_env("schedule_wave", {"NEURONPIPE_INLINE_SEGMENTS_MAX_BYTES": "0"})
    launched = r.start(fleet_matrix(2, ["g5.xlarge"]), "fleet-distributed")
    desc = fleet_ended(r, launched.execution_arn)
    assert desc["status"] == "SUCCEEDED", (desc.get("error"), desc.get("cause"))
    history = r.history(launched.execution_arn)
    entered = [(e.get("stateEnteredEventDetails") or {}).get("name") for e in history]
    assert "SegmentsDistributed" in entered and "Segments" not in entered
    s3 = client(r, "s3")
    bucket = r.settings().results_bucket
    keys = [
        o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="control/fleet-distributed/").get("Contents", [])
    ]
    assert "control/fleet-distributed/wave-0/items.json" in keys  # control data, outside the boxes' results/
    assert {k.rsplit("/", 1)[-1] for k in keys if "/results/" in k} == {"c01.json"}
    out = json.loads(desc["output"])["outcome"]
    assert out["status"] == "succeeded", out
    # what `run --aws` and `status` show: the wave's lanes ran in child executions, their statuses come from the store
    shown = r.follow(launched.execution_arn, lambda p: None, deadline_s=30)
    assert shown.distributed and {lp.result_lane: lp.status for lp in shown.lanes} == {
        "provenance@c01": "succeeded",
        "preflight@c01": "succeeded",
        "ok@c01": "succeeded",
    }
    assert left_running(r, say, "distributed-map") == []


ADAPTIVE_TYPES = ["inf2.xlarge", "g6.xlarge", "g5.xlarge", "inf2.8xlarge"]  # on-demand $/hour 0.76, 0.80, 1.01, 1.97
ADAPTIVE_MAX_REPEATS = 2


def test_an_adaptive_matrix_stops_the_dominated_type_after_the_first_wave_and_ends_on_the_full_ranking(rehearsal, say):
    """Four types, one cell each, serve_sweep replaced on the boxes by tests/fixtures/rehearsal_sweep.py (synthetic
    serving rows priced by the box's type: inf2.8xlarge's $/M about 2.6 times the cheapest's, clearly dominated);
    ``max_repeats`` 2, the fewest waves that show a repeat. The state machine's scheduler (the schedule_wave
    Lambda) decides after each wave from the store which cells stop and which run again, and the Map launches the
    repeats as new boxes of their types. Prints ``fleet adaptive: ...`` (box-hours of lane time adaptive and full,
    the ranking, the stops) and asserts the behaviour: the dominated type's cell stopped after the first wave, the
    full matrix's ranking, fewer box-hours."""
    from analytics.decision_noise import store_connection
    from analytics.store import LocalStore, S3Store
    from control_plane.adaptive import ranking
    from tests.support.matrix import CONCURRENCIES, commit_lane

    r = rehearsal
    request = parse_request(
        {
            "lanes": ["provenance", "preflight"],
            "models": ["tiny-llama"],
            "profile": "tiny",
            "server_configs": ["A"],
            "trigger": "rehearsal-fleet",
            "matrix": {
                "instance_types": ADAPTIVE_TYPES,
                "lanes": ["serve_sweep"],
                "max_concurrency": 4,
                "adaptive": {"max_repeats": ADAPTIVE_MAX_REPEATS},
            },
        }
    )
    launched = r.start(request, "fleet-adaptive")
    desc = fleet_ended(r, launched.execution_arn, deadline_s=420)
    assert desc["status"] == "SUCCEEDED", (desc.get("error"), desc.get("cause"))
    cell_of = {c["cell"]: c["instance_type"] for c in launched.plan.cells}
    store = S3Store(r.settings().results_uri, client=client(r, "s3"))
    stops = store.read_table("matrix_stops", ["fleet-adaptive"]).to_pylist()
    repeats = store.read_table("matrix_repeats", ["fleet-adaptive"]).to_pylist()
    first = len(launched.plan.waves)
    dominated = [s for s in stops if cell_of[s["cell"]] == "inf2.8xlarge"]
    lanes = store.read_table("lane_runs", ["fleet-adaptive"]).to_pylist()
    assert [(s["wave"], s["kind"], s["runs"]) for s in dominated] == [(first, "dominated", 1)], [
        (s["cell"], s["kind"], s["reason"]) for s in stops
    ]
    assert dominated[0]["p_bound"] < 0.05 and "against inf2.xlarge" in dominated[0]["reason"]
    ran = {x["lane"]: x["status"] for x in lanes if x["lane"].startswith("serve_sweep@")}
    contending = [c for c, t in cell_of.items() if t != "inf2.8xlarge"]
    assert ran == {f"serve_sweep@{c}": "succeeded" for c in [*cell_of, *(f"{c}r2" for c in contending)]}
    assert {cell_of[s["cell"]] for s in stops} == set(ADAPTIVE_TYPES) and all(s["reason"] for s in stops)
    assert sorted(cell_of[x["cell"]] for x in repeats) == sorted(t for t in ADAPTIVE_TYPES if t != "inf2.8xlarge")
    # no capacity search in these cells: ranked on the concurrency, every run a repeat, saying so; every P read says
    # where its spread came from
    assert {x["use"] for x in repeats} == {"repeat"}
    assert all("ranked on the closed-loop concurrency" in x["use_reason"] for x in repeats), repeats
    assert all(s["run_sd_source"] in ("repeats", "prior") for s in stops if s["p_bound"] is not None), stops
    # every cell's box once, the three in contention a second time: seven boxes of their own types
    assert launched_types(r, "fleet-adaptive") == sorted(
        ADAPTIVE_TYPES + [t for t in ADAPTIVE_TYPES if t != "inf2.8xlarge"]
    )
    assert left_running(r, say, "adaptive") == []

    walls = {x["lane"]: float(x["wall_s"] or 0.0) for x in lanes if "@c" in x["lane"]}
    adaptive_h = sum(walls.values()) / 3600
    (got,) = ranking(store_connection(store, ["fleet-adaptive"])).values()
    # the full matrix: every cell ADAPTIVE_MAX_REPEATS runs, the same draws (the fixture's seeds); a run the
    # adaptive matrix did not make costs its cell's first run's box time
    full = LocalStore(r.workdir / "full-matrix")
    full_h = adaptive_h
    for cell, itype in cell_of.items():
        first_run = sum(w for lane, w in walls.items() if lane.endswith(f"@{cell}")) / 3600
        for k in range(1, ADAPTIVE_MAX_REPEATS + 1):
            lane = f"serve_sweep@{cell}" + (f"r{k}" if k > 1 else "")
            points = [(f"A-c{c}", c, None, 1.0) for c in CONCURRENCIES]
            commit_lane(full, "full", lane, itype, "A", "llama", points, seed=rehearsal_sweep.seed_of(lane))
            full_h += 0.0 if lane in ran else first_run
    (want,) = ranking(store_connection(full, ["full"])).values()
    assert got == want and got[-1] == "inf2.8xlarge"
    assert adaptive_h < full_h
    kinds = sorted({(cell_of[s["cell"]], s["kind"], s["wave"]) for s in stops})
    say(
        f"fleet adaptive: {len(launched_types(r, 'fleet-adaptive'))} boxes, box-hours of lane time {adaptive_h:.4f} "
        f"adaptive, {full_h:.4f} full "
        f"({(full_h - adaptive_h) / full_h:.0%} saved); ranking {' < '.join(got)}; stops {kinds}"
    )
