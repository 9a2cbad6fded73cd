"""Accuracy results committed through the store, for the accuracy views' and report's tests (and REPORT.html's):
the accuracy lane's two tables (accuracy_tasks, accuracy_samples), shaped as the schema declares them, from a fixed
pattern of right and wrong answers per evaluation; and a serve_sweep lane whose server configs are declared variants
(compiles.config_json with a base), measured in interleaved repeats, for the Variants comparison beside them."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import pyarrow as pa

from analytics.store import LocalStore
from tests.support.synthetic import T0, request_rows, scale_ttft

SLO = {"name": "test-slo", "ttft_ms": 1000.0, "tpot_ms": 100.0, "percentile": 99.0, "source": "test"}


@dataclass(frozen=True)
class Evaluation:
    """One evaluation: ``outcomes`` per document (True right, False wrong, None a failed request); ``outputs`` per
    document the raw completion hashed into prediction_hash (default: the outcome, so equal outcomes hash alike)."""

    task: str
    outcomes: tuple[bool | None, ...]
    model: str = "tiny-llama"
    variant: str = "base"
    server_config: str | None = "A"
    outputs: tuple[str | None, ...] | None = None
    status: str = "ok"
    reason: str | None = None
    metric: str = "exact_match"
    num_fewshot: int = 0

    @property
    def eval_id(self) -> str:
        return f"{self.model}:{self.variant}:{self.server_config}:{self.task}"


def _sample_rows(e: Evaluation) -> list[dict]:
    out = []
    for doc, ok in enumerate(e.outcomes):
        text = (e.outputs[doc] if e.outputs is not None else None) or f"answer-{doc}-{ok}"
        out.append(
            {
                "eval_id": e.eval_id,
                "model": e.model,
                "variant": e.variant,
                "server_config": e.server_config,
                "backend": "cpu",
                "task": e.task,
                "output_type": "generate_until",
                "doc_id": doc,
                "target": f"target-{doc}",
                "prediction": None if ok is None else text[:512],
                "prediction_hash": None if ok is None else hashlib.sha256(text.encode()).hexdigest(),
                "prediction_chars": None if ok is None else len(text),
                "metric": e.metric,
                "correct": ok,
                "metric_value": None if ok is None else float(ok),
                "latency_s": None if ok is None else 0.1 + 0.001 * doc,
                "requests": 1,
                "error": "HTTP 503: server overloaded (synthetic)" if ok is None else None,
            }
        )
    return out


def _task_row(e: Evaluation) -> dict:
    scored = [o for o in e.outcomes if o is not None]
    return {
        "eval_id": e.eval_id,
        "model": e.model,
        "variant": e.variant,
        "server_config": e.server_config,
        "backend": "cpu",
        "task": e.task,
        "task_source": "shipped",
        "output_type": "generate_until",
        "metric": e.metric,
        "sample_limit": len(e.outcomes) or None,
        "n_docs": len(e.outcomes) or 100,
        "n_samples": len(e.outcomes),
        "n_failed": sum(o is None for o in e.outcomes),
        "lm_eval_score": sum(scored) / len(scored) if scored else None,
        "lm_eval_version": "0.4.9 (synthetic)",
        "num_fewshot": e.num_fewshot,
        "max_gen_toks": 32,
        "wall_s": 1.0,
        "status": e.status,
        "reason": e.reason,
    }


def commit_accuracy(
    store: LocalStore,
    run_id: str,
    evaluations: list[Evaluation],
    lane: str = "accuracy",
    instance_type: str | None = None,
) -> None:
    """One accuracy lane attempt holding ``evaluations``."""
    w = store.begin_attempt(run_id, lane)
    samples = [r for e in evaluations for r in _sample_rows(e)]
    if samples:
        w.add_rows("accuracy_samples", samples)
    w.add_rows("accuracy_tasks", [_task_row(e) for e in evaluations])
    w.add_rows(
        "lane_runs",
        [
            {
                "status": "succeeded",
                "supersedes": True,
                "started_at": T0,
                "ended_at": T0 + timedelta(seconds=10),
                "wall_s": 10.0,
                "backend": "cpu",
                "host": "box",
                "box_role": "local" if instance_type is None else "inf2",
                "instance_type": instance_type,
            }
        ],
    )
    w.commit("succeeded")


def commit_variant_sweep(
    store: LocalStore,
    run_id: str,
    configs: dict[str, tuple[str | None, dict, float]],
    model: str = "tiny-llama",
    repeats: int = 3,
    concurrencies: tuple[int, ...] = (1, 2),
    lane: str = "serve_sweep",
) -> None:
    """A serve_sweep lane: ``configs`` {name: (base or None, what it sets, TTFT factor)}, each booted once (its
    compiles row declares config_json as pipeline.servers writes it) and swept ``repeats`` times, interleaved;
    every point has the SLO and telemetry in its window."""
    rng = np.random.default_rng(11)
    w = store.begin_attempt(run_id, lane)
    w.add_rows(
        "compiles",
        [
            {
                "what": "serving_config",
                "model": model,
                "config": name,
                "cache": "cold",
                "wall_s": 5.0,
                "succeeded": True,
                "backend": "cpu",
                "config_fingerprint": f"fp-{json.dumps(sets, sort_keys=True)}",
                "config_json": json.dumps(
                    {
                        "name": name,
                        "base": base,
                        "fingerprint": f"fp-{json.dumps(sets, sort_keys=True)}",
                        "max_model_len": 256,
                        "max_num_seqs": 4,
                        "tensor_parallel_size": 1,
                        **sets,
                    },
                    sort_keys=True,
                ),
            }
            for name, (base, sets, _) in configs.items()
        ],
    )
    t = 0.0
    for r in range(repeats):
        for name, (_, _, factor) in configs.items():
            for conc in concurrencies:
                pid = f"{name}-c{conc}-r{r}"
                start = T0 + timedelta(seconds=t)
                reqs, span = request_rows(rng, 40, 64, 16, conc, 0.0, pid, start, int(t * 1e9))
                if factor != 1.0:
                    reqs = scale_ttft(reqs, factor)
                w.add_rows(
                    "requests",
                    reqs.append_column("model", pa.array([model] * len(reqs))).append_column(
                        "server_config", pa.array([name] * len(reqs))
                    ),
                )
                w.add_rows(
                    "sweep_points",
                    [
                        {
                            "point_id": pid,
                            "model": model,
                            "server_config": name,
                            "mode": "closed",
                            "input_len": 64,
                            "output_len": 16,
                            "max_concurrency": conc,
                            "num_prompts": 40,
                            "window_start": start,
                            "window_end": start + timedelta(seconds=span * max(factor, 1.0)),
                            "t_start_ns": int(t * 1e9),
                            "client_lag_bound_ms": 50.0,
                            "repeat_index": r,
                            "slo_json": json.dumps(SLO),
                        }
                    ],
                )
                w.add_rows(
                    "telemetry",
                    [
                        {
                            "ts": start + timedelta(seconds=span * (i + 0.5) / 4),
                            "source": "host",
                            "metric": "host_cpu_util_pct",
                            "value": 50.0,
                            "unit": "%",
                        }
                        for i in range(4)
                    ],
                )
                t += span * max(factor, 1.0) + 1.0
    w.add_rows(
        "lane_runs",
        [
            {
                "status": "succeeded",
                "supersedes": True,
                "started_at": T0,
                "ended_at": T0 + timedelta(seconds=t),
                "wall_s": t,
                "backend": "cpu",
                "host": "box",
                "box_role": "local",
                "instance_type": None,
            }
        ],
    )
    w.commit("succeeded")
