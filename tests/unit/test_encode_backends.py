"""What each backend runs of the encode lane (``pipeline.encoders.BACKEND_PATHS``), and a workload it cannot run
refused at plan time: one line naming the field, exit 2, nothing started."""

from __future__ import annotations

import json

import pytest

from control_plane.cli import main
from pipeline.encoders import (
    BACKEND_PATHS,
    EXPORT_ROUTES,
    FAMILY_MODALITIES,
    EncodeWorkload,
    backend_problems,
)

SPEECH = {"name": "speech", "modality": "speech_to_text", "model": "tiny-whisper", "batch_sizes": [1], "shapes": [1]}


def test_the_table_states_every_pair_on_every_backend():
    pairs = {(f, m) for f, ms in FAMILY_MODALITIES.items() for m in ms}
    assert set(BACKEND_PATHS) == {"cpu", "cuda", "neuron"}
    for backend in ("cpu", "cuda"):
        assert BACKEND_PATHS[backend] == {p: ("eager",) for p in pairs}
    neuron = BACKEND_PATHS["neuron"]
    assert set(neuron) == pairs and all("trace" in paths for paths in neuron.values())
    assert {p for p, paths in neuron.items() if "export" in paths} == set(EXPORT_ROUTES)
    assert ("whisper", "speech_to_text") not in EXPORT_ROUTES


def test_a_modality_without_the_asked_neuron_path_is_refused_naming_the_field():
    ws = [
        EncodeWorkload.model_validate({**SPEECH, "neuron": {"path": "trace"}}),
        EncodeWorkload.model_validate({**SPEECH, "name": "s2", "neuron": {"path": "export"}}),
        EncodeWorkload.model_validate(
            {
                "name": "t",
                "modality": "text_embedding",
                "model": "tiny-bert-embedding",
                "batch_sizes": [1],
                "shapes": [8],
                "neuron": {"path": "export"},
            }
        ),
    ]
    (line,) = backend_problems(ws, "neuron")
    assert line.startswith("encoders.1.modality: speech_to_text of tiny-whisper (whisper) has no neuron path 'export'")
    assert backend_problems(ws, "cpu") == [] and backend_problems(ws, "cuda") == []


@pytest.mark.parametrize("path,refused", [("export", True), ("auto", False)])
def test_plan_refuses_it_with_one_line_and_exit_2(tmp_path, capsys, path, refused):
    req = tmp_path / "req.json"
    encoders = [{**SPEECH, "neuron": {"path": path}}]
    req.write_text(json.dumps({"lanes": ["encode"], "lane_config": {"encode": {"encoders": encoders}}}))
    code = main(["plan", "--input", str(req)])  # the AWS plan: the inf2 box's neuron backend
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    if not refused:
        assert code == 0
        return
    assert code == 2 and len(err) == 1, err
    assert "encode: encoders.0.modality: speech_to_text of tiny-whisper (whisper) has no neuron path" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["req.json"]  # nothing started, nothing written


def test_the_lane_refuses_it_too_where_the_plan_could_not_tell_the_backend():
    from types import SimpleNamespace

    from agents.lanes.encode import run
    from pipeline.lane_configs.encode import Config

    config = Config(encoders=[{**SPEECH, "neuron": {"path": "export"}}])
    with pytest.raises(ValueError, match=r"^encoders\.0\.modality: speech_to_text of tiny-whisper"):
        run(SimpleNamespace(backend="neuron"), config)  # raises before the context is used
