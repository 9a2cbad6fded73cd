"""A model outside the catalogue, end to end on the CPU backend (issue 26 item 3): a request names
``tiny-mistral`` (a Mistral-style family the tiny factory builds from its config: sliding-window attention, no
biases); it is fine-tuned, merged, served and swept, and reported like the catalogue's models."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import neuronpipe, query

REQUEST = {
    "lanes": ["sft", "merge", "serve_sweep"],
    "profile": "tiny",
    "models": ["tiny-mistral"],
    "lane_config": {
        "sft": {"steps": 4, "max_seq_len": 128},
        "serve_sweep": {
            "server_configs": ["A"],
            "shapes": {"A": ["16:8"]},
            "min_prompts": 2,
            "prompts_per_stream": 1,
            "warmup_requests": 1,
            "max_concurrency": 2,
            "sweep_repeats": 1,
        },
    },
}


@pytest.mark.slow
def test_a_new_family_is_trained_merged_served_and_reported(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(REQUEST))
    results, report = str(tmp_path / "results"), tmp_path / "report"
    neuronpipe(
        "run",
        "--local",
        "--input",
        str(path),
        "--results",
        results,
        "--report",
        str(report),
        "--run-id",
        "mistral-1",
        "--no-live",
    )

    assert {(r["lane"], r["status"]) for r in query(results, "select lane, status from lane_runs")} == {
        ("sft", "succeeded"),
        ("merge", "succeeded"),
        ("serve_sweep", "succeeded"),
    }
    assert {r["model"] for r in query(results, "select distinct model from sweep_points")} == {"tiny-mistral"}
    assert query(results, "select count(*) as n from train_steps where model = 'tiny-mistral'")[0]["n"] > 0
    merged = query(results, "select path from artifacts where kind = 'merged' and path like '%config.json'")
    assert merged
    text = (report / "REPORT.md").read_text()
    assert "tiny-mistral" in text
