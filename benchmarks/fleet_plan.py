"""The fleet's benchmark: a 4-type × 2-config matrix, planned (and, with ``--rehearse``, rehearsed on this machine).

Prints: the plan's expected wall time against the sum of its cells (goal ≤ 0.3× with 4 boxes at once), its
box-hours against the cells one after the other (goal ≤ 1.05×), the state transitions a lane and a cell cost
(counted from the generated definition, per path), and with ``--rehearse`` the rehearsal's wall time and each
cell's overhead from its launch to its first lane (from the execution history).

    .venv/bin/python benchmarks/fleet_plan.py [--rehearse] [--max-concurrency 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

TYPES = ["inf2.xlarge", "inf2.8xlarge", "g6.xlarge", "g5.xlarge"]


def request(max_concurrency: int, lanes: list[str]) -> dict:
    # the model in the matrix, the request's own models left at their default: a tiny-profile rehearsal serves the
    # profile's counterpart (tiny-llama), as examples/run-matrix.json does, where a declared model would be served
    return {
        "run_id": "bench-fleet",
        "lanes": lanes,
        "server_configs": ["A", "B"],
        "matrix": {"instance_types": TYPES, "models": ["llama-3.1-8b-instruct"], "max_concurrency": max_concurrency},
    }


def transitions() -> dict[str, int]:
    """States entered on each path of the definition (statemachine.build): per lane, per cell's fixed part."""
    from statemachine.build import build_definition

    seg = build_definition()["States"]["Segments"]["ItemProcessor"]["States"]
    lane_ok = 1  # RunLane
    lane_failed = 3  # RunLane, LaneFailureKind, LaneFailed
    pinned = [
        "MarkStart",
        "StartOrLaunch",
        "StartInstance",
        "SyncHarness",
        "Lanes",
        "PushCompileCache",
        "StopOrTerminate",
        "StopInstance",
        "LastSegmentOfBox",
        "ReleaseLease",
        "SegmentCompleted",
        "SegmentEnd",
        "SegmentDone",
    ]
    cell = [
        "MarkStart",
        "StartOrLaunch",
        "FirstSubnet",
        "LaunchInstance",
        "Launched",
        "SyncHarness",
        "Lanes",
        "PushCompileCache",
        "StopOrTerminate",
        "TerminateInstance",
        "SegmentCompleted",
        "SegmentEnd",
        "SegmentDone",
    ]
    assert all(s in seg for s in pinned + cell)
    return {
        "lane (succeeded)": lane_ok,
        "lane (failed)": lane_failed,
        "pinned segment (fixed)": len(pinned),
        "cell (fixed, first subnet)": len(cell),
        "cell (each capacity retry)": 4,
        "distributed wave (+write result)": 1,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-concurrency", type=int, default=4)
    ap.add_argument("--rehearse", action="store_true", help="also rehearse the matrix (tiny profile, this machine)")
    args = ap.parse_args()
    from control_plane.commands.plan import plan_timetables
    from control_plane.matrix_plan import Fleet
    from control_plane.models import parse_request
    from control_plane.plan import plan_run

    req = parse_request(request(args.max_concurrency, ["provenance", "preflight", "serve_sweep", "capacity"]))
    plan = plan_run(
        req,
        run_id="bench-fleet",
        results_uri="s3://bucket/results",
        fleet=Fleet(("subnet-a", "subnet-b")),
        ceiling_usd=10_000,
    )
    _, graph, sequential, _ = plan_timetables(plan, [], [])
    cells = [s for s in graph.segments]
    cell_sum = sum(s.end_s - s.start_s for s in cells)
    print(f"matrix: {len(plan.cells)} cells ({len(TYPES)} types × 2 configs), {plan.max_concurrency} boxes at once")
    print(
        f"expected wall {graph.wall_s / 3600:.2f} h vs sum of cells {cell_sum / 3600:.2f} h: "
        f"× {graph.wall_s / cell_sum:.3f} (goal ≤ 0.3)"
    )
    print(
        f"box-hours {graph.box_hours:.2f} vs sequential {sequential.box_hours:.2f}: "
        f"× {graph.box_hours / sequential.box_hours:.3f} (goal ≤ 1.05)"
    )
    print(f"worst case ${plan.max_cost_usd:.2f}; expected ${graph.cost_usd:.2f}")
    for path, n in transitions().items():
        print(f"state transitions, {path}: {n}")
    lanes_per_cell = len(plan.cells[0]["lanes"])
    per_lane = (transitions()["cell (fixed, first subnet)"] + lanes_per_cell * 1) / lanes_per_cell
    print(f"per lane in a cell of {lanes_per_cell} lanes, fixed part shared: {per_lane:.2f} (budget ≤ 6)")
    if args.rehearse:
        return rehearse(args.max_concurrency)
    return 0


def rehearse(max_concurrency: int) -> int:
    from control_plane.models import parse_request
    from rehearsal.run import Rehearsal

    # each cell runs the quality lane (a matrix runs at least one matrix lane; quality's 1 h timeout keeps 8 cells'
    # worst case under the deploy's $50 ceiling, which a sweep's 4 h would not), on the base model alone (no
    # fine-tune in this run): the figures are the fan-out's
    req = parse_request(
        {
            **request(max_concurrency, ["provenance", "preflight", "quality"]),
            "profile": "tiny",
            "lane_config": {"quality": {"finetune": False}},
        }
    )
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, Rehearsal(Path(tmp), log=lambda s: None) as r:
        setup = time.monotonic() - t0
        launched = r.start(req, "bench-fleet")
        t1 = time.monotonic()
        result = r.follow(launched.execution_arn, lambda p: None, deadline_s=1800)
        wall = time.monotonic() - t1
        r.settle()
        history = r.history(launched.execution_arn)
        overheads = cell_overheads(r, "bench-fleet")
        print(
            f"rehearsal: setup {setup:.1f} s, run {wall:.1f} s, status {getattr(result, 'status', result)}, "
            f"outcome {(result.outcome or {}).get('status')}, waves as a Distributed Map: {result.distributed}, "
            f"{len(r.launched)} boxes launched, {len(r.fleet_running())} left running"
        )
        lanes = sorted(lp.status for lp in result.lanes)
        print(f"lanes shown: {len(lanes)}, " + ", ".join(f"{lanes.count(x)} {x}" for x in sorted(set(lanes))))
        entered = [(e.get("stateEnteredEventDetails") or {}).get("name") for e in history]
        print(f"states entered in the run's own history: {sum(1 for n in entered if n)}")
        if overheads:
            xs = sorted(overheads.values())
            print(
                f"overhead per cell, instance launched → its first lane started: median {xs[len(xs) // 2]:.1f} s, "
                f"max {xs[-1]:.1f} s (n={len(xs)})"
            )
    return 0


def cell_overheads(r, run_id: str) -> dict[str, float]:
    """Per cell: from its instance's LaunchTime (EC2, by the run's tags) to the start of its first lane (lane_runs
    in the results store): the same on the inline and the distributed path, whose iterations' events the run's
    history does not hold."""
    from analytics.store import open_store
    from control_plane.lean import TAG_CELL, TAG_RUN

    ec2 = r.world.client("ec2")
    launched = {}
    for res in ec2.describe_instances(Filters=[{"Name": f"tag:{TAG_RUN}", "Values": [run_id]}])["Reservations"]:
        for inst in res["Instances"]:
            cell = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}.get(TAG_CELL)
            if cell:
                launched[cell] = inst["LaunchTime"]
    store = open_store(r.settings().results_uri, r.world.client("s3"))
    first: dict[str, object] = {}
    for row in store.read_table("lane_runs", [run_id]).to_pylist():
        cell = str(row["lane"]).rpartition("@")[2]
        if row.get("started_at") is not None and (cell not in first or row["started_at"] < first[cell]):
            first[cell] = row["started_at"]
    return {c: (first[c] - launched[c]).total_seconds() for c in launched if c in first}


if __name__ == "__main__":
    sys.exit(main())
