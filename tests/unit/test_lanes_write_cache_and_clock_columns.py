"""The lanes fill the cache-scope and step-clock columns: compiles.cache_scope/cache_basis,
train_runs.train_loop_s/step_clock."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from agents.serving.launcher import cache_label
from agents.serving.neuron import NeuronLauncher
from agents.training.backends.neuron import last_epoch, loop_seconds, parse_step_log
from agents.training.data import InstructionSet
from agents.training.session import run_row
from analytics.schema import conform
from pipeline.steps import STEP_CLOCK
from tests.unit.test_training_rows import _outcome, _req


def test_a_fresh_artifacts_dir_whose_graphs_all_hit_the_shared_cache_is_warm_not_cold():
    # a merged fine-tune: its own artifacts dir is empty (cold), the shared compiler cache held graphs, gained none
    assert cache_label("cold", "artifacts_dir", 12, 12) == ("warm", "shared_compiler_cache", "observed")
    assert cache_label("cold", "artifacts_dir", 12, 20) == ("cold", "shared_compiler_cache", "observed")
    assert cache_label("cold", "artifacts_dir", 0, 0) == ("cold", "artifacts_dir", "observed")  # nothing to hit
    assert cache_label("warm", "artifacts_dir", 12, 12) == ("warm", "artifacts_dir", "observed")
    assert cache_label("cold", "artifacts_dir", None, None) == ("cold", "artifacts_dir", "observed")
    assert cache_label("none", "artifacts_dir", None, None) == ("none", None, None)


def test_neuron_launcher_names_its_shared_compiler_cache(tmp_path):
    launcher = NeuronLauncher(tmp_path, python="python3", compile_cache=tmp_path / "neuron-compile-cache")
    assert launcher.cache_scope == "artifacts_dir" and launcher.shared_cache_dir() == tmp_path / "neuron-compile-cache"


def test_run_row_carries_the_loop_wall_time_and_the_step_clock():
    data = InstructionSet(records=(), sha256="0" * 64, source="x")
    outcome = _outcome()
    outcome = replace(outcome, extra={"train_loop_s": 80.0})
    row = run_row("m", "neuron", _req(), outcome, data, None)
    assert row["train_loop_s"] == 80.0 and row["step_clock"] == STEP_CLOCK
    assert conform("train_runs", [row], defaults={"run_id": "r", "lane": "sft", "attempt": "a"}).num_rows == 1
    assert run_row("m", "neuron", _req(), _outcome(), data, None)["train_loop_s"] is None  # not measured: NULL


def test_neuron_step_log_keeps_the_loop_row_apart(tmp_path: Path):
    log = tmp_path / "steps.jsonl"
    log.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"step": 1, "step_s": 3.0, "tokens": 10, "epoch": 0.5, "loss": 2.0},
                {"step": 2, "step_s": 2.0, "tokens": 10, "epoch": 1.0, "loss": 1.5},
                {"train_loop_s": 7.25},
            ]
        )
        + "\n"
    )
    assert [s.step for s in parse_step_log(log)] == [1, 2]
    assert loop_seconds(log) == 7.25 and last_epoch(log) == 1.0
    assert loop_seconds(tmp_path / "absent.jsonl") is None
