"""The train_limits lane refuses a search the tiny model cannot hold before any probe. The lane's search itself (probes
that train or run out of memory, the bracket, REPORT.md's line) runs in the local pipeline's end-to-end test, at the
tiny profile's own settings: tests/e2e/test_local_pipeline.py."""

from __future__ import annotations

from tests.support.cli import query, run_local


def test_a_sequence_beyond_the_tiny_models_positions_is_refused_before_any_probe(tmp_path):
    request = {
        "lanes": ["train_limits"],
        "profile": "tiny",
        "lane_config": {"train_limits": {"searches": [{"kind": "train_seq_len", "good": 256, "bad": 4096}]}},
    }
    results, _ = run_local(tmp_path, request, "tl-2", check=False)
    (lane,) = query(results, "select status, error_message from lane_runs")
    assert lane["status"] == "failed"
    assert "searches[0].bad: at most 2048 (tiny-llama's max_position_embeddings), got 4096" in lane["error_message"]
    assert query(results, "select count(*) as n from limit_probes") == [{"n": 0}]
