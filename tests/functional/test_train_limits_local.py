"""The train_limits lane for real on the CPU backend (issue 26 item 4): each probe is a short LoRA SFT run of the
tiny llama in a process of its own, whose address space may grow by the lane's memory cap once the model has
loaded; activations grow with the sequence length, so a long sequence fails with the allocator's out-of-memory
line while a short one trains; the lane bisects between them, and REPORT.md shows the bracket with its probes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import query, run_local

CAP_MIB = 400.0  # the tiny profile's cap: its bracket lands between 1,024 and 2,048 tokens on a 2-core VM


def _request(tmp_path: Path, cache: Path, seq_len: int):
    from agents.training.backends import TrainRequest
    from agents.training.catalogue import resolve_model
    from agents.training.data import load_instructions

    model_dir = resolve_model("tiny-llama", cache, "tiny")
    return TrainRequest(
        model="tiny-llama",
        model_dir=model_dir,
        output_dir=tmp_path / f"out-{seq_len}",
        records=list(load_instructions().records),
        max_steps=2,
        max_seq_len=seq_len,
        batch_size=1,
        packing=True,
    )


@pytest.mark.slow
def test_a_probe_process_trains_short_and_runs_out_of_memory_long(tmp_path, shared_cache):
    from agents.training.probe import RSS_SOURCE, launch

    short = launch(_request(tmp_path, shared_cache, 128), "cpu", CAP_MIB, tmp_path / "p128", 300.0)
    long = launch(_request(tmp_path, shared_cache, 2048), "cpu", CAP_MIB, tmp_path / "p2048", 300.0)
    assert (short.ok, short.error_kind, short.error) == (True, None, None)
    assert short.tokens_per_s > 0 and short.peak_rss_bytes > 0 and RSS_SOURCE.startswith("cpu:")
    assert (long.ok, long.error_kind) == (False, "oom")
    assert long.error in (tmp_path / "p2048" / "probe.log").read_text()  # the verbatim line of the probe's log
    assert "Cannot allocate memory" in long.error or "MemoryError" in long.error


@pytest.mark.slow
def test_the_lane_brackets_the_cpu_training_limit_and_the_report_shows_it(tmp_path):
    # the tiny profile's own search and cap
    results, report = run_local(tmp_path, {"lanes": ["train_limits"], "profile": "tiny"}, "tl-1")
    probes = query(
        results,
        "select phase, value, succeeded, error_kind, error, peak_mem_bytes, peak_mem_source, "
        "tokens_per_s, kind, at_field, at_value from limit_probes where phase <> 'outcome' "
        "order by probe",
    )
    assert [p["phase"] for p in probes[:2]] == ["good", "bad"] and probes[0]["succeeded"]
    assert probes[1]["error_kind"] == "oom" and {p["kind"] for p in probes} == {"train_seq_len"}
    assert all(p["peak_mem_bytes"] > 0 and p["peak_mem_source"].startswith("cpu:") for p in probes)
    assert all((p["tokens_per_s"] is not None) == p["succeeded"] for p in probes)
    (row,) = query(results, "select low, high, bracket, boots, stop_reason from report_limits")
    assert 256 <= row["low"] < row["high"] <= 2048 and row["high"] - row["low"] <= 256
    assert row["boots"] == len(probes) <= 6 and row["stop_reason"] == "bracket within the precision 256"
    text = (report / "REPORT.md").read_text()
    assert f"| train_seq_len at batch_size=1 | {row['bracket']} | oom: " in text


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
