"""The scheduler over a matrix's cells: a cell refused for capacity or failed is contained (the run is partial, its
lanes recorded skipped), a wave too large for the state goes to a Distributed Map's items file and its results come
back from S3, a plan kept in S3 is read from there (its digest checked)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from analytics.store import LocalStore
from control_plane.control_data import ControlDataError, canonical, control_key, digest
from control_plane.matrix_plan import Fleet
from control_plane.models import parse_request
from control_plane.plan import plan_run
from control_plane.waves import ScheduleInputError, schedule
from tests.support import attempts
from tests.support.control_blobs import Blobs

RUN = "r-fleet"
FLEET = Fleet(("subnet-a", "subnet-b"))


@pytest.fixture
def store(tmp_path):
    return LocalStore(tmp_path / "store")


@pytest.fixture(scope="module")
def plan():
    req = parse_request(
        {
            "lanes": ["provenance", "preflight", "serve_sweep"],
            "server_configs": ["A"],
            "models": ["llama-3.1-8b-instruct"],
            "profile": "tiny",
            "max_cost_usd": 50,
            "matrix": {"instance_types": ["inf2.xlarge", "g6.xlarge", "g5.xlarge"]},
        }
    )
    return plan_run(req, run_id=RUN, results_uri="s3://bkt/results", fleet=FLEET)


def commit(store, lane: str, status: str = "succeeded") -> None:
    attempts.commit(
        store,
        RUN,
        lane,
        None,
        status,
        lane_runs=attempts.lane_row(status, 0.0, None, None, "cpu", "test", datetime.now(timezone.utc)),
    )


def test_a_cell_refused_for_capacity_is_contained_and_the_run_is_partial(plan, store):
    data = json.loads(json.dumps(plan.execution_input()))
    first = schedule({**data, "schedule": {"next_wave": 0}, "results": []}, store)
    assert [s["box"] for s in first["segments"]] == ["c01", "c02", "c03"] and first["distributed"] is None
    for lane in (
        "provenance@c01",
        "preflight@c01",
        "serve_sweep@c01",
        "provenance@c03",
        "preflight@c03",
        "serve_sweep@c03",
    ):
        commit(store, lane)
    results = [
        {"box": "c01", "box_role": "inf2", "status": "completed", "lanes": []},
        {
            "box": "c02",
            "box_role": "inf2",
            "status": "capacity_unavailable",
            "error": "Capacity.Unavailable",
            "cause": "no capacity for g6.xlarge in any of its 2 subnet(s): ec2.InsufficientInstanceCapacity",
        },
        {"box": "c03", "box_role": "inf2", "status": "completed", "lanes": []},
    ]
    answer = {k: first[k] for k in ("next_wave", "box_failures", "stop_failed", "distributed")}
    done = schedule({**data, "schedule": answer, "results": results}, store)
    assert done["done"] and done["outcome"]["status"] == "partial"
    assert "cell c02 failed: Capacity.Unavailable: no capacity for g6.xlarge" in done["outcome"]["why"]
    assert set(done["outcome"]["skipped"]) == {"provenance@c02", "preflight@c02", "serve_sweep@c02"}
    assert {r["lane"]: r["blocked_by"] for r in done["recorded"]} == {
        "provenance@c02": "box:c02",
        "preflight@c02": "box:c02",
        "serve_sweep@c02": "box:c02",
    }
    assert done["failure"] == {"Error": "", "Cause": ""}  # a partial run does not fail the execution


def test_every_cell_failing_fails_the_run(plan, store):
    data = json.loads(json.dumps(plan.execution_input()))
    first = schedule({**data, "schedule": {"next_wave": 0}, "results": []}, store)
    results = [
        {
            "box": s["box"],
            "box_role": "inf2",
            "status": "capacity_unavailable",
            "error": "Capacity.Unavailable",
            "cause": "none",
        }
        for s in first["segments"]
    ]
    answer = {k: first[k] for k in ("next_wave", "box_failures", "stop_failed", "distributed")}
    done = schedule({**data, "schedule": answer, "results": results}, store)
    assert done["outcome"]["status"] == "failed" and done["outcome"]["why"].startswith("every cell of the matrix")


def test_a_wave_too_large_for_the_state_runs_from_an_items_file_and_its_results_come_from_s3(plan, store):
    blobs = Blobs()
    data = json.loads(json.dumps(plan.execution_input()))
    first = schedule({**data, "schedule": {"next_wave": 0}, "results": []}, store, blobs=blobs, inline_max_bytes=1024)
    dist = first["distributed"]
    assert first["segments"] == [] and dist["bucket"] == "bkt"
    assert dist["key"] == "control/r-fleet/wave-0/items.json" == control_key(RUN, "wave-0", "items.json")
    assert dist["digest"] == digest(blobs.objects[dist["key"]])
    items = json.loads(blobs.objects[dist["key"]])
    assert [i["box"] for i in items] == ["c01", "c02", "c03"]
    assert items[1]["results_key"] == dist["results"]["c02"] == "control/r-fleet/wave-0/results/c02.json"
    # the segments wrote their results (c03's child execution wrote none)
    for lane in (
        "provenance@c01",
        "preflight@c01",
        "serve_sweep@c01",
        "provenance@c02",
        "preflight@c02",
        "serve_sweep@c02",
    ):
        commit(store, lane)
    for box in ("c01", "c02"):
        blobs.put(
            dist["results"][box],
            json.dumps({"box": box, "box_role": "inf2", "status": "completed", "lanes": []}).encode(),
        )
    answer = {k: first[k] for k in ("next_wave", "box_failures", "stop_failed", "distributed")}
    done = schedule({**data, "schedule": answer, "results": []}, store, blobs=blobs)
    assert done["outcome"]["status"] == "partial"
    assert "Segment.NoResult" in done["box_failures"]["c03"]
    assert "serve_sweep@c03" in done["outcome"]["skipped"]


def test_a_plan_kept_in_s3_is_read_from_there_and_a_missing_one_is_one_line(plan, store):
    blobs = Blobs()
    key = control_key(RUN, "plan.json")
    body = canonical(plan.plan_document())
    blobs.put(key, body)
    data = plan.execution_input(f"s3://bkt/{key}", digest(body))
    answer = schedule({**data, "schedule": {"next_wave": 0}, "results": []}, store, blobs=blobs)
    assert [s["box"] for s in answer["segments"]] == ["c01", "c02", "c03"]
    del blobs.objects[key]
    with pytest.raises(ControlDataError, match=f"plan s3://bkt/{key} does not exist"):
        schedule({**data, "schedule": {"next_wave": 0}, "results": []}, store, blobs=blobs)


def test_the_inline_limit_can_be_lowered_never_raised_and_a_bad_value_is_one_line(monkeypatch):
    pytest.importorskip("aws_lambda_powertools")
    from control_plane.handlers.schedule_wave import inline_max_bytes
    from control_plane.waves import INLINE_SEGMENTS_MAX_BYTES

    monkeypatch.delenv("NEURONPIPE_INLINE_SEGMENTS_MAX_BYTES", raising=False)
    assert inline_max_bytes() == INLINE_SEGMENTS_MAX_BYTES
    monkeypatch.setenv("NEURONPIPE_INLINE_SEGMENTS_MAX_BYTES", "0")
    assert inline_max_bytes() == 0
    monkeypatch.setenv("NEURONPIPE_INLINE_SEGMENTS_MAX_BYTES", str(10 * INLINE_SEGMENTS_MAX_BYTES))
    assert inline_max_bytes() == INLINE_SEGMENTS_MAX_BYTES
    monkeypatch.setenv("NEURONPIPE_INLINE_SEGMENTS_MAX_BYTES", "lots")
    with pytest.raises(ScheduleInputError, match="NEURONPIPE_INLINE_SEGMENTS_MAX_BYTES='lots': expected a number"):
        inline_max_bytes()
