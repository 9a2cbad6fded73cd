"""`run --local` registers the request's predictions before its first lane starts (the registration's timestamp
precedes the first lane_runs start), and a resume keeps them and refuses different ones in one line."""

from __future__ import annotations

import json

from analytics.store import open_store
from control_plane.cli import main


def test_predictions_are_registered_before_the_first_lane_and_a_resume_cannot_change_them(tmp_path, capsys):
    results = tmp_path / "results"
    request = {
        "lanes": ["provenance"],
        "predictions": [{"lane": "provenance", "expected": "works", "note": "it only reads facts"}],
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(request))
    argv = ["run", "--local", "--input", str(path), "--results", str(results), "--run-id", "p1", "--no-live"]
    assert main(argv) == 0
    assert "predictions: 1 registered at " in capsys.readouterr().err
    store = open_store(str(results))
    [registered] = store.read_table("predictions", ["p1"]).to_pylist()
    [lane] = [r for r in store.read_table("lane_runs", ["p1"]).to_pylist() if r["lane"] == "provenance"]
    assert registered["target"] == "provenance" and registered["registered_at"] < lane["started_at"]
    markers = store.markers("p1")

    request["predictions"][0]["expected"] = "fails"
    path.write_text(json.dumps(request))
    assert main(argv) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: predictions: run p1 registered other predictions at ")
    assert store.markers("p1") == markers  # nothing started
    assert store.read_table("predictions", ["p1"]).to_pylist() == [registered]
