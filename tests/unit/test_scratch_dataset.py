"""The from_scratch lane's inputs: the generator is seeded and learnable-shaped; the reader refuses a malformed
.npz, and the config a bad setting, with one line naming the file or field; the loop's fixed shapes and its neuron
device branch."""

from __future__ import annotations

import io

import numpy as np
import pytest

from agents.training.vision.dataset import DatasetError, glyphs, parse, write_npz


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _good(**over):
    a = glyphs(24, 12, 8, 3, seed=5)
    a.update(over)
    return a


def test_the_generator_is_seeded_and_its_classes_differ():
    a, b = glyphs(60, 30, 12, 4, seed=1), glyphs(60, 30, 12, 4, seed=1)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["x_train"], glyphs(60, 30, 12, 4, seed=2)["x_train"])
    assert a["x_train"].shape == (60, 12, 12) and a["x_train"].dtype == np.uint8 and int(a["num_classes"]) == 4
    assert set(np.unique(a["y_train"])) <= set(range(4))
    means = [a["x_train"][a["y_train"] == k].mean(axis=0) for k in range(4)]
    assert min(np.abs(means[i] - means[j]).mean() for i in range(4) for j in range(i + 1, 4)) > 5  # distinct glyphs
    rgb = glyphs(10, 5, 8, 2, channels=3, seed=0)
    assert rgb["x_train"].shape == (10, 8, 8, 3)


def test_a_written_set_reads_back_with_its_hash(tmp_path):
    path = write_npz(tmp_path / "g.npz", _good())
    data = parse(path.read_bytes(), str(path))
    assert data.image_shape == (8, 8, 1) and data.num_classes == 3 and len(data.y_test) == 12
    assert len(data.sha256) == 64 and data.bytes == path.stat().st_size


@pytest.mark.parametrize(
    "arrays, field, why",
    [
        (_good(y_train=np.full(24, 3)), "y_train", "out of range"),
        (_good(y_test=np.full(12, -1)), "y_test", "out of range"),
        (_good(y_train=np.zeros(24, np.float32)), "y_train", "integers"),
        (_good(x_test=np.zeros((12, 9, 8), np.uint8)), "x_test", "mixed shapes"),
        (_good(x_train=np.zeros((0, 8, 8), np.uint8), y_train=np.zeros(0, np.int64)), "x_train", "empty split"),
        (_good(x_train=np.zeros((24, 8, 8), np.float32)), "x_train", "uint8"),
        (_good(y_train=np.zeros(23, np.int64)), "y_train", "one per image"),
        (_good(num_classes=np.int64(1)), "num_classes", ">= 2"),
        ({k: v for k, v in _good().items() if k != "y_test"}, "y_test", "missing"),
    ],
    ids=[
        "label-high",
        "label-negative",
        "float-labels",
        "mixed-shapes",
        "empty",
        "float-pixels",
        "count",
        "one-class",
        "missing-field",
    ],
)
def test_a_malformed_set_is_one_line_naming_the_file_and_the_field(arrays, field, why):
    with pytest.raises(DatasetError) as err:
        parse(_npz(**arrays), "s3://b/d.npz")
    line = str(err.value)
    assert line.startswith("dataset s3://b/d.npz: ") and f": {field}: " in line and why in line and "\n" not in line


def test_ragged_images_and_non_archives_are_refused():
    ragged = np.empty(2, dtype=object)
    ragged[0], ragged[1] = np.zeros((8, 8), np.uint8), np.zeros((9, 8), np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **{**_good(), "x_train": ragged})  # pickled: refused on read
    with pytest.raises(DatasetError, match="x_train: images of mixed shapes"):
        parse(buf.getvalue(), "d.npz")
    with pytest.raises(DatasetError, match="not a .npz archive"):
        parse(b"hello", "d.npz")


def test_fixed_shapes_drop_the_partial_training_batch_and_pad_the_last_test_batch():
    import torch

    from agents.training.vision.loop import eval_batches, train_batches

    batches = train_batches(10, 4, torch.Generator().manual_seed(0))
    assert [len(b) for b in batches] == [4, 4] and len(set(torch.cat(batches).tolist())) == 8
    evals = eval_batches(10, 4)
    assert [len(i) for i, _ in evals] == [4, 4, 4] and [n for _, n in evals] == [4, 4, 2]
    assert evals[-1][0][:2].tolist() == [8, 9]  # the real images first; the padding is not scored


def test_on_neuron_the_loop_runs_on_the_xla_device_and_waits_for_each_step(monkeypatch):
    import sys
    import types

    from agents.training.vision.loop import device_for

    calls = []
    xm = types.SimpleNamespace(
        xla_device=lambda: "xla:0",
        mark_step=lambda: calls.append("mark_step"),
        wait_device_ops=lambda: calls.append("wait"),
    )
    core = types.ModuleType("torch_xla.core")
    core.xla_model = xm
    monkeypatch.setitem(sys.modules, "torch_xla", types.ModuleType("torch_xla"))
    monkeypatch.setitem(sys.modules, "torch_xla.core", core)
    monkeypatch.setitem(sys.modules, "torch_xla.core.xla_model", xm)
    device = device_for("neuron")
    assert (device.kind, device.torch_device) == ("xla", "xla:0")
    device.step_end()
    assert calls == ["mark_step", "wait"]
    assert device_for("cpu").kind == "cpu"


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"models": ["mlp", "resnet"]}, "models"),
        ({"vit_heads": 3}, "vit_heads"),
        ({"vit_patch": 5}, "vit_patch"),
        ({"epochs": 0}, "epochs"),
        ({"generated_train": 0}, "generated_train"),
        ({"cnn_channels": [16, 0]}, "cnn_channels"),
    ],
)
def test_a_bad_from_scratch_setting_is_refused_naming_the_field(overrides, field):
    from pipeline.config import LaneConfigError, build_config
    from pipeline.lane_configs.from_scratch import Config

    with pytest.raises(LaneConfigError) as err:
        build_config(Config, "tiny", overrides)
    assert field in str(err.value) and "\n" not in str(err.value)
