"""The accuracy lane at plan time: its Config, the bad inputs refused in one line with exit 2 (unknown task, task file
that does not parse, missing dataset path, sample limit <= 0, a log-likelihood task where the target serves no
prompt logprobs), its timeout from its time budget, its cost in `neuronpipe plan`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from control_plane.cli import main
from control_plane.lane_configs import LaneConfigInvalidError
from control_plane.local_plan import plan_local
from control_plane.models import parse_request
from control_plane.plan import plan_run
from control_plane.request_configs import configured_lanes, lane_timeout_s
from control_plane.timetable import DEFAULT_DURATIONS_S
from pipeline.accuracy import expected_seconds
from pipeline.lane_configs.accuracy import TIMEOUT_MARGIN_S, Config
from pipeline.lanes import get_lane
from pipeline.matrix import MATRIX_LANES
from pipeline.servers import NEURON_BOX, PROMPT_LOGPROBS, ServerVariantError, ServingTarget

CPU = ServingTarget("cpu", "neuronpipe", 1)
VLLM_CPU = ServingTarget("cpu", "vllm-cpu", 1)


@pytest.fixture(autouse=True)
def no_aws(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "none")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "none")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("NEURONPIPE_BACKEND", "cpu")  # the local plan's target: the CPU server (neuronpipe)
    monkeypatch.delenv("NEURONPIPE_CPU_SERVER", raising=False)
    monkeypatch.delenv("NEURONPIPE_VLLM_CPU_PYTHON", raising=False)


def _local(accuracy: dict, target=CPU):
    request = parse_request({"lanes": ["accuracy"], "profile": "tiny", "lane_config": {"accuracy": accuracy}})
    return plan_local(request, run_id="r1", results_uri="results", target=target)


def _refused(accuracy: dict, target=CPU) -> list[str]:
    with pytest.raises(LaneConfigInvalidError) as info:
        _local(accuracy, target)
    return str(info.value).splitlines()


def test_the_lane_is_an_inf2_serving_lane_after_quality_that_needs_merge():
    spec = get_lane("accuracy")
    assert spec.boxes == ("inf2",) and spec.order == 92 and spec.needs == ("merge",) and spec.timeout_s == 6 * 3600
    assert get_lane("quality").order < spec.order < get_lane("finetune_serve").order
    assert "accuracy" in MATRIX_LANES


def test_prompt_logprobs_per_target():
    assert (
        CPU.prompt_logprobs,
        VLLM_CPU.prompt_logprobs,
        ServingTarget("cuda").prompt_logprobs,
        NEURON_BOX.prompt_logprobs,
    ) == (False, True, True, False)
    assert set(PROMPT_LOGPROBS) == {"neuronpipe", "vllm-cpu", "cuda", "neuron"}


def test_profiles_and_a_variant_named_like_the_pair():
    tiny, full = Config.for_profile("tiny"), Config.for_profile("full")
    assert (tiny.sample_limit, full.sample_limit, tiny.tasks, full.model) == (16, 250, None, "llama-3.1-8b-instruct")
    assert full.time_budget_s + TIMEOUT_MARGIN_S == 6 * 3600
    with pytest.raises(ServerVariantError, match="'finetune' names the base model's pair"):
        Config(server_configs={"A": None, "finetune": {"base": "A"}})


def test_the_default_local_plan_is_accepted_and_np_choice_is_left_to_servers_with_prompt_logprobs(monkeypatch):
    assert _local({}).configs.get("accuracy") is None  # nothing to say: the defaults
    # the tiny profile's int8 variant follows the local server (serve_sweep.tiny_int8_variants): vllm-cpu has none
    monkeypatch.setenv("NEURONPIPE_CPU_SERVER", "vllm-cpu")
    assert _local({"tasks": ["np_choice"]}, VLLM_CPU).configs["accuracy"] == {"tasks": ["np_choice"]}


@pytest.mark.parametrize(
    "accuracy, line",
    [
        (
            {"tasks": ["nope"]},
            "accuracy.tasks: unknown task 'nope'; known tasks: np_arith, np_classify, np_facts, np_choice (shipped)",
        ),
        (
            {"tasks": ["np_arith", "np_choice"]},
            "accuracy.tasks: np_choice is a log-likelihood task (multiple_choice) and "
            "the target's server (neuronpipe) returns no prompt logprobs",
        ),
        ({"sample_limit": 0}, "accuracy.sample_limit: must be between 1 and 1000000, got 0"),
        ({"sample_limit": -2}, "accuracy.sample_limit: must not be negative, got -2"),
        (
            {"tasks": ["gsm8k"]},
            "accuracy.tasks: gsm8k is a standard task and reads its data from a copy of its dataset",
        ),
        (
            {"tasks": ["gsm8k"], "datasets": {"gsm8k": "/nowhere/gsm8k"}},
            "accuracy.datasets.gsm8k: /nowhere/gsm8k does not exist (expected /nowhere/gsm8k/test.jsonl",
        ),
    ],
)
def test_bad_input_is_one_line(accuracy, line):
    (got,) = _refused(accuracy)
    assert got.startswith(line), got


def test_a_task_file_that_does_not_parse_is_refused_at_plan_time(tmp_path):
    (tmp_path / "mine.yaml").write_text("task: mine\noutput_type: [generate_until\n")
    (got,) = _refused({"tasks": ["np_arith"], "task_dir": str(tmp_path)})
    assert got.startswith(f"accuracy.task_dir: {tmp_path / 'mine.yaml'}: does not parse (")


def test_a_task_dir_that_does_not_exist_locally(tmp_path):
    (got,) = _refused({"tasks": ["mine"], "task_dir": str(tmp_path / "none")})
    assert got == f"accuracy.task_dir: {tmp_path / 'none'} is not a directory"


def test_the_aws_plan_refuses_np_choice_on_the_neuron_box_and_leaves_s3_paths_to_the_box():
    bad = parse_request(
        {"lanes": ["accuracy"], "profile": "full", "lane_config": {"accuracy": {"tasks": ["np_choice"]}}}
    )
    with pytest.raises(
        LaneConfigInvalidError,
        match=r"accuracy\.tasks: np_choice .* server \(neuron vLLM\) returns "
        "no prompt logprobs",
    ):
        plan_run(bad, run_id="r1", results_uri="s3://b/results")
    ok = parse_request(
        {
            "lanes": ["accuracy"],
            "profile": "full",
            "lane_config": {
                "accuracy": {
                    "tasks": ["np_arith", "gsm8k", "custom"],
                    "datasets": {"gsm8k": "s3://b/data/gsm8k"},
                    "task_dir": "s3://b/tasks",
                }
            },
        }
    )
    plan = plan_run(ok, run_id="r1", results_uri="s3://b/results")
    (step,) = [s for s in plan.lane_steps if s.lane == "accuracy"]
    assert step.config["datasets"] == {"gsm8k": "s3://b/data/gsm8k"}


def test_the_lanes_timeout_follows_its_time_budget():
    spec = get_lane("accuracy")
    assert lane_timeout_s(spec, "full", None) == 6 * 3600
    assert lane_timeout_s(spec, "tiny", {"time_budget_s": 900.0}) == 900 + TIMEOUT_MARGIN_S
    plan = plan_run(
        parse_request(
            {"lanes": ["accuracy"], "profile": "full", "lane_config": {"accuracy": {"time_budget_s": 3600.0}}}
        ),
        run_id="r1",
        results_uri="s3://b/results",
    )
    (step,) = [s for s in plan.lane_steps if s.lane == "accuracy"]
    assert step.timeout_s == 3600 + TIMEOUT_MARGIN_S and step.execution_timeout == [str(3600 + TIMEOUT_MARGIN_S)]


def test_request_models_and_variants_flow_into_the_lane():
    request = parse_request(
        {
            "lanes": ["accuracy"],
            "models": ["qwen3-8b"],
            "server_configs": {"A": None, "A-fp8": {"base": "A", "kv_cache_dtype": "fp8"}},
        }
    )
    _, configs = configured_lanes(request, NEURON_BOX)
    assert configs["accuracy"] == {
        "model": "qwen3-8b",
        "server_configs": {"A": None, "A-fp8": {"base": "A", "kv_cache_dtype": "fp8"}},
    }


def test_the_schedule_default_is_the_cost_model_of_the_profile_default():
    seconds, basis = DEFAULT_DURATIONS_S[("full", "accuracy")]
    cost = expected_seconds(Config.for_profile("full"), "full", NEURON_BOX, boot_s=548.0)
    assert seconds == round(cost.seconds, 1) and basis.startswith(
        "samples x expected latency (family neuron): 120 s to start + 2 evaluation(s) x (380 samples of np_arith, "
        "np_classify, np_facts"
    )
    assert DEFAULT_DURATIONS_S[("tiny", "accuracy")][0] > 0


def _write(tmp_path: Path, request: dict) -> str:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(request))
    return str(path)


def test_neuronpipe_plan_shows_the_lanes_cost_and_exits_2_on_a_bad_task(tmp_path, capsys):
    assert main(["plan", "--input", _write(tmp_path, {"preset": "full", "profile": "full"})]) == 0
    out = capsys.readouterr().out
    assert (
        "accuracy cost: expected 0:24:21 = 120 s to start + 2 evaluation(s) x (380 samples of np_arith, "
        "np_classify, np_facts"
    ) in out
    bad = _write(tmp_path, {"lanes": ["accuracy"], "lane_config": {"accuracy": {"tasks": ["nope"]}}})
    assert main(["plan", "--input", bad]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"invalid request {bad}: accuracy.tasks: unknown task 'nope'")
    assert (
        main(
            [
                "plan",
                "--local",
                "--input",
                _write(tmp_path, {"lanes": ["accuracy"], "lane_config": {"accuracy": {"tasks": ["np_choice"]}}}),
            ]
        )
        == 2
    )
    assert "the target's server (neuronpipe) returns no prompt logprobs" in capsys.readouterr().err
