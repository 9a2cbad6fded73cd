"""An adaptive run matrix through the rehearsal engine: the state machine's scheduler (the schedule_wave Lambda)
decides after each wave from the store which cells stop and which run again, and the Map launches the repeats as
new boxes of their types. Four types, one cell each, serve_sweep replaced on the boxes by
tests/fixtures/rehearsal_sweep.py (synthetic serving rows priced by the box's type: inf2.8xlarge's $/M about 2.6
times the cheapest's, clearly dominated); ``max_repeats`` 2, the fewest waves that show a repeat.

A module of its own, with its own world (the boxes and the plan need the serving fixture as ``serve_sweep``).
Prints ``fleet adaptive: ...`` (box-hours of lane time adaptive and full, the ranking, the stops) and asserts the
behaviour: the dominated type's cell stopped after the first wave, the full matrix's ranking, fewer box-hours."""

from __future__ import annotations

import pytest

from control_plane.adaptive import ranking
from control_plane.models import parse_request
from tests.fixtures import rehearsal_sweep
from tests.rehearsal.test_fleet_faults import fleet_ended, launched_types, left_running
from tests.support.faults import client, set_lambda_env, shorten_retries, stage_modules

TYPES = ["inf2.xlarge", "g6.xlarge", "g5.xlarge", "inf2.8xlarge"]  # on-demand $/hour 0.76, 0.80, 1.01, 1.97
MAX_REPEATS = 2


@pytest.fixture(scope="module")
def rehearsal(cfn_assembly, tmp_path_factory):
    from pathlib import Path

    import tests.support.matrix
    import tests.support.synthetic
    from rehearsal.run import Rehearsal

    workdir = tmp_path_factory.mktemp("fleet-adaptive")
    sources = {
        rehearsal_sweep.MODULE: Path(rehearsal_sweep.__file__),
        "tests.support.matrix": Path(tests.support.matrix.__file__),
        "tests.support.synthetic": Path(tests.support.synthetic.__file__),
    }
    extra_path = stage_modules(workdir / "extra-path", sources)
    box_env = {"PYTHONPATH": str(extra_path), "NEURONPIPE_EXTRA_LANES": rehearsal_sweep.EXTRA_LANES}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NEURONPIPE_EXTRA_LANES", rehearsal_sweep.EXTRA_LANES)  # the operator plans with it too
        with Rehearsal(workdir, assembly=cfn_assembly, box_env=box_env, boot_delay_s=0.5, log=lambda _l: None) as r:
            set_lambda_env(r, {"NEURONPIPE_EXTRA_LANES": rehearsal_sweep.EXTRA_LANES})
            shorten_retries(r)
            yield r


@pytest.fixture
def say(capsys):
    def line(text: str) -> None:
        with capsys.disabled():
            print(f"\n{text}", flush=True)

    return line


def test_an_adaptive_matrix_stops_the_dominated_type_after_the_first_wave_and_ends_on_the_full_ranking(rehearsal, say):
    from analytics.decision_noise import store_connection
    from analytics.store import LocalStore, S3Store
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
                "instance_types": TYPES,
                "lanes": ["serve_sweep"],
                "max_concurrency": 4,
                "adaptive": {"max_repeats": MAX_REPEATS},
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
    assert {cell_of[s["cell"]] for s in stops} == set(TYPES) and all(s["reason"] for s in stops)
    assert sorted(cell_of[x["cell"]] for x in repeats) == sorted(t for t in TYPES if t != "inf2.8xlarge")
    # every cell's box once, the three in contention a second time: seven boxes of their own types
    assert launched_types(r, "fleet-adaptive") == sorted(TYPES + [t for t in TYPES if t != "inf2.8xlarge"])
    assert left_running(r, say, "adaptive") == []

    walls = {x["lane"]: float(x["wall_s"] or 0.0) for x in lanes if "@c" in x["lane"]}
    adaptive_h = sum(walls.values()) / 3600
    (got,) = ranking(store_connection(store, ["fleet-adaptive"])).values()
    # the full matrix: every cell MAX_REPEATS runs, the same draws (the fixture's seeds); a run the adaptive matrix
    # did not make costs its cell's first run's box time
    full = LocalStore(r.workdir / "full-matrix")
    full_h = adaptive_h
    for cell, itype in cell_of.items():
        first_run = sum(w for lane, w in walls.items() if lane.endswith(f"@{cell}")) / 3600
        for k in range(1, MAX_REPEATS + 1):
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
