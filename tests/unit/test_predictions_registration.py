"""A run's predictions are registered once: the store refuses a second commit and the first stands; a resume keeps
them and refuses different ones; on AWS the control object is written create-only the same way."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from analytics.schema.predictions import PREDICTIONS_LANE, REGISTRATION_ATTEMPT
from analytics.store import LocalStore
from analytics.store.markers import AlreadyExistsError
from control_plane.control_data import control_key
from control_plane.predictions import (
    PredictionsChangedError,
    register_control,
    register_predictions,
    registered,
)
from pipeline.predictions import Prediction, predictions_digest
from tests.support.control_blobs import Blobs

AT = datetime(2026, 7, 1, 11, 0, tzinfo=timezone.utc)
FIRST = [Prediction(lane="provenance", expected="works"), Prediction(lane="precompile", expected="excluded")]
OTHER = [Prediction(lane="provenance", expected="fails")]


def test_a_second_commit_is_refused_and_the_first_stands(tmp_path):
    store = LocalStore(tmp_path)
    first = register_predictions(store, "r1", FIRST, now=AT)
    assert first is not None and first.new and first.count == 2 and first.digest == predictions_digest(FIRST)
    second = store.begin_attempt("r1", PREDICTIONS_LANE, REGISTRATION_ATTEMPT)
    second.add_rows("predictions", [{**r, "target": "forged"} for r in store.read_table("predictions").to_pylist()])
    with pytest.raises(AlreadyExistsError):
        second.commit("succeeded")
    rows = store.read_table("predictions", ["r1"]).to_pylist()
    assert [r["target"] for r in rows] == ["provenance", "precompile"]
    assert {r["registered_at"] for r in rows} == {AT} and {r["digest"] for r in rows} == {first.digest}
    assert [m.attempt for m in store.markers("r1", PREDICTIONS_LANE)] == [REGISTRATION_ATTEMPT]


def test_a_resume_keeps_the_registration_and_refuses_different_predictions(tmp_path):
    store = LocalStore(tmp_path)
    register_predictions(store, "r1", FIRST, now=AT)
    again = register_predictions(store, "r1", FIRST)
    assert again is not None and not again.new and again.registered_at == AT.isoformat()
    bare = register_predictions(store, "r1", [])  # a resume without the request file keeps them too
    assert bare is not None and not bare.new and bare.digest == predictions_digest(FIRST)
    with pytest.raises(PredictionsChangedError) as exc:
        register_predictions(store, "r1", OTHER)
    assert len(str(exc.value).splitlines()) == 1 and "registered other predictions" in str(exc.value)
    assert registered(store, "r1") == (predictions_digest(FIRST), AT.isoformat(), 2)
    assert register_predictions(store, "r2", []) is None and store.markers("r2") == []


def test_the_aws_control_object_is_written_once_kept_on_a_retry_and_refused_when_it_differs():
    blobs = Blobs()
    first = register_control(blobs, "r1", FIRST, now=AT)
    key = control_key("r1", "predictions.json")
    body = blobs.objects[key]
    record = json.loads(body)
    assert first is not None and first.new and record["digest"] == predictions_digest(FIRST)
    assert record["registered_at"] == AT.isoformat() and [p["lane"] for p in record["predictions"]] == [
        "provenance",
        "precompile",
    ]
    retry = register_control(blobs, "r1", FIRST)
    assert retry is not None and not retry.new and retry.registered_at == AT.isoformat()
    with pytest.raises(PredictionsChangedError):
        register_control(blobs, "r1", OTHER)
    assert blobs.objects == {key: body}


def test_the_first_wave_commits_the_control_objects_predictions_to_the_store_as_registered(tmp_path):
    from control_plane.control_data import ControlDataError
    from control_plane.models import RunRequest
    from control_plane.plan import plan_run
    from control_plane.predictions import carry_control
    from control_plane.waves import schedule

    store, blobs = LocalStore(tmp_path / "store"), Blobs()
    plan = plan_run(RunRequest(profile="tiny", lanes=["provenance", "precompile"]), run_id="r1", results_uri="s3://b/r")
    payload = plan.with_instances({"trn1": "i-0aaaaaaaaaaaaaaa1", "inf2": "i-0bbbbbbbbbbbbbbb2"}).execution_input()
    register_control(blobs, "r1", FIRST, now=AT)
    schedule(json.loads(json.dumps({**payload, "schedule": {"next_wave": 0}})), store, blobs=blobs)
    assert registered(store, "r1") == (predictions_digest(FIRST), AT.isoformat(), 2)  # its timestamp, not the wave's
    again = carry_control(store, blobs, "r1")  # a retried schedule keeps the one registration
    assert again is not None and not again.new and len(store.markers("r1", PREDICTIONS_LANE)) == 1
    assert carry_control(store, blobs, "r2") is None and store.markers("r2") == []
    key = control_key("r3", "predictions.json")
    record = json.loads(blobs.objects[control_key("r1", "predictions.json")])
    blobs.objects[key] = json.dumps({**record, "run_id": "r3", "predictions": record["predictions"][:1]}).encode()
    with pytest.raises(ControlDataError, match="digest does not match"):
        carry_control(store, blobs, "r3")  # edited after its registration: refused, nothing committed
    assert store.markers("r3") == []
