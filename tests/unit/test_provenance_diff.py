"""What changed between two runs, from provenance, and its place at a series' change point."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from analytics.provenance_diff import changes, summary
from analytics.report.trend import series_trend


def _prov(**over: str | None) -> list[dict]:
    facts = {
        ("instance", "ami-id"): "ami-0aaa",
        ("driver", "neuron-driver"): "2.22.2",
        ("neuron", "neuronx-cc"): "2.19.1",
        ("package", "vllm"): "0.9.0",
        ("package", "torch"): "2.7.0",
        ("python", "version"): "3.11.9",
        ("request", "fingerprint"): "fp",
    }
    for key, value in over.items():
        facts[tuple(key.split("__"))] = value
    return [{"category": c, "name": n, "value": v} for (c, n), v in facts.items()]


def test_watched_facts_that_differ_are_listed_and_the_rest_are_not():
    got = changes(_prov(), _prov(**{"neuron__neuronx-cc": "2.20.0", "package__vllm": None, "python__version": "3.12"}))
    assert [(c.label, c.before, c.after) for c in got] == [("neuronx-cc", "2.19.1", "2.20.0"), ("vLLM", "0.9.0", None)]
    assert summary(got) == "neuronx-cc (neuron/neuronx-cc): 2.19.1 → 2.20.0; vLLM (package/vllm): 0.9.0 → not recorded"
    ami = changes(_prov(), _prov(**{"instance__ami-id": "ami-0bbb", "request__fingerprint": "fp2"}))
    assert [c.label for c in ami] == ["AMI", "request"]
    assert changes(_prov(), _prov()) == [] and summary([]).startswith("provenance shows no change")


def test_a_step_in_a_series_is_a_change_point_annotated_with_what_changed_between_the_runs_on_either_side():
    values = [100.0, 102.0, 99.0, 101.0, 100.5, 130.0, 128.0, 131.0, 129.5, 130.5]
    points = [
        {
            "request_fingerprint": "fp",
            "instance_type": "inf2.xlarge",
            "series": "serve_sweep · p99_ttft_ms",
            "metric": "p99_ttft_ms",
            "better": "lower",
            "run_id": f"r{i}",
            "value": v,
            "ci_low": v * 0.95,
            "ci_high": v * 1.05,
            "repeats": 1,
            "ended_at": datetime(2026, 12, 1, i, tzinfo=timezone.utc),
        }
        for i, v in enumerate(values)
    ]
    prov = {f"r{i}": _prov(**({"neuron__neuronx-cc": "2.20.0"} if i >= 5 else {})) for i in range(10)}
    t = series_trend(points, prov)
    assert t["note"] is None
    (cp,) = t["change_points"]
    assert (cp["run_before"], cp["run_after"], cp["index"]) == ("r4", "r5", 5) and cp["p_value"] <= 0.05
    assert cp["pct"] == pytest.approx(29.5, abs=1.5)
    assert [w["label"] for w in cp["what_changed"]] == ["neuronx-cc"]
    before, after = t["segments"]
    assert (before["runs"], after["runs"]) == (5, 5)
    assert before["band_low"] < 99.0 and before["band_high"] > 102.0 and after["band_low"] > before["band_high"]


def test_noise_only_has_no_change_point_and_a_short_series_says_so():
    noise = [100.0, 103.0, 98.0, 101.0, 99.5, 102.5, 100.2, 98.8]
    pts = [
        {
            "request_fingerprint": "fp",
            "instance_type": None,
            "series": "s",
            "metric": "m",
            "better": "lower",
            "run_id": f"r{i}",
            "value": v,
            "ci_low": None,
            "ci_high": None,
            "repeats": 1,
            "ended_at": None,
        }
        for i, v in enumerate(noise)
    ]
    assert series_trend(pts, {})["change_points"] == []
    short = series_trend(pts[:3], {})
    assert short["note"] == "too short for change points: 3 run(s), at least 4 needed"
    assert short["change_points"] == [] and short["segments"][0]["band_low"] is None
