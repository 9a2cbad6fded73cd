"""A request's predictions: refused in one ``field: reason`` line where the run could never score them (exit 2,
nothing started, in `plan`, `run --local --input` and `run --aws` alike), printed by `plan`."""

from __future__ import annotations

import json

import pytest

from control_plane.cli import main
from control_plane.models import RunRequestError, parse_request

LANES = ["provenance", "host_cpu"]


def request(*predictions: dict, **extra) -> dict:
    return {"lanes": LANES, "profile": "tiny", "predictions": list(predictions), **extra}


@pytest.mark.parametrize(
    ("prediction", "field", "reason"),
    [
        ({"lane": "serve_sweep", "expected": "works"}, "predictions.0.lane", "does not run lane serve_sweep"),
        (
            {"lane": "host_cpu", "expected": "works", "figure": {"metric": "tok_per_joule", "low": 1}},
            "predictions.0.figure.metric",
            "output_tok_s",
        ),
        (
            {"lane": "host_cpu", "expected": "works", "figure": {"metric": "wall_s", "low": 9, "high": 3}},
            "predictions.0.figure.high",
            "an inverted range",
        ),
        (
            {"lane": "host_cpu", "expected": "works", "figure": {"metric": "wall_s", "low": 3, "high": 3}},
            "predictions.0.figure.high",
            "an empty range",
        ),
        (
            {"lane": "host_cpu", "expected": "works", "figure": {"metric": "wall_s", "value": 3, "tolerance": 0}},
            "predictions.0.figure.tolerance",
            "an empty tolerance",
        ),
        (
            {"lane": "host_cpu", "expected": "works", "figure": {"metric": "wall_s", "value": 3, "tolerance": -1}},
            "predictions.0.figure.tolerance",
            "an inverted tolerance",
        ),
        (
            {"lane": "host_cpu", "expected": "works", "figure": {"metric": "wall_s", "low": 1, "value": 3}},
            "predictions.0.figure",
            "not both",
        ),
        (
            {"lane": "host_cpu", "expected": "works", "figure": {"metric": "wall_s", "concurrency": 4, "low": 1}},
            "predictions.0.figure",
            "serving metric",
        ),
        (
            {"lane": "host_cpu", "expected": "excluded", "figure": {"metric": "wall_s", "low": 1}},
            "predictions.0",
            "only when the target works",
        ),
        ({"lane": "host_cpu", "cell": "c01", "expected": "works"}, "predictions.0.cell", "no matrix"),
        ({"lane": "host_cpu", "expected": "maybe"}, "predictions.0.expected", "'works', 'excluded' or 'fails'"),
    ],
)
def test_a_prediction_the_run_could_not_score_is_refused_naming_its_field(prediction, field, reason):
    with pytest.raises(RunRequestError) as exc:
        parse_request(request(prediction))
    [line] = str(exc.value).splitlines()
    assert line.startswith(f"{field}: ") and reason in line


def test_a_server_config_its_lane_does_not_boot_is_refused_at_plan_time(tmp_path, capsys):
    path = tmp_path / "run.json"
    body = {
        "lanes": ["provenance", "serve_sweep"],
        "predictions": [{"lane": "serve_sweep", "server_config": "Z", "expected": "works"}],
    }
    path.write_text(json.dumps(body))
    assert main(["plan", "--local", "--input", str(path)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "predictions.0.server_config: lane serve_sweep does not boot 'Z'" in line


@pytest.mark.parametrize("command", ["plan", "plan --local", "run --local", "run --aws"])
def test_every_entry_point_refuses_in_one_line_and_starts_nothing(tmp_path, capsys, monkeypatch, command):
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    path = tmp_path / "run.json"
    path.write_text(
        json.dumps(
            request(
                {"lane": "host_cpu", "expected": "works", "figure": {"metric": "wall_s", "value": 1, "tolerance": 0}}
            )
        )
    )
    results = tmp_path / "results"
    argv = [*command.split(), "--input", str(path)]
    if command.startswith("run"):
        argv += ["--results", str(results), "--no-live"]
    assert main(argv) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "predictions.0.figure.tolerance: an empty tolerance" in line
    assert not results.exists()


def test_plan_prints_each_prediction_target_expected_range_and_note(tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(
        json.dumps(
            request(
                {"lane": "provenance", "expected": "works", "note": "it only reads facts"},
                {"lane": "host_cpu", "expected": "works", "figure": {"metric": "wall_s", "value": 10, "tolerance": 5}},
            )
        )
    )
    assert main(["plan", "--local", "--input", str(path)]) == 0
    out = capsys.readouterr().out
    table = out[out.index("predictions (2, sha256:") :]
    rows = [line for line in table.splitlines() if line.startswith("│")]
    assert [[c.strip() for c in r.strip("│").split("│")] for r in rows] == [
        ["0", "provenance", "works", "", "it only reads facts"],
        ["1", "host_cpu", "works", "wall_s 5–15 s", ""],
    ]


def test_a_matrix_cell_is_one_of_the_matrix_s_cells_running_the_lane():
    matrix = {
        "lanes": ["provenance", "serve_sweep"],
        "server_configs": ["A"],
        "models": ["llama-3.1-8b-instruct"],
        "matrix": {"instance_types": ["inf2.xlarge", "g6.xlarge"]},
    }
    ok = parse_request({**matrix, "predictions": [{"lane": "serve_sweep", "cell": "c02", "expected": "works"}]})
    assert ok.predictions[0].target == "serve_sweep@c02"
    with pytest.raises(RunRequestError) as exc:
        parse_request({**matrix, "predictions": [{"lane": "serve_sweep", "cell": "c03", "expected": "works"}]})
    assert str(exc.value) == "predictions.0.cell: c03 is not a cell of the matrix (c01, c02)"
