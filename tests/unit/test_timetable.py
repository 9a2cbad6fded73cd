"""The plan's expected timetable (control_plane.timetable): graph vs sequential, durations from history or defaults."""

from __future__ import annotations

import json
import subprocess
import sys

from control_plane.timetable import (
    DEFAULT_DURATIONS_S,
    expected_duration,
    history_durations,
    timetable_graph,
    timetable_sequential,
)
from pipeline.graph import Node, build_nodes
from pipeline.lanes import plan_order

PRICES = {"trn1": 1.34, "inf2": 0.76}


def test_default_table_covers_every_registry_lane_for_both_profiles():
    for profile in ("full", "tiny"):
        assert {lane for (p, lane) in DEFAULT_DURATIONS_S if p == profile} == {s.name for s in plan_order()}


def test_full_default_schedule_meets_the_saving_targets():
    nodes = build_nodes(plan_order(), ["trn1", "inf2"])
    durations = {n.result_lane: expected_duration(n.lane, "full", None, {}).seconds for n in nodes}
    graph = timetable_graph(nodes, durations, PRICES)
    seq = timetable_sequential(nodes, durations, PRICES, ("trn1", "inf2"))
    assert graph.wall_s <= 0.7 * seq.wall_s
    assert graph.box_hours <= 1.05 * seq.box_hours
    # the inf2 box works during trn1's training, and the merge consumers start after trn1's last lane
    trn1, inf2_first, inf2_second = graph.segments
    assert (trn1.box, inf2_first.box, inf2_second.box) == ("trn1", "inf2", "inf2")
    assert inf2_first.start_s < trn1.end_s and inf2_second.start_s >= trn1.end_s
    assert graph.critical_path[-3:] == ["quality", "accuracy", "finetune_serve"] and "sft" in graph.critical_path


def test_schedule_arithmetic_on_a_small_graph():
    nodes = [Node("a", "trn1", "a", 1), Node("b", "inf2", "b", 2), Node("c", "inf2", "c", 3, needs=("a",), wave=1)]
    g = timetable_graph(nodes, {"a": 100, "b": 30, "c": 10}, PRICES, overhead_s=5)
    assert g.wall_s == 105 + 15  # wave 0 ends with a (5 + 100); c's segment: 5 + 10
    assert round(g.box_hours * 3600) == 105 + 35 + 15
    s = timetable_sequential(nodes, {"a": 100, "b": 30, "c": 10}, PRICES, ("trn1", "inf2"), overhead_s=5)
    assert s.wall_s == 105 + 45 and round(s.box_hours * 3600) == 150
    assert (
        g.cost_usd == round(105 / 3600 * 1.34 + 50 / 3600 * 0.76, 12)
        or abs(g.cost_usd - (105 / 3600 * 1.34 + 50 / 3600 * 0.76)) < 1e-9
    )


def test_history_wins_over_defaults_exact_host_first():
    rows = [
        {
            "lane": "sft",
            "status": "succeeded",
            "supersedes": True,
            "wall_s": w,
            "profile": "full",
            "instance_type": "trn1.2xlarge",
        }
        for w in (100.0, 300.0, 200.0)
    ]
    rows += [
        {
            "lane": "sft",
            "status": "failed",
            "supersedes": True,
            "wall_s": 5.0,
            "profile": "full",
            "instance_type": "trn1.2xlarge",
        },
        {
            "lane": "smoke@inf2",
            "status": "succeeded",
            "supersedes": True,
            "wall_s": 7.0,
            "profile": "tiny",
            "instance_type": None,
        },
    ]
    hist = history_durations(rows)
    e = expected_duration("sft", "full", "trn1.2xlarge", hist)
    assert (e.seconds, e.source) == (200.0, "history: median of n=3 (0:01:40–0:05:00), same lane/instance type")
    e = expected_duration("smoke", "tiny", "trn1.2xlarge", hist)
    assert (e.seconds, e.source) == (7.0, "history: median of n=1 (0:00:07–0:00:07), same lane, any host (local)")
    assert expected_duration("smoke", "full", "trn1.2xlarge", hist).source.startswith("default: estimate")


def test_plan_switches_from_defaults_to_a_local_runs_history(tmp_path):
    """A real `run --local` of one lane, then `plan` for the same profile: that lane's source is the history."""
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"lanes": ["provenance"], "profile": "tiny"}))
    results = tmp_path / "results"

    def plan() -> str:
        out = subprocess.run(
            [sys.executable, "-m", "control_plane.cli", "plan", "--input", str(req), "--history", str(results)],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    before = plan()
    assert "default: rehearsal" in before and "history: median" not in before.split("expected lane durations")[1]
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "control_plane.cli",
            "run",
            "--local",
            "--lanes",
            "provenance",
            "--run-id",
            "hist-1",
            "--results",
            str(results),
            "--no-live",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    after = plan()
    assert "same lane, any host (local)" in after


def _env():
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONPIPE_")}
    env.update(AWS_EC2_METADATA_DISABLED="true", COLUMNS="200")
    return env


def test_the_segment_overhead_comes_from_recorded_boots_when_there_are_any():
    from datetime import datetime, timedelta, timezone

    from control_plane.timetable import SEGMENT_OVERHEAD_S, STOP_S, segment_overhead

    assert segment_overhead([]).seconds == SEGMENT_OVERHEAD_S
    assert segment_overhead([]).source.startswith("default")
    t0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
    boots = [
        {"start_requested_at": t0, "cache_seeded_at": t0 + timedelta(seconds=s), "push_s": p}
        for s, p in ((100, 4.0), (140, 6.0), (120, 5.0))
    ]
    boots.append({"start_requested_at": None, "cache_seeded_at": t0, "push_s": None})  # a local run: no start
    got = segment_overhead(boots)
    assert got.seconds == 120 + 5.0 + STOP_S and "3 boot(s)" in got.source


def test_a_serving_lanes_default_follows_its_family_and_its_declared_configs():
    from control_plane.timetable import BOOT_COSTS_S, planned_lane, serve_default

    cold, warm = BOOT_COSTS_S[("full", "neuron")][:2]
    cuda = BOOT_COSTS_S[("full", "cuda")][1]
    neuron_one = planned_lane("serve_sweep", "full", "neuron", {"server_configs": ["A"]})
    assert neuron_one.default[0] == cold + 1200.0 and neuron_one.default[1].startswith("anchor (family neuron)")
    assert "x 1 config" in neuron_one.default[1]
    cuda_two = planned_lane("serve_sweep", "full", "cuda", {"server_configs": ["A", "B"]})
    assert cuda_two.default[0] == 2 * (cuda + 1200.0) and cuda_two.default[1].startswith("estimate (family cuda)")
    assert "no Neuron compile" in cuda_two.default[1] and "x 2 configs" in cuda_two.default[1]
    assert len(cuda_two.fingerprints) == 2 and cuda_two.models == ("llama-3.1-8b-instruct",)
    # the pinned plan's anchors are the formula at the default Configs' counts
    assert DEFAULT_DURATIONS_S[("full", "serve_sweep")][0] == 2 * (cold + 1200.0) == 7144.0
    assert DEFAULT_DURATIONS_S[("full", "quality")][0] == 2 * warm + 300.0
    assert serve_default("serve_sweep", "tiny", "cuda") is None  # tiny: measured on CPU, as it is
    assert planned_lane("serve_sweep", "tiny", "cuda", None).default == DEFAULT_DURATIONS_S[("tiny", "serve_sweep")]
