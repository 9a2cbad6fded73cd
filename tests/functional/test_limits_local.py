"""The limits lane for real on the CPU backend (issue 26 item 4): under the lane's memory cap the CPU server
reserves its whole KV cache at boot, so too many sequences fail the boot with an out-of-memory line; the lane
bisects to a one-sequence bracket, each probe a compiles row and a limit_probes row, and REPORT.md shows the
bracket with its probes."""

from __future__ import annotations

import pytest

from tests.support.cli import query, run_local


@pytest.mark.slow
def test_the_lane_brackets_the_cpu_memory_limit(tmp_path):
    from agents.loadgen.grid import kv_bytes_per_token
    from agents.serving.session import model_config
    from agents.training.tiny_models import ensure_tiny_model

    per_token, _ = kv_bytes_per_token(model_config(ensure_tiny_model("llama", tmp_path / "cache")), dtype_bytes=4)
    limit = int(32 * 2**20 // (per_token * 1024))  # the most whole caches of 1024 tokens in 32 MiB
    # a bracket a few boots wide around the limit (each boot is a CPU server start): the bisection still has to
    # find it, from a good and a bad the lane does not know
    good, bad = max(1, limit - 2), limit + 5
    request = {
        "lanes": ["limits"],
        "profile": "tiny",
        "lane_config": {
            "limits": {
                "searches": [{"kind": "max_num_seqs", "good": good, "bad": bad, "at": 1024, "max_boots": 8}],
                "memory_cap_mib": 32.0,
            }
        },
    }
    results, report = run_local(tmp_path, request, "lim-1")
    probes = query(
        results,
        "select probe, phase, value, succeeded, error_kind, error from limit_probes "
        "where phase <> 'outcome' order by probe",
    )
    assert [p["phase"] for p in probes[:2]] == ["good", "bad"] and probes[0]["succeeded"]
    assert probes[1]["error_kind"] == "oom" and "out of memory: the KV pool" in probes[1]["error"]
    (row,) = query(results, "select low, high, bracket, error_kind_at_high, boots, stop_reason from report_limits")
    assert row["high"] == row["low"] + 1 and row["error_kind_at_high"] == "oom"  # within the precision of 1
    assert row["low"] == limit
    assert row["boots"] == len(probes) <= 8 and row["stop_reason"] == "bracket within the precision 1"
    boots = query(results, "select count(*) as n, count(*) filter (where not succeeded) as failed from compiles")[0]
    assert boots["n"] == len(probes) and boots["failed"] == sum(not p["succeeded"] for p in probes)
    text = (report / "REPORT.md").read_text()
    assert "## Limits" in text and f"| {row['bracket']} | oom: " in text
