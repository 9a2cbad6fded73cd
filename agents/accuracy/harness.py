"""lm-eval against a served endpoint: one evaluation (a served model on one server config) over the lane's tasks, as
``accuracy_samples`` and ``accuracy_tasks`` rows.

Each task runs in its own ``lm_eval.simple_evaluate`` call with ``agents.accuracy.served_model``'s model (lm-eval's
``local-completions``, one per evaluation): one request at a time, greedy (temperature 0), seeded, the served model's
own tokenizer (huggingface backend). It times every request, and the rows attribute each to the document that asked
it; a request that fails becomes that sample's ``error`` instead of failing the task. A task lm-eval cannot run at
all is a ``failed`` row with the one-line cause; the other tasks go on. A log-likelihood task on a server whose answer
to :func:`probe_prompt_logprobs` shows no prompt logprobs is a ``refused`` row carrying that answer verbatim. No hub:
HF_HUB_OFFLINE and HF_DATASETS_OFFLINE are set before lm-eval is imported, and every dataset is a local file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.accuracy.served_model import COMPLETIONS, Probe, Recorder, Settings, model_class, probe_prompt_logprobs
from agents.accuracy.taskfiles import TaskFileError, lm_eval_config, shipped_task_path, standard_configs, standard_task
from pipeline.accuracy import LOGLIKELIHOOD_TYPES, ResolvedTask

log = logging.getLogger(__name__)

PREDICTION_MAX_CHARS = 512  # a longer prediction is kept as its hash and length only
BINARY_METRICS = frozenset({"exact_match", "acc", "acc_norm", "acc_mutual_info"})


@dataclass(frozen=True)
class Evaluation:
    """One served model on one server config: what the rows say it is, where to reach it."""

    model: str  # the catalogue model (the rows' `model`)
    variant: str  # base | finetune | the server variant's name (a multi-LoRA variant's: NAME/ADAPTER)
    server_config: str
    backend: str
    base_url: str
    tokenizer: str  # the model's local directory
    max_model_len: int
    served: str | None = None  # the name requests ask for, where it is not `model` (a LoRA adapter's)

    @property
    def request_model(self) -> str:
        return self.served or self.model

    def eval_id(self, task: str) -> str:
        return f"{self.model}|{self.variant}|{self.server_config}|{task}"


def offline_environment() -> None:
    """No hub at run time: set before lm-eval, datasets or huggingface_hub is imported (and forced after)."""
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[key] = "1"
    try:
        import datasets.config
        import huggingface_hub.constants

        datasets.config.HF_DATASETS_OFFLINE = True
        datasets.config.HF_HUB_OFFLINE = True
        huggingface_hub.constants.HF_HUB_OFFLINE = True
    except (ImportError, AttributeError):  # pragma: no cover - older layouts: the environment still holds
        pass


# ---- one evaluation ---------------------------------------------------------------------------------------------
def lm_eval_version() -> str:
    from importlib.metadata import version

    return version("lm_eval")


def task_configs(task: ResolvedTask, settings: Settings) -> list[dict[str, Any]]:
    """The lm-eval configs the task runs (one; a group's subtasks), greedy, within the lane's generation budget."""
    if task.kind == "shipped":
        cfgs = [lm_eval_config(shipped_task_path(task.name))]
    elif task.kind == "standard":
        cfgs = standard_configs(standard_task(task.name), task.source, settings.num_fewshot)
    else:
        cfgs = [lm_eval_config(Path(task.source))]
    out = []
    for cfg in cfgs:
        if cfg.get("output_type") == "generate_until":
            gen = dict(cfg.get("generation_kwargs") or {})
            gen.update(do_sample=False, temperature=0.0)
            if settings.max_gen_toks is not None:
                gen["max_gen_toks"] = settings.max_gen_toks
            cfg = {**cfg, "generation_kwargs": gen}
        out.append(cfg)
    return out


def evaluate(
    ev: Evaluation,
    tasks: list[ResolvedTask],
    settings: Settings,
    *,
    probe: Probe | None = None,
    failed: dict[str, str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[dict], list[dict]]:
    """(accuracy_samples rows, accuracy_tasks rows) of one evaluation. ``probe``: the server's answer to the prompt
    logprobs probe (None: asked here when a log-likelihood task needs it); ``failed``: tasks already known not to run
    here (a dataset that could not be copied, a server that did not boot), with the one-line reason."""
    offline_environment()
    run = _EvaluationRun(ev, settings, probe, progress)
    try:
        for task in tasks:
            run.task(task, (failed or {}).get(task.name))
    finally:
        run.close()
    return run.samples, run.task_rows


class _EvaluationRun:
    """One evaluation's tasks in turn, with one model (one tokenizer load, one connection) for all of them."""

    def __init__(self, ev: Evaluation, settings: Settings, probe: Probe | None, progress: Callable[[int], None] | None):
        self.ev, self.settings, self.probe, self.progress = ev, settings, probe, progress
        self.samples: list[dict] = []
        self.task_rows: list[dict] = []
        self.lm: Any = None

    def model(self) -> Any:
        if self.lm is None:
            ev, st = self.ev, self.settings
            self.lm = model_class()(
                recorder=Recorder(),
                settings=st,
                progress=self.progress,
                model=ev.request_model,
                base_url=ev.base_url + COMPLETIONS,
                tokenizer=ev.tokenizer,
                tokenizer_backend="huggingface",
                tokenized_requests=False,
                num_concurrent=1,
                batch_size=1,
                seed=st.seed,
                max_length=ev.max_model_len,
                timeout=int(st.request_timeout_s) + 1,
                max_gen_toks=st.max_gen_toks or 256,
            )
        return self.lm

    def close(self) -> None:
        if self.lm is not None:
            self.lm.close()

    def task(self, task: ResolvedTask, failed: str | None) -> None:
        ev, settings = self.ev, self.settings
        start = time.perf_counter()
        base = _task_row(ev, task, settings)
        if failed is not None:
            self.task_rows.append({**base, "status": "failed", "reason": failed})
            return
        if time.monotonic() >= settings.deadline:
            self.task_rows.append({**base, "status": "failed", "reason": "time budget spent before this task started"})
            return
        try:
            cfgs = task_configs(task, settings)
        except TaskFileError as exc:
            self.task_rows.append({**base, "status": "failed", "reason": str(exc)})
            return
        if any(c.get("output_type") in LOGLIKELIHOOD_TYPES for c in cfgs):
            if self.probe is None:
                self.probe = probe_prompt_logprobs(ev.base_url, ev.request_model, settings.request_timeout_s)
            if not self.probe.ok:
                self.task_rows.append(
                    {
                        **base,
                        "output_type": cfgs[0].get("output_type"),
                        "status": "refused",
                        "reason": "the server returns no prompt logprobs, which this log-likelihood "
                        f"task needs: {self.probe.answer}",
                    }
                )
                return
        try:
            rows, trows = _run_task(self.model(), ev, task, cfgs, settings)
        except Exception as exc:  # noqa: BLE001 - a task lm-eval cannot run is a result; the other tasks go on
            log.warning("accuracy task %s of %s failed: %s", task.name, ev.eval_id(task.name), exc)
            self.task_rows.append(
                {**base, "status": "failed", "reason": _one_line(exc), "wall_s": time.perf_counter() - start}
            )
            return
        self.samples += rows
        self.task_rows += trows


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:2000] if text else type(exc).__name__


def _task_row(ev: Evaluation, task: ResolvedTask, settings: Settings, name: str | None = None) -> dict[str, Any]:
    name = name or task.name
    return {
        "eval_id": ev.eval_id(name),
        "model": ev.model,
        "variant": ev.variant,
        "server_config": ev.server_config,
        "backend": ev.backend,
        "task": name,
        "task_source": task.origin or task.source,
        "output_type": task.output_type,
        "metric": task.metric,
        "sample_limit": settings.sample_limit,
        "n_docs": task.n_docs,
        "n_samples": 0,
        "n_failed": 0,
        "lm_eval_score": None,
        "lm_eval_version": None,
        "num_fewshot": settings.num_fewshot,
        "max_gen_toks": settings.max_gen_toks if task.output_type == "generate_until" else None,
        "wall_s": None,
        "status": "failed",
        "reason": None,
    }


def _run_task(
    lm: Any, ev: Evaluation, task: ResolvedTask, cfgs: list[dict[str, Any]], settings: Settings
) -> tuple[list[dict], list[dict]]:
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    recorder = lm.recorder = Recorder()
    # scoring requests go as token ids (lm-eval cuts the context at the server's length in the served tokenizer's
    # tokens); generation prompts as text, tokenized by the server as any client's are
    lm.tokenized_requests = any(c.get("output_type") in LOGLIKELIHOOD_TYPES for c in cfgs)
    start = time.perf_counter()
    with _lean_results():
        results = simple_evaluate(
            model=lm,
            tasks=cfgs,
            num_fewshot=settings.num_fewshot,
            limit=settings.sample_limit,
            log_samples=True,
            task_manager=TaskManager(include_defaults=False),
            bootstrap_iters=0,
            random_seed=settings.seed,
            numpy_random_seed=settings.seed,
            torch_random_seed=settings.seed,
            fewshot_random_seed=settings.seed,
            apply_chat_template=False,
            verbosity="WARNING",
        )
    wall = time.perf_counter() - start
    if results is None:
        raise RuntimeError("lm-eval returned no results")
    version = lm_eval_version()
    rows: list[dict] = []
    task_rows: list[dict] = []
    by_name = {c["task"]: c for c in cfgs}
    for name, cfg in by_name.items():
        metric = _primary_metric(cfg)
        filt = _primary_filter(cfg)
        logged = [s for s in results.get("samples", {}).get(name, []) if s.get("filter") == filt]
        out_type = cfg.get("output_type")
        these = [_sample_row(ev, name, out_type, metric, s, recorder) for s in logged]
        failed = [r for r in these if r["error"] is not None]
        n_docs = (results.get("n-samples", {}).get(name) or {}).get("original")
        score = (results.get("results", {}).get(name) or {}).get(f"{metric},{filt}")
        shots = results.get("n-shot", {}).get(name)
        reason = None
        if failed:
            reason = f"{len(failed)} of {len(these)} samples failed (first: {failed[0]['error']})"
        gen = cfg.get("generation_kwargs") or {}
        task_rows.append(
            {
                **_task_row(ev, task, settings, name),
                "output_type": out_type,
                "metric": metric,
                "n_docs": n_docs if n_docs is not None else task.n_docs,
                "n_samples": len(these),
                "n_failed": len(failed),
                "lm_eval_score": float(score) if isinstance(score, (int, float)) else None,
                "lm_eval_version": version,
                "num_fewshot": shots,
                "max_gen_toks": int(gen.get("max_gen_toks", settings.max_gen_toks or 256))
                if out_type == "generate_until"
                else None,
                "wall_s": wall / len(by_name),
                "status": "ok",
                "reason": reason,
            }
        )
        rows += these
    return rows, task_rows


@contextmanager
def _lean_results() -> Iterator[None]:
    """lm-eval without its environment report: ``add_env_info`` runs torch's collect_env (pip, compilers, drivers:
    seconds of subprocesses per call, here once per task) and ``get_git_commit_hash`` asks git about the working
    directory; the provenance lane records the box, and the rows carry lm-eval's version."""
    import lm_eval.evaluator as evaluator

    saved = evaluator.add_env_info, evaluator.get_git_commit_hash
    evaluator.add_env_info = lambda storage: None
    evaluator.get_git_commit_hash = lambda: None
    try:
        yield
    finally:
        evaluator.add_env_info, evaluator.get_git_commit_hash = saved


def _primary_metric(cfg: dict[str, Any]) -> str:
    metrics = cfg.get("metric_list") or []
    if metrics and isinstance(metrics[0], dict) and metrics[0].get("metric"):
        return str(metrics[0]["metric"])
    return "acc" if cfg.get("output_type") in LOGLIKELIHOOD_TYPES else "exact_match"


def _primary_filter(cfg: dict[str, Any]) -> str:
    filters = cfg.get("filter_list") or []
    if filters and isinstance(filters[0], dict) and filters[0].get("name"):
        return str(filters[0]["name"])
    return "none"


def _sample_row(
    ev: Evaluation, task: str, output_type: str | None, metric: str, s: dict[str, Any], recorder: Recorder
) -> dict[str, Any]:
    args = s.get("arguments") or []
    if output_type in LOGLIKELIHOOD_TYPES:
        keys = [("score", (a[0], a[1])) for a in args]
        lls = [float(r[0]) for r in (s.get("filtered_resps") or [])]
        printed = ",".join(f"{x:.6g}" for x in lls)
        prediction = str(max(range(len(lls)), key=lls.__getitem__)) if lls else None
        digest, chars = hashlib.sha256(printed.encode()).hexdigest(), None
    else:
        keys = [("generate", a[0]) for a in args]
        raw = _first_text(s.get("resps"))
        filtered = s.get("filtered_resps") or [None]
        prediction = filtered[0] if isinstance(filtered, list) else filtered
        prediction = None if prediction is None else str(prediction)
        digest, chars = hashlib.sha256(raw.encode()).hexdigest(), len(raw)
        if prediction is not None and len(prediction) > PREDICTION_MAX_CHARS:
            prediction = None
    records = [recorder.take(k) for k in keys]
    errors = [r.error for r in records if r is not None and r.error]
    timed = [r.latency_s for r in records if r is not None and r.latency_s is not None]
    latency = sum(timed) if records and len(timed) == len(records) and not errors else None
    value = s.get(metric)
    value = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    error = errors[0] if errors else None
    if error is not None:
        value = None
    return {
        "eval_id": ev.eval_id(task),
        "model": ev.model,
        "variant": ev.variant,
        "server_config": ev.server_config,
        "backend": ev.backend,
        "task": task,
        "output_type": output_type,
        "doc_id": int(s["doc_id"]),
        "target": None if s.get("target") is None else str(s["target"]),
        "prediction": prediction,
        "prediction_hash": digest,
        "prediction_chars": chars,
        "metric": metric,
        "correct": None if value is None or metric not in BINARY_METRICS else value == 1.0,
        "metric_value": value,
        "latency_s": latency,
        "requests": len(args),
        "error": error,
    }


def _first_text(resps: Any) -> str:
    """The raw completion of a generation sample (lm-eval logs ``resps`` as [[text]])."""
    while isinstance(resps, (list, tuple)) and resps:
        resps = resps[0]
    return resps if isinstance(resps, str) else ""
