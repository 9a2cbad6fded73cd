"""The live lane view of `neuronpipe run --local`."""

import json
import time

from rich.console import Console

from control_plane.local import LaneState, _read_progress, render


def _text(states):
    console = Console(width=120, record=True)
    console.print(render("run-1", states))
    return console.export_text()


def test_every_state_and_progress_is_shown():
    now = time.monotonic()
    states = [
        LaneState("provenance", "succeeded", now - 2, now),
        LaneState(
            "sft", "running", now, progress={"task": "train tiny-llama", "done": 3, "total": 16, "unit": "steps"}
        ),
        LaneState("merge", "running", now),
        LaneState("serve_sweep"),
        LaneState("precompile", "skipped", now, now, detail="no AOT compiler on cpu"),
        LaneState("quality", "failed", now, now, detail="RuntimeError: boom"),
    ]
    text = _text(states)
    for word in (
        "succeeded",
        "running",
        "waiting",
        "skipped",
        "failed",
        "train tiny-llama 3/16 steps",
        "starting",
        "no AOT compiler on cpu",
        "RuntimeError: boom",
        "run-1",
    ):
        assert word in text, word


def test_progress_file_is_read_incrementally_and_partial_lines_wait(tmp_path):
    path = tmp_path / "p.jsonl"
    state = LaneState("sft", "running")
    path.write_text(json.dumps({"task": "a", "done": 1, "total": 2}) + "\n" + '{"task": "b", "do')
    offset = _read_progress(path, 0, state)
    assert state.progress["task"] == "a"
    with open(path, "a") as fh:
        fh.write('ne": 2, "total": 2}\n')
    _read_progress(path, offset, state)
    assert state.progress == {"task": "b", "done": 2, "total": 2}
    assert _read_progress(tmp_path / "missing", 0, state) == 0
