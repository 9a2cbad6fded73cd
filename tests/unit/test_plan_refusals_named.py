"""What a plan refuses, it refuses naming what the request wrote (never a default it did not write), and what
would otherwise pass silently (a workload picked twice, a local file that is not there, an adapter source or a
variant env or argument that reaches outside the box's rules, a string for an integer, a limits search without
end, an accuracy task_dir that shadows or escapes, a run id the control plane would refuse) is refused as
``field: reason``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from control_plane.lane_configs import LaneConfigInvalidError
from control_plane.local_plan import plan_local
from control_plane.models import RunRequest
from control_plane.plan import plan_run
from pipeline.servers import ServerVariantError, check_server_configs
from tests.support.errors import one_line_error


def _local(tmp_path: Path, request: dict):
    return plan_local(RunRequest.model_validate(request), run_id="r", results_uri=str(tmp_path / "results"))


def _refusal(tmp_path: Path, request: dict) -> str:
    with pytest.raises(LaneConfigInvalidError) as err:
        _local(tmp_path, request)
    return str(err.value)


TINY_SWEEP = {"lanes": ["serve_sweep"], "profile": "tiny"}


# ---- the tiny profile's defaults never refuse a request that did not write them -----------------------------
@pytest.mark.parametrize(
    "server_configs",
    [["B"], {"X": {"base": "B"}}, {"B": {}}, {"X": {"base": "A"}}],
    ids=["B", "X-of-B", "B-map", "X-of-A"],
)
def test_the_tiny_profiles_default_workloads_never_refuse_a_request_that_did_not_write_them(tmp_path, server_configs):
    _local(tmp_path, {**TINY_SWEEP, "server_configs": server_configs})


def test_a_written_workload_pinned_to_a_config_the_lane_does_not_boot_is_still_refused(tmp_path):
    text = _refusal(
        tmp_path, {**TINY_SWEEP, "server_configs": ["B"], "workloads": {"w": {"input": 16, "configs": ["A"]}}}
    )
    assert text == "serve_sweep: workloads.w.configs: 'A' is not a server config of this lane (B)"


def test_a_workload_pinned_to_a_catalogue_config_runs_on_its_variants_as_the_box_runs_it(tmp_path):
    _local(
        tmp_path,
        {
            **TINY_SWEEP,
            "server_configs": {"X": {"base": "A", "max_num_seqs": 2}},
            "workloads": {"w": {"input": 16, "configs": ["A"]}},
        },
    )


# ---- a lane picks a workload once ---------------------------------------------------------------------------
def test_a_lane_picking_the_same_workload_twice_is_refused(tmp_path):
    text = _refusal(
        tmp_path,
        {**TINY_SWEEP, "workloads": {"w": {"input": 16}}, "lane_config": {"serve_sweep": {"workloads": ["w", "w"]}}},
    )
    assert text == "serve_sweep: workloads: 'w' is picked twice"


# ---- a local plan checks the local files its workloads read -------------------------------------------------
@pytest.mark.parametrize(
    "workload, field",
    [
        ({"arrival": {"kind": "trace", "path": "{missing}"}}, "workloads.w.arrival.path"),
        ({"prompts": {"source": "jsonl", "path": "{missing}"}}, "workloads.w.prompts.path"),
        ({"prompts": {"source": "sharegpt", "path": "{dir}"}}, "workloads.w.prompts.path"),
        ({"prompts": {"source": "hf", "path": "{file}"}}, "workloads.w.prompts.path"),
    ],
    ids=["trace-missing", "dataset-missing", "dataset-dir", "hf-file"],
)
def test_a_local_plan_refuses_a_workload_file_that_is_not_there(tmp_path, workload, field):
    (tmp_path / "a-dir").mkdir()
    (tmp_path / "a-file.jsonl").write_text('{"prompt": "x"}\n')
    names = {
        "missing": str(tmp_path / "no-such.jsonl"),
        "dir": str(tmp_path / "a-dir"),
        "file": str(tmp_path / "a-file.jsonl"),
    }
    spec = json.loads(
        json.dumps(workload)
        .replace("{missing}", names["missing"])
        .replace("{dir}", names["dir"])
        .replace("{file}", names["file"])
    )
    text = _refusal(tmp_path, {**TINY_SWEEP, "workloads": {"w": spec}})
    assert text.startswith(f"serve_sweep: {field}: "), text
    assert "\n" not in text
    # the AWS plan leaves a path on the box to the box
    plan_run(
        RunRequest.model_validate({**TINY_SWEEP, "workloads": {"w": spec}}), run_id="r", results_uri="s3://b/results"
    )


def test_a_local_plan_refuses_the_missing_file_of_a_single_workload_lane(tmp_path):
    missing = str(tmp_path / "no-such.jsonl")
    text = _refusal(
        tmp_path,
        {
            "lanes": ["sustained"],
            "profile": "tiny",
            "workloads": {"w": {"prompts": {"source": "jsonl", "path": missing}}},
            "lane_config": {"sustained": {"workload": "w"}},
        },
    )
    assert text.startswith("sustained: workloads.w.prompts.path: cannot read "), text


# ---- LoRA sources, env and extra_args of a variant ----------------------------------------------------------
def _variant(**fields):
    return check_server_configs({"X": {"base": "A", **fields}})


@pytest.mark.parametrize(
    "source, reason",
    [
        ("s3://bucket/adapters/..", "a '..' part"),
        ("s3://bucket/adapters/./x", "a '.' part"),
        ("s3://bucket//x", "an empty part"),
        ("s3://bucket/a\nb/x.tar.gz", "a control character"),
        ("../../etc", "a '..' part"),
        ("adapters/../../etc", "a '..' part"),
        ("/tmp/a\rb", "a control character"),
    ],
)
def test_an_adapter_source_that_escapes_or_breaks_a_line_is_refused(source, reason):
    message = one_line_error(ServerVariantError, lambda: _variant(lora={"adapters": {"a": source}}))
    assert message.startswith("server_configs.X.lora.adapters.a: ") and reason in message, message


@pytest.mark.parametrize(
    "name",
    [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "DYLD_INSERT_LIBRARIES",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONWARNINGS",
        "PYTHONBREAKPOINT",
        "BASH_ENV",
        "ENV",
        "PATH",
        "GLIBC_TUNABLES",
        "GCONV_PATH",
        "PERL5OPT",
        "NODE_OPTIONS",
        "VLLM_LOGGING_CONFIG_PATH",
    ],
)
def test_an_env_name_that_hijacks_the_loader_or_an_interpreter_is_refused(name):
    message = one_line_error(ServerVariantError, lambda: _variant(env={name: "/tmp/x"}))
    assert message.startswith(f"server_configs.X.env.{name}: "), message


def test_runtime_knobs_stay_allowed_in_env():
    _variant(
        env={
            "NEURON_RT_VISIBLE_CORES": "0",
            "OMP_NUM_THREADS": "2",
            "VLLM_CPU_OMP_THREADS_BIND": "0-1",
            "MALLOC_ARENA_MAX": "2",
            "X": "1",
        }
    )


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--host", "0.0.0.0"], "--host"),
        (["--host=0.0.0.0"], "--host"),
        (["--hos", "0.0.0.0"], "--host"),
        (["--port", "80"], "--port"),
        (["--model", "other/model"], "--model"),
        (["--served-model-name", "x"], "--served-model-name"),
        (["--max-model-len", "999"], "--max-model-len"),
        (["--max_model_len=999"], "--max-model-len"),
        (["--max-num-seqs", "3"], "--max-num-seqs"),
        (["--tensor-parallel-size", "8"], "--tensor-parallel-size"),
        (["-tp", "8"], "--tensor-parallel-size"),
        (["--kv-cache-dtype", "fp8"], "--kv-cache-dtype"),
        (["--no-enable-prefix-caching"], "--enable-prefix-caching"),
        (["--enable-lora"], "--enable-lora"),
        (["--lora-modules", "a=/x"], "--lora-modules"),
        (["--speculative-config", "{}"], "--speculative-config"),
    ],
)
def test_extra_args_may_not_rebind_the_server_or_contradict_a_declared_field(args, flag):
    message = one_line_error(ServerVariantError, lambda: _variant(extra_args=args))
    assert message.startswith(f"server_configs.X.extra_args: {flag} ") or message.startswith(
        f"server_configs.X.extra_args: {args[0].split('=')[0]} "
    ), message
    assert flag in message


def test_extra_args_the_launcher_does_not_own_stay_allowed():
    _variant(extra_args=["--enforce-eager", "--swap-space", "4", "--max-num-batched-tokens=512"])


# ---- matrix: integers are integers --------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["4", 4.0, True])
def test_a_matrix_max_concurrency_is_a_strict_integer(value):
    from pipeline.matrix import MatrixError, parse_matrix

    message = one_line_error(
        MatrixError, lambda: parse_matrix({"instance_types": ["inf2.xlarge"], "max_concurrency": value})
    )
    assert message.startswith("matrix.max_concurrency: "), message


# ---- limits searches ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "search, start",
    [
        ({"kind": "max_model_len", "good": 1, "bad": 10**30}, "searches[0].bad: at most 1,048,576"),
        ({"kind": "max_num_seqs", "good": 1, "bad": 10**9}, "searches[0].bad: at most 4,096"),
        ({"kind": "max_model_len", "good": 16, "bad": 64, "at": 10**9}, "searches[0].at: at most 4,096"),
        ({"kind": "max_model_len", "good": 16, "bad": 64, "precision": 10**9}, "searches[0].precision: at most 48"),
    ],
)
def test_a_limits_search_without_end_is_refused(search, start):
    from pipeline.limits import LimitSearchError, check_searches

    message = one_line_error(LimitSearchError, lambda: check_searches([search]))
    assert message.startswith(start), message


def test_a_train_limits_search_is_bounded_by_the_training_lengths():
    from pipeline.limits import TRAINING_KINDS, LimitSearchError, check_searches

    message = one_line_error(
        LimitSearchError,
        lambda: check_searches([{"kind": "train_seq_len", "good": 64, "bad": 10**12}], kinds=TRAINING_KINDS),
    )
    assert message.startswith("searches[0].bad: at most 131,072"), message


def test_the_same_limits_search_twice_is_refused():
    from pipeline.limits import LimitSearchError, check_searches

    same = {"kind": "max_model_len", "good": 16, "bad": 64}
    message = one_line_error(LimitSearchError, lambda: check_searches([same, {**same, "bad": 128}]))
    assert message == "searches[1]: searches max_model_len at the base config's max_num_seqs again (searches[0])"
    check_searches([same, {**same, "at": 2}])


# ---- accuracy task_dir ---------------------------------------------------------------------------------------
TASK = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "Q: {{{{question}}}}\\nA:"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: exact_match
"""


def _tasks(tmp_path: Path, name: str = "mine", data: str = "q.jsonl", rows: str | None = None) -> Path:
    d = tmp_path / "tasks"
    d.mkdir(exist_ok=True)
    (d / f"{name}.yaml").write_text(TASK.format(name=name, data=data))
    if rows is not None:
        (d / "q.jsonl").write_text(rows)
    return d


def _resolve(**kw):
    from agents.accuracy.taskfiles import scan_task_dir
    from pipeline.accuracy import resolve_tasks
    from pipeline.lane_configs.accuracy import Config

    return resolve_tasks(Config(**kw), scan=scan_task_dir).problems


ROW = json.dumps({"question": "1+1?", "answer": "2"}) + "\n"


def test_a_task_dir_yaml_shadowing_a_shipped_task_is_refused(tmp_path):
    d = _tasks(tmp_path, name="np_arith", rows=ROW)
    (line,) = _resolve(tasks=["np_arith"], task_dir=str(d))
    assert line == (
        f"task_dir: {d / 'np_arith.yaml'} defines np_arith, the name of a shipped task (the shipped one "
        "would run, not this file): rename it"
    )


def test_a_task_dir_data_file_outside_the_task_dir_is_refused(tmp_path):
    d = _tasks(tmp_path, data="../../../../../../etc/passwd")
    lines = _resolve(tasks=["mine"], task_dir=str(d))
    assert lines and lines[0].startswith(
        f"task_dir: {d / 'mine.yaml'}: data_files ../../../../../../etc/passwd resolves outside the task_dir {d}"
    ), lines


def test_an_empty_dataset_file_is_refused(tmp_path):
    d = _tasks(tmp_path, rows="")
    (line,) = _resolve(tasks=["mine"], task_dir=str(d))
    assert line == f"tasks: mine ({d / 'mine.yaml'}): its dataset file {d / 'q.jsonl'} is empty"
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "test.jsonl").write_text("")
    (line,) = _resolve(tasks=["gsm8k"], num_fewshot=0, datasets={"gsm8k": str(tmp_path / "g")})
    assert line.startswith(f"datasets.gsm8k: {tmp_path / 'g'}/test.jsonl is empty"), line


@pytest.mark.parametrize(
    "kw, start",
    [
        ({"tasks": ["custom"], "task_dir": "s3://"}, "task_dir: s3:// names no bucket"),
        ({"tasks": ["custom"], "task_dir": "s3:///tasks"}, "task_dir: s3:///tasks names no bucket"),
        ({"tasks": ["gsm8k"], "datasets": {"gsm8k": "s3://"}}, "datasets.gsm8k: s3:// names no bucket"),
    ],
)
def test_an_s3_uri_without_a_bucket_is_refused_at_plan_time(kw, start):
    from pipeline.accuracy import resolve_tasks
    from pipeline.lane_configs.accuracy import Config

    problems = resolve_tasks(Config(**kw)).problems
    assert problems and problems[0].startswith(start), problems


def test_a_task_dir_data_file_on_s3_without_a_bucket_is_refused(tmp_path):
    d = _tasks(tmp_path, data="s3:///q.jsonl")
    (line,) = _resolve(tasks=["mine"], task_dir=str(d))
    assert line == f"tasks: mine ({d / 'mine.yaml'}): its dataset file s3:///q.jsonl names no bucket"


# ---- run ids: one rule ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "run_id", ["a" * 81, "caf\u00e9", "r\u0663", "x.y", "r\n"], ids=["81", "e-acute", "arabic-3", "dot", "newline"]
)
def test_every_run_id_check_is_the_control_planes_rule(run_id):
    from analytics.store import validate_component
    from control_plane.run_ids import RunIdError, check_run_id

    with pytest.raises(RunIdError):
        check_run_id(run_id)
    with pytest.raises(ValueError):
        validate_component("run_id", run_id)
    with pytest.raises(ValueError):
        RunRequest(run_id=run_id)


def test_run_lane_refuses_a_run_id_the_control_plane_would_refuse(tmp_path, capsys):
    from agents.__main__ import main

    code = main(["run-lane", "provenance", "--run-id", "a" * 81, "--results", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "invalid run_id" in err and not (tmp_path / "r").exists(), err
