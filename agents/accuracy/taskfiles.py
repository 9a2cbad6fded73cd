"""lm-eval task files: read (plan time: PyYAML only, no lm-eval), scanned by name, their data pointed at local copies.

A task YAML's ``dataset_kwargs.data_files`` relative to the YAML is resolved against the YAML's directory (lm-eval
itself would resolve it against the working directory). A standard task (``pipeline.accuracy.STANDARD_TASKS``)
keeps lm-eval's own definition with its ``dataset_path`` replaced by the local split files of the directory the
lane names (``<split>.jsonl`` or ``<split>.parquet``). An ``s3://`` directory is copied into the lane's work
directory first (:func:`fetch_s3_dir`).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.accuracy import SPLIT_FORMATS, STANDARD_TASKS, StandardTask, TaskFile, find_split, needs_fewshot

if TYPE_CHECKING:  # pragma: no cover
    from mypy_boto3_s3 import S3Client

SHIPPED_DIR = Path(__file__).resolve().parent / "tasks"
FILE_DATASETS = {"json", "csv", "parquet", "text", "arrow"}  # dataset_path values datasets reads from data_files


class TaskFileError(ValueError):
    """A task file that does not parse or cannot be run here; the message is one line naming the file."""


def _loader() -> Any:
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    # lm-eval's `!function module.name`: kept as text here (lm-eval resolves it when the task runs)
    Loader.add_constructor("!function", lambda loader, node: f"!function {loader.construct_scalar(node)}")
    return Loader


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def read_task_yaml(path: str | Path, _seen: frozenset[Path] = frozenset()) -> dict[str, Any]:
    """A task YAML as a dict, its ``include``s merged first (as lm-eval merges them); TaskFileError in one line."""
    import yaml

    p = Path(path).resolve()
    if p in _seen:
        raise TaskFileError(f"{p}: include cycle")
    try:
        cfg = yaml.load(p.read_text(encoding="utf-8"), Loader=_loader())  # a SafeLoader subclass
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise TaskFileError(f"{p}: does not parse ({_one_line(exc)})") from exc
    if not isinstance(cfg, dict):
        raise TaskFileError(f"{p}: does not parse as a task (a YAML mapping), got {type(cfg).__name__}")
    includes = cfg.pop("include", None)
    merged: dict[str, Any] = {}
    for inc in includes if isinstance(includes, list) else [includes] if includes else []:
        merged.update(read_task_yaml(p.parent / str(inc), _seen | {p}))
    merged.update(cfg)
    return merged


def local_data_files(cfg: dict[str, Any], base: Path) -> dict[str, Any]:
    """``cfg`` with its ``dataset_kwargs.data_files`` (a path, a list, or a map of split -> path or list) resolved
    against ``base`` where relative; a config reading no file dataset is returned as it is."""
    kwargs = cfg.get("dataset_kwargs") or {}
    files = kwargs.get("data_files")
    if cfg.get("dataset_path") not in FILE_DATASETS or files is None:
        return cfg

    def fix(v: Any) -> Any:
        if isinstance(v, list):
            return [fix(x) for x in v]
        text = str(v)
        return text if text.startswith(("s3://", "/")) or "://" in text else str((base / text).resolve())

    out = copy.copy(cfg)
    out["dataset_kwargs"] = {
        **kwargs,
        "data_files": {k: fix(v) for k, v in files.items()} if isinstance(files, dict) else fix(files),
    }
    return out


def data_file_paths(cfg: dict[str, Any]) -> list[str]:
    files = (cfg.get("dataset_kwargs") or {}).get("data_files")
    if cfg.get("dataset_path") not in FILE_DATASETS or files is None:
        return []
    values = files.values() if isinstance(files, dict) else [files]
    return [str(x) for v in values for x in (v if isinstance(v, list) else [v])]


def outside_files(cfg: dict[str, Any], base: Path, task_dir: Path) -> list[str]:
    """The relative ``data_files`` of ``cfg`` (resolved against ``base``, the YAML's directory) that land outside
    ``task_dir`` (``../../etc/passwd``); absolute paths and URIs are the YAML's own choice."""
    root = task_dir.resolve()
    out = []
    for text in data_file_paths(cfg):
        if text.startswith(("s3://", "/")) or "://" in text:
            continue
        resolved = (base / text).resolve()
        if resolved != root and root not in resolved.parents:
            out.append(text)
    return out


def _primary_metric(cfg: dict[str, Any]) -> str | None:
    metrics = cfg.get("metric_list") or []
    first = metrics[0] if metrics else None
    return str(first.get("metric")) if isinstance(first, dict) and first.get("metric") else None


def scan_task_dir(task_dir: str) -> tuple[dict[str, TaskFile], list[str]]:
    """Every task the YAMLs under ``task_dir`` define (by their ``task`` name; groups are not run here), and one
    line per file that does not parse (lm-eval would skip such a file without a word)."""
    found: dict[str, TaskFile] = {}
    problems: list[str] = []
    for path in sorted(Path(task_dir).rglob("*.yaml")):
        try:
            cfg = read_task_yaml(path)
        except TaskFileError as exc:
            problems.append(str(exc))
            continue
        name = cfg.get("task")
        if not isinstance(name, str):
            continue  # a group, a tag list or an include-only fragment
        outside = outside_files(cfg, path.parent, Path(task_dir))
        if outside:
            problems.append(
                f"{path}: data_files {outside[0]} resolves outside the task_dir {task_dir} (a task's data "
                "lives in its task_dir)"
            )
            continue
        cfg = local_data_files(cfg, path.parent)
        found[name] = TaskFile(
            name, str(path), cfg.get("output_type"), _primary_metric(cfg), tuple(data_file_paths(cfg))
        )
    return found, problems


def shipped_task_path(name: str) -> Path:
    return SHIPPED_DIR / f"{name}.yaml"


# ---- configs lm-eval runs (lm-eval imported here, inside functions) ----------------------------------------------
def lm_eval_config(path: Path) -> dict[str, Any]:
    """The task's full config as lm-eval builds it (includes merged, ``!function``s resolved), data files local."""
    from lm_eval.tasks._yaml_loader import load_yaml

    try:
        cfg = load_yaml(path, resolve_func=True)
    except Exception as exc:  # yaml, import and attribute errors of a task file: one line
        raise TaskFileError(f"{path}: does not load ({_one_line(exc)})") from exc
    cfg = local_data_files(cfg, path.parent)
    missing = [p for p in data_file_paths(cfg) if not p.startswith("s3://") and not Path(p).exists()]
    if missing:
        raise TaskFileError(f"{path}: its dataset file {missing[0]} does not exist")
    cfg.pop("tag", None)
    cfg.pop("group", None)
    return cfg


def lm_eval_task_dir(task: StandardTask) -> Path:
    import lm_eval

    return Path(lm_eval.__file__).resolve().parent / "tasks" / task.lm_eval_dir


def standard_configs(task: StandardTask, directory: str, num_fewshot: int | None) -> list[dict[str, Any]]:
    """lm-eval's own config of a standard task (one per subject of a group), its data read from ``directory``."""
    root = lm_eval_task_dir(task)
    names = task.subtasks or (task.name,)
    by_name: dict[str, Path] = {}
    for path in sorted(root.glob("*.yaml")):
        try:
            name = read_task_yaml(path).get("task")
        except TaskFileError:
            continue
        if isinstance(name, str) and name in names:
            by_name[name] = path
    out = []
    for name in names:
        if name not in by_name:
            raise TaskFileError(f"{root}: lm-eval defines no task {name!r} there (lm-eval's task layout changed?)")
        cfg = lm_eval_config(by_name[name])
        sub = f"{directory.rstrip('/')}/{name.removeprefix(task.name + '_')}" if task.subtasks else directory
        out.append(point_at_directory(cfg, task, sub, needs_fewshot(task, num_fewshot)))
    return out


def point_at_directory(cfg: dict[str, Any], task: StandardTask, directory: str, fewshot: bool) -> dict[str, Any]:
    """``cfg`` reading its splits from ``directory``'s files; a split whose file is absent is dropped (its split
    field set to null), unless the evaluation needs it (the eval split; the few-shot split when shots are asked)."""
    files: dict[str, str] = {}
    fmt = None
    for key in ("training_split", "validation_split", "test_split", "fewshot_split"):
        split = cfg.get(key)
        if not split:
            continue
        path = find_split(directory, split)
        needed = split == task.eval_split or (fewshot and split == task.fewshot_split)
        if path is None:
            if needed:
                raise TaskFileError(f"{task.name}: {directory}/{split}.jsonl does not exist (the {split} split)")
            cfg = {**cfg, key: None}
            continue
        suffix = path.rsplit(".", 1)[1]
        this = dict(SPLIT_FORMATS)[suffix]
        if fmt not in (None, this):
            raise TaskFileError(f"{task.name}: {directory} mixes file formats ({fmt}, {this}); one per directory")
        fmt = this
        files[split] = path
    return {
        **cfg,
        "dataset_path": fmt,
        "dataset_name": None,
        "dataset_kwargs": {**(cfg.get("dataset_kwargs") or {}), "data_files": files},
    }


def standard_task(name: str) -> StandardTask:
    return STANDARD_TASKS[name]


# ---- s3:// copies -----------------------------------------------------------------------------------------------
def fetch_s3_dir(uri: str, dest: Path, client: S3Client | None = None) -> Path:
    """Copy every object under ``s3://bucket/prefix/`` into ``dest`` (keys relative to the prefix); FileNotFoundError
    naming the URI when there is none."""
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    prefix = prefix.rstrip("/") + "/" if prefix else ""
    if client is None:
        import boto3

        client = boto3.client("s3")
    from agents.s3_prefix import download_prefix

    if download_prefix(client, bucket, prefix, dest) == 0:
        raise FileNotFoundError(f"{uri}: no objects under this prefix")
    return dest
