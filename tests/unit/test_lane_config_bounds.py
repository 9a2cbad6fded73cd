"""Strict lane configs: every number a lane takes has stated bounds, checked before anything starts; a
lane_config for a lane the request does not run is refused naming the lane. Each refusal is one line, exit 2."""

from __future__ import annotations

import dataclasses
import json

import pytest

from control_plane.cli import main
from control_plane.lane_configs import LaneConfigInvalidError
from control_plane.models import RunRequest, RunRequestError, parse_request
from control_plane.plan import plan_run
from pipeline.config import LaneConfigError, build_config, field_bounds, numeric_fields
from pipeline.lanes import LANES
from pipeline.slo import Slo

RESULTS = "s3://bkt/results"
CONFIGS = {name: spec.config_class() for name, spec in LANES.items()}


@pytest.fixture(autouse=True)
def no_aws(monkeypatch):
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("NEURONPIPE_MAX_COST_USD_CEILING", raising=False)


def _plan(lanes: list[str], lane_config: dict) -> None:
    plan_run(RunRequest(lanes=lanes, profile="tiny", lane_config=lane_config), run_id="r", results_uri=RESULTS)


def _problems(lanes: list[str], lane_config: dict) -> list[str]:
    with pytest.raises(LaneConfigInvalidError) as err:
        _plan(lanes, lane_config)
    return str(err.value).splitlines()


# ---- every number states its bounds -------------------------------------------------------------
@pytest.mark.parametrize("lane", sorted(CONFIGS))
def test_every_numeric_field_of_every_lane_config_declares_bounds_its_defaults_meet(lane):
    config_cls = CONFIGS[lane]
    assert config_cls is not None and config_cls.__module__ == f"pipeline.lane_configs.{lane}"
    fields = numeric_fields(config_cls)
    assert fields, f"{lane}: no numeric field found (the check would pass vacuously)"
    for f in fields:
        assert "min" in f.metadata and "max" in f.metadata, f"{lane}.{f.name}: declare min and max in its metadata"
        lo, hi = field_bounds(f)
        assert lo < hi and f.metadata.get("help"), f"{lane}.{f.name}"
    for profile in ("tiny", "full"):
        config = build_config(config_cls, profile)
        for f in fields:
            values = getattr(config, f.name)
            for v in values if isinstance(values, (list, tuple)) else [values]:
                assert v is None or field_bounds(f)[0] <= v <= field_bounds(f)[1], f"{lane}.{f.name} ({profile})"


def test_the_slo_spec_states_its_bounds_too():
    fields = {f.name: f for f in dataclasses.fields(Slo)}
    for name in ("ttft_ms", "tpot_ms", "percentile"):
        assert field_bounds(fields[name]) is not None, name
    assert [f.name for f in numeric_fields(Slo)] == ["ttft_ms", "tpot_ms", "percentile"]


def test_the_runner_modules_reexport_the_configs_declared_in_pipeline():
    for lane, spec in LANES.items():
        assert spec.config == f"pipeline.lane_configs.{lane}:Config"
        assert spec.load().Config is CONFIGS[lane], lane


# ---- refused at plan time: lane.field: must be between lo and hi, got v -----------------------------
@pytest.mark.parametrize("value", [0, 99999999999999999999])
def test_a_count_outside_its_bounds_is_refused_at_plan_time(value):
    assert _problems(["host_cpu"], {"host_cpu": {"repeats": value}}) == [
        f"host_cpu.repeats: must be between 1 and 1000, got {value}"
    ]


def test_a_duration_that_would_run_for_years_is_refused():
    assert _problems(["sustained"], {"sustained": {"duration_s": 1e9}}) == [
        "sustained.duration_s: must be between 1.0 and 86400.0, got 1000000000.0"
    ]


def test_each_item_of_a_list_of_numbers_is_bounded():
    assert _problems(["host_cpu"], {"host_cpu": {"thread_counts": [1, 2, 0]}}) == [
        "host_cpu.thread_counts: item 2: must be between 1 and 1024, got 0"
    ]


def test_an_optional_number_is_bounded_when_given_and_none_still_means_the_default():
    assert _problems(["serve_sweep"], {"serve_sweep": {"max_concurrency": 0}}) == [
        "serve_sweep.max_concurrency: must be between 1 and 4096, got 0"
    ]
    _plan(["serve_sweep"], {"serve_sweep": {"max_concurrency": None, "min_prompts": 4}})


def test_every_out_of_bounds_field_of_every_lane_is_listed():
    assert _problems(["sft", "smoke"], {"sft": {"steps": 0, "max_seq_len": 10**9}, "smoke": {"lora_r": 0}}) == [
        "smoke.lora_r: must be between 1 and 1024, got 0",
        "sft.max_seq_len: must be between 1 and 131072, got 1000000000",
        "sft.steps: must be between 1 and 100000, got 0",
    ]


def test_slo_bounds_are_refused_in_the_request_and_in_a_lane_config():
    with pytest.raises(
        RunRequestError,
        match=r"^slo: .*slo ttft_ms: must be between 0\.1 and 600000\.0, "
        r"got 1000000000\.0$",
    ):
        parse_request({"preset": "smoke", "slo": "ttft_ms=1e9,tpot_ms=10"})
    assert _problems(["serve_sweep"], {"serve_sweep": {"slo_tpot_ms": 0}}) == [
        "serve_sweep.slo_tpot_ms: must be between 0.1 and 60000.0, got 0"
    ]
    (line,) = _problems(["sustained"], {"sustained": {"slo": {"ttft_ms": 100, "tpot_ms": 1e6}}})
    assert line == "sustained: Config: slo tpot_ms: must be between 0.1 and 60000.0, got 1000000.0"


def test_the_box_refuses_an_out_of_bounds_override_too():
    with pytest.raises(LaneConfigError, match=r"^Config: repeats: must be between 1 and 1000, got 0$"):
        build_config(CONFIGS["host_cpu"], "tiny", {"repeats": 0})
    assert build_config(CONFIGS["host_cpu"], "tiny", {"repeats": 1000}).repeats == 1000  # bounds are inclusive


# ---- a config for a lane the request does not run ---------------------------------------------------
def test_a_lane_config_for_a_lane_the_request_does_not_run_is_refused_naming_it():
    with pytest.raises(RunRequestError) as err:
        parse_request({"preset": "smoke", "lane_config": {"quality": {"max_tokens": 8}, "smoke": {"steps": 2}}})
    assert str(err.value).splitlines() == [
        "lane_config.quality: the request does not run lane quality (lanes: provenance, preflight, host_cpu, smoke)"
    ]
    with pytest.raises(
        RunRequestError,
        match=r"^lane_config\.sft: the request does not run lane sft "
        r"\(lanes: serve_sweep\)$",
    ):
        parse_request({"lanes": ["serve_sweep"], "lane_config": {"sft": {"steps": 2}}})
    assert parse_request({"lanes": ["sft"], "lane_config": {"sft": {"steps": 2}}}).lane_config == {"sft": {"steps": 2}}


# ---- the CLIs: exit 2, one line, nothing written ----------------------------------------------------
BAD_BODIES = [
    (
        {"lanes": ["host_cpu"], "lane_config": {"host_cpu": {"repeats": 0}}},
        "host_cpu.repeats: must be between 1 and 1000, got 0",
    ),
    (
        {"lanes": ["host_cpu"], "lane_config": {"host_cpu": {"repeats": 99999999999999999999}}},
        "host_cpu.repeats: must be between 1 and 1000, got 99999999999999999999",
    ),
    (
        {"preset": "smoke", "lane_config": {"quality": {"max_tokens": 8}}},
        "lane_config.quality: the request does not run lane quality (lanes: provenance, preflight, host_cpu, smoke)",
    ),
]


@pytest.mark.parametrize("body, expected", BAD_BODIES)
def test_neuronpipe_plan_refuses_with_one_line(tmp_path, capsys, body, expected):
    req = tmp_path / "run.json"
    req.write_text(json.dumps(body))
    assert main(["plan", "--input", str(req)]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [f"invalid request {req}: {expected}"] and captured.out == ""


@pytest.mark.parametrize("body, expected", BAD_BODIES)
def test_neuronpipe_run_local_refuses_with_one_line_and_writes_nothing(tmp_path, capsys, body, expected):
    req = tmp_path / "run.json"
    req.write_text(json.dumps({**body, "profile": "tiny"}))
    results = tmp_path / "results"
    assert main(["run", "--local", "--input", str(req), "--results", str(results), "--no-live"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and line.endswith(expected), line
    assert not results.exists()


def test_lanes_long_shows_each_numeric_fields_bounds(capsys):
    assert main(["lanes", "-l"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (repeats,) = [line for line in lines if line.split()[:1] == ["repeats"]]
    assert repeats.rstrip().endswith("[1..1000]")
    (mode,) = [line for line in lines if line.split()[:1] == ["mode"]]
    assert "[" not in mode  # a text field has no bounds
