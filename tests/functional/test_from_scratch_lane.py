"""The from_scratch lane for real on its tiny profile (generated images, three models), its bad-dataset paths (the
plan refuses a local file; the lane fails on one it reads itself), and its rows through the views into the report."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from agents.runner import LaneRequest, run_lane
from agents.training.vision.dataset import glyphs
from analytics.report.comparison import build_comparison
from analytics.report.document import Comparison, FromScratch
from analytics.report.markdown import render
from analytics.report.training_md import s_from_scratch
from analytics.store import LocalStore
from analytics.views import connect
from control_plane.cli import main
from pipeline.lane_configs.from_scratch import Config
from tests.support.views import q


def _scratch_only(con) -> SimpleNamespace:
    """What the section renders, from the views (the whole comparison is built once, in the fixed-rows test)."""
    from analytics.report.comparison import existing_views, from_scratch_section

    return SimpleNamespace(from_scratch=FromScratch(**from_scratch_section(con, existing_views(con))))


def test_the_tiny_profile_trains_three_models_above_chance_and_reports_them(tmp_path):
    store = LocalStore(tmp_path / "store")
    result = run_lane(LaneRequest("from_scratch", "r1", backend="cpu", profile="tiny"), store)
    assert result.status == "succeeded", result.error_message
    cfg = Config.for_profile("tiny")
    con = connect(store)
    runs = {r["model"]: r for r in q(con, "SELECT * FROM report_scratch")}
    assert set(runs) == {"mlp", "cnn", "vit"}
    for r in runs.values():
        assert r["source"] == "measured" and r["device"] == "cpu" and r["dataset"] == "generated"
        assert r["params"] > 0 and r["epochs_recorded"] == cfg.epochs and r["test_samples"] == cfg.generated_test
        assert r["steps"] == (cfg.generated_train // cfg.batch_size) * cfg.epochs
        assert r["steady_steps"] == r["steps"] - cfg.warmup_steps and r["first_step_s"] > 0
        assert r["samples_per_s"] == r["batch_size"] / r["steady_step_s"]
        # above chance: the Wilson interval's low bound clears 1 / classes
        assert r["accuracy_ci_low"] > r["chance_accuracy"] == 1 / cfg.generated_classes
        assert r["accuracy_ci_low"] <= r["accuracy"] <= r["accuracy_ci_high"]
    epochs = q(con, "SELECT * FROM scratch_epoch_metrics WHERE model = 'mlp' ORDER BY epoch")
    assert [e["epoch"] for e in epochs] == list(range(1, cfg.epochs + 1))
    assert epochs[-1]["train_loss"] < epochs[0]["train_loss"]
    [data] = [a for a in store.read_table("artifacts", ["r1"]).to_pylist() if a["kind"] == "dataset"]
    assert data["sha256"] == r["dataset_sha256"]
    section = "\n".join(s_from_scratch(_scratch_only(con)))
    assert all(f"| {m} |" in section for m in ("mlp", "cnn", "vit")) and "Per epoch:" in section


def test_a_bad_dataset_refuses_the_plan_and_fails_the_lane_with_one_line(tmp_path, capsys):
    arrays = glyphs(20, 10, 8, 3, seed=1)
    arrays["y_train"][5] = 9
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    request = tmp_path / "req.json"
    request.write_text(json.dumps({"lanes": ["from_scratch"], "lane_config": {"from_scratch": {"dataset": str(bad)}}}))
    assert main(["plan", "--local", "--input", str(request)]) == 2
    [line] = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert "from_scratch.dataset" in line and str(bad) in line and "y_train: label 9 at index 5" in line
    result = run_lane(
        LaneRequest("from_scratch", "r2", backend="cpu", config={"dataset": str(bad)}), LocalStore(tmp_path / "store")
    )
    assert result.status == "failed" and "y_train: label 9 at index 5 is out of range" in result.error_message


def test_report_section_on_fixed_rows_and_reference_ranges(tmp_path):
    from tests.support.attempts import commit

    store = LocalStore(tmp_path / "store")
    common = {"model": "cnn", "dataset": "mnist", "device": "trn1"}
    commit(
        store,
        "r1",
        "from_scratch",
        scratch_runs=[
            {
                **common,
                "source": "imported",
                "num_classes": 10,
                "batch_size": 128,
                "params": 1000,
                "first_step_s": 11.0,
                "steady_step_s": 0.0025,
                "test_samples": 10_000,
            },
            {
                "model": "cnn",
                "dataset": "mnist",
                "device": "apple_m5",
                "source": "reference",
                "num_classes": 10,
                "reference_acc_low": 0.88,
                "reference_acc_high": 0.9,
                "source_note": "elsewhere",
            },
        ],
        scratch_epochs=[
            {**common, "source": "imported", "epoch": 1, "correct": 9000, "test_samples": 10_000, "train_loss": 0.3},
            {**common, "source": "imported", "epoch": 2, "correct": 9800, "test_samples": 10_000, "train_loss": 0.1},
        ],
    )
    con = connect(store)
    rows = {r["source"]: r for r in q(con, "SELECT * FROM report_scratch")}
    imp, ref = rows["imported"], rows["reference"]
    assert imp["accuracy"] == 0.98 and imp["best_epoch"] == 2 and imp["samples_per_s"] == 128 / 0.0025
    assert 0.977 < imp["accuracy_ci_low"] < 0.98 < imp["accuracy_ci_high"] < 0.983  # Wilson, n = 10,000
    assert imp["first_step_excess_s"] == 11.0 - 0.0025
    assert ref["accuracy"] is None and ref["first_step_excess_s"] is None and ref["reference_acc_high"] == 0.9
    md = render(Comparison.model_validate(build_comparison(connect(store), ["r1"])))
    assert "98.0 % [97.7, 98.3]" in md and "| mnist | apple_m5 | cnn | 88–90 % | elsewhere |" in md
    assert s_from_scratch(SimpleNamespace(from_scratch=FromScratch(runs=[], epochs=[]))) == []  # no rows: no section


def test_on_neuron_the_models_train_in_a_process_of_the_accelerators_interpreter(tmp_path, monkeypatch):
    """The neuron path with the launch faked: the entry script runs here on the CPU (no torch_xla), its results
    come back through the file it writes; a failed process fails the lane with its log's tail."""
    from agents.lanes import from_scratch
    from agents.training.vision import entry

    seen = {}

    def launch(cmd, env, **kw):
        seen.update(cmd=cmd, env=env)
        spec_path = Path(cmd[cmd.index("--spec") + 1])
        spec = json.loads(spec_path.read_text())
        assert spec["backend"] == "neuron" and Path(spec["dataset"]).is_file()
        spec_path.write_text(json.dumps({**spec, "backend": "cpu"}))  # no XLA here: the same loop on the CPU
        entry.main(cmd[cmd.index("--spec") :])
        return SimpleNamespace(returncode=0)

    monkeypatch.setattr(from_scratch, "_launch", launch)
    small = {"models": ["mlp", "cnn"], "generated_train": 64, "generated_test": 32, "epochs": 1, "batch_size": 16}
    store = LocalStore(tmp_path / "store")
    result = run_lane(LaneRequest("from_scratch", "r1", backend="neuron", config=small), store)
    assert result.status == "succeeded", result.error_message
    assert seen["cmd"][1:3] == ["-m", "agents.training.vision.entry"] and seen["env"]["NEURON_RT_NUM_CORES"] == "1"
    assert str(Path(from_scratch.__file__).resolve().parents[2]) in seen["env"]["PYTHONPATH"].split(os.pathsep)
    runs = store.read_table("scratch_runs", ["r1"]).to_pylist()
    assert [(r["model"], r["device"], r["backend"]) for r in runs] == [
        ("mlp", "trn1", "neuron"),
        ("cnn", "trn1", "neuron"),
    ]
    assert all(r["steps"] == 4 and json.loads(r["config_json"])["torch_device"] == "xla" for r in runs)
    assert len(store.read_table("scratch_epochs", ["r1"])) == 2

    monkeypatch.setattr(from_scratch, "_launch", lambda cmd, **kw: SimpleNamespace(returncode=1))
    failed = run_lane(LaneRequest("from_scratch", "r2", backend="neuron", config=small), store)
    assert failed.status == "failed" and "exited 1 after 0 of 2 models" in failed.error_message
