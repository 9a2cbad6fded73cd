"""Checkpoint cost in sft: the save arguments both trainers pass, the config's bounds, and the timed-save records."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from agents.training.backends import TrainRequest
from agents.training.backends.hf import sft_arguments
from agents.training.backends.neuron import training_arguments
from agents.training.saves import SaveTimingError, checkpoint_record, time_saves
from pipeline.config import LaneConfigError, build_config
from pipeline.lane_configs.sft import Config


def _req(tmp_path: Path, **kw) -> TrainRequest:
    return TrainRequest(
        model="m", model_dir=tmp_path, output_dir=tmp_path / "out", records=[], max_steps=16, max_seq_len=64, **kw
    )


@pytest.mark.parametrize("args", [lambda r: sft_arguments(r, "cpu"), training_arguments], ids=["hf", "neuron"])
def test_both_trainers_save_every_n_steps_with_the_limit_or_not_at_all(tmp_path, args):
    off = args(_req(tmp_path))
    assert off["save_strategy"] == "no" and "save_steps" not in off
    on = args(_req(tmp_path, save_every_steps=4, save_total_limit=2, save_only_model=True))
    assert (on["save_strategy"], on["save_steps"], on["save_total_limit"], on["save_only_model"]) == (
        "steps",
        4,
        2,
        True,
    )


def test_the_tiny_profile_saves_mid_run_and_the_defaults_do_not():
    tiny, full = Config.for_profile("tiny"), Config.for_profile("full")
    assert tiny.save_every_steps and tiny.save_every_steps < tiny.steps and tiny.save_total_limit >= 1
    assert full.save_every_steps and full.save_every_steps < full.steps
    assert Config().save_every_steps is None


@pytest.mark.parametrize(
    "field, value",
    [("save_every_steps", 0), ("save_every_steps", -3), ("save_total_limit", 0), ("save_every_steps", 100_001)],
)
def test_a_bad_save_setting_is_refused_naming_the_field(field, value):
    with pytest.raises(LaneConfigError) as err:
        build_config(Config, "tiny", {field: value})
    assert field in str(err.value) and "\n" not in str(err.value)


def test_a_save_record_sums_the_checkpoint_and_says_whether_it_holds_the_training_state(tmp_path):
    ckpt = tmp_path / "_trainer" / "checkpoint-4"
    ckpt.mkdir(parents=True)
    (ckpt / "adapter_model.safetensors").write_bytes(b"a" * 100)
    (ckpt / "adapter_config.json").write_bytes(b"{}")
    row = checkpoint_record(4, 0.25, ckpt, tmp_path)
    assert (row["step"], row["save_s"], row["bytes"], row["files"], row["kind"], row["path"]) == (
        4,
        0.25,
        102,
        2,
        "adapter",
        "_trainer/checkpoint-4",
    )
    (ckpt / "optimizer.pt").write_bytes(b"o" * 10)
    assert checkpoint_record(4, 0.25, ckpt, tmp_path)["kind"] == "full_state"
    gone = checkpoint_record(8, 0.1, tmp_path / "nope", tmp_path)
    assert gone["bytes"] is None and gone["kind"] is None  # nothing there: NULL, never zero


def test_time_saves_times_the_trainers_own_save_call_alone(tmp_path):
    ticks = iter([10.0, 10.5, 20.0, 20.25])
    written = []

    class Trainer:
        state = SimpleNamespace(global_step=0)
        args = SimpleNamespace(output_dir=str(tmp_path / "_trainer"))

        def _save_checkpoint(self, model, trial):
            d = Path(self.args.output_dir) / f"checkpoint-{self.state.global_step}"
            d.mkdir(parents=True)
            (d / "w.bin").write_bytes(b"x" * 8)
            written.append(self.state.global_step)

    t, rows = Trainer(), []
    time_saves(t, tmp_path, rows, clock=lambda: next(ticks))
    for step in (4, 8):
        t.state.global_step = step
        t._save_checkpoint(None, None)
    assert written == [4, 8]
    assert [(r["step"], r["save_s"], r["bytes"]) for r in rows] == [(4, 0.5, 8), (8, 0.25, 8)]
    with pytest.raises(SaveTimingError, match="_save_checkpoint"):
        time_saves(object(), tmp_path, [])
