"""The preflight gate and the shared compile cache on the rehearsal's boxes: three runs in one deployment.

1. Both boxes pass the gate (their fake DLAMIs are healthy) and push what they built to the bucket.
2. inf2's cache volume is wiped (a box replaced by a redeploy): its next boot seeds from the bucket, and the
   boot's row counts what it fetched, with the stamps of its start.
3. optimum-neuron is put into inf2's vLLM venv: the gate fails with the check's reason, the box's later lane is
   skipped, the box is stopped, and trn1 is unaffected.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from control_plane.models import RunRequest

pytestmark = pytest.mark.slow

LANES = ["provenance", "preflight", "host_cpu"]
# host_cpu at its smallest: the test is about the gate and the cache, not the host's bandwidth (its tiny-profile
# sizes cost ~15 s of CPU a box, five times here)
SMALL_HOST_CPU = {"host_cpu": {"triad_elements": 1 << 20, "matmul_n": 128, "repeats": 1, "tokenizer_texts": 100}}


def _run(r: Any, run_id: str) -> Any:
    launched = r.start(
        RunRequest(lanes=LANES, profile="tiny", trigger="rehearsal-preflight", lane_config=SMALL_HOST_CPU), run_id
    )
    final = r.follow(launched.execution_arn, lambda _p: None, deadline_s=600)
    r.settle()
    return final


def _store(r: Any) -> Any:
    from analytics.store import open_store

    return open_store(r.settings().results_uri, s3_client=r.world.client("s3", r.operator()))


def _rows(r: Any, table: str, run_id: str) -> list[dict[str, Any]]:
    return _store(r).read_table(table, [run_id]).to_pylist()


def test_preflight_and_the_shared_cache_across_three_runs(cfn_assembly, tmp_path):
    from rehearsal.dlami import Breakage, build_dlami
    from rehearsal.run import Rehearsal

    with Rehearsal(tmp_path / "w", assembly=cfn_assembly, boot_delay_s=0.5, log=lambda _: None) as r:
        boxes = {b.identity.box_role: b for b in r.boxes.values()}
        # 1. healthy: the gate passes on both boxes with its Neuron checks, and both boxes push their cache
        first = _run(r, "pf-1")
        assert first.status == "SUCCEEDED", first
        checks = _rows(r, "preflight_checks", "pf-1")
        assert {c["box_role"] for c in checks} == {"trn1", "inf2"}
        assert [c for c in checks if c["status"] == "fail"] == []
        by = {(c["box_role"], c["check"]): c for c in checks}
        assert by[("inf2", "venv.vllm.no-optimum-neuron")]["status"] == "pass"
        assert by[("trn1", "pins.optimum-neuron")]["observed"] == "0.4.3"
        assert by[("inf2", "neuron-cores")]["status"] == "pass"
        boots = {b["box_role"]: b for b in _rows(r, "box_boots", "pf-1")}
        # both boxes built the same tokenizer (one fingerprint, one entry): the first to push stores it once
        assert set(boots) == {"trn1", "inf2"} and sum(b["push_entries"] for b in boots.values()) == 1

        # 2. a replaced inf2 box: an empty cache volume seeds from the bucket
        tiny = boxes["inf2"].root / "var/cache/neuronpipe/tiny"
        assert tiny.is_dir() and any(tiny.iterdir())
        shutil.rmtree(tiny)
        second = _run(r, "pf-2")
        assert second.status == "SUCCEEDED", second
        boot = {b["box_role"]: b for b in _rows(r, "box_boots", "pf-2")}["inf2"]
        assert boot["seed_entries_fetched"] >= 1 and boot["seed_bytes_fetched"] > 0
        assert boot["cache_namespace"].startswith("cpu-tiny-") and boot["push_entries"] == 0  # nothing new
        for mark in ("start_requested_at", "boot_done_at", "sync_started_at", "harness_synced_at", "cache_seeded_at"):
            assert boot[mark] is not None, mark
        assert (
            boot["start_requested_at"]
            <= boot["sync_started_at"]
            <= boot["harness_synced_at"]
            <= boot["cache_seeded_at"]
        )
        assert boot["kernel_boot_at"] is None  # a sandbox shares this machine's kernel: not its boot
        assert boxes["inf2"].root.joinpath("var/cache/neuronpipe/tiny").is_dir()

        # 3. optimum-neuron in the vLLM venv: the gate fails with its reason and the box's later lane is skipped
        build_dlami(boxes["inf2"].root, "inf2", boxes["inf2"].identity.instance_type, Breakage(optimum_in_vllm=True))
        third = _run(r, "pf-3")
        assert third.status == "FAILED" and third.outcome_status == "failed", third
        failed = [c for c in _rows(r, "preflight_checks", "pf-3") if c["status"] == "fail"]
        assert [(c["box_role"], c["check"]) for c in failed] == [("inf2", "venv.vllm.no-optimum-neuron")]
        assert "Only one platform plugin can be activated" in failed[0]["reason"]
        rows = _rows(r, "lane_runs", "pf-3")
        runs = {x["lane"]: x for x in rows if x["supersedes"]}
        assert runs["preflight@inf2"]["status"] == "failed"
        assert "venv.vllm.no-optimum-neuron" in runs["preflight@inf2"]["error_message"]
        assert runs["host_cpu@trn1"]["status"] == "succeeded"
        # the lane behind the gate never ran: the scheduler recorded it skipped, blocked by the gate
        blocked = [x for x in rows if x["lane"] == "host_cpu@inf2"]
        assert [(x["status"], x["blocked_by"]) for x in blocked] == [("skipped", "preflight@inf2")]
        # the run's failure names the gate and carries the check's reason verbatim (bounded)
        outcome = json.loads(third.cause)["outcome"]
        assert outcome["failed"] == ["preflight@inf2"] and outcome["skipped"] == ["host_cpu@inf2"]
        assert (
            "venv.vllm.no-optimum-neuron: optimum-neuron 0.4.3 is installed in the vLLM venv"
            in outcome["reasons"]["preflight@inf2"]
        )
        assert r.running_boxes() == []
