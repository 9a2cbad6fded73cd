"""The smoke lane on an inf2 box gates the serving plumbing (boot, one request, stop), not training."""

from __future__ import annotations

import pytest

from agents.lanes.smoke import Config, smoke_mode
from agents.runner import LaneRequest, run_lane
from analytics.store import open_store


def test_mode_follows_the_box():
    assert smoke_mode(Config(), "inf2") == "serve"
    assert smoke_mode(Config(), "trn1") == "train"
    assert smoke_mode(Config(), "local") == "train"
    assert smoke_mode(Config(mode="serve"), "local") == "serve"
    with pytest.raises(ValueError, match="valid modes"):
        smoke_mode(Config(mode="fly"), "local")


@pytest.mark.slow
def test_serve_mode_boots_generates_and_records_the_boot(tmp_path, shared_cache, monkeypatch):
    monkeypatch.setenv("NEURONPIPE_BOX_ROLE", "inf2")
    store = open_store(str(tmp_path / "results"))
    result = run_lane(
        LaneRequest(
            lane="smoke",
            run_id="r1",
            backend="cpu",
            profile="tiny",
            config={"max_new_tokens": 4},
            telemetry_interval_s=0.2,
        ),
        store,
    )
    assert result.status == "succeeded", result.error_message
    assert result.lane == "smoke@inf2"
    (req,) = store.read_table("requests").to_pylist()
    assert req["success"] and req["output_tokens"] == 4
    (boot,) = store.read_table("compiles").to_pylist()
    assert boot["what"] == "serving_config" and boot["succeeded"]
    assert store.read_table("train_steps").num_rows == 0  # nothing trained on an inference box
