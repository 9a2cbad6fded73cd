"""One encoder workload measured on a backend: its graphs placed per (shape, batch size), its outputs gated against
a CPU fp32 reference instance on the same inputs (:mod:`agents.encoders.numerics`), and only then timed.

Rows: ``encode_models`` for every placement (a refusal or a compile error is a row with its verbatim reason, and
the rest of the workload goes on), ``encode_numerics`` for every placement that ran, ``encode_calls`` for every
timed call of a placement whose verdict is ``pass``. One timed call is one batch through the task's graphs: the
host arrays in, the host outputs back (what a client of the encoder waits for).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from agents.encoders import inputs as make
from agents.encoders.export import EXPORTER, ExportPlan, input_shapes
from agents.encoders.models import EncoderTask, build_task
from agents.encoders.numerics import compare
from agents.encoders.placement import PlacedGraph, PlacementError, graph_key, place
from pipeline.encoders import EXPORT_ROUTES, SHAPE_UNITS, EncodeWorkload

Place = Callable[..., PlacedGraph]
TaskBuilder = Callable[[EncodeWorkload, int, int], EncoderTask]


@dataclass
class WorkloadRows:
    models: list[dict[str, Any]] = field(default_factory=list)
    numerics: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def raw_items(w: EncodeWorkload, shape: int, seed: int, inputs: Path | None) -> list[Any]:
    """The workload's ``items`` raw inputs at ``shape``: from ``inputs`` (checked again here: an s3:// copy is read
    for the first time) or generated."""
    from pipeline.encoder_inputs import input_files, read_inputs

    files = input_files(w.modality, inputs) if inputs is not None else None
    if files is not None:
        decoded = read_inputs(w.modality, inputs)  # raises InputFileError naming the file
    if w.modality == "speech_to_text":
        return make.audio_items(shape, w.items, seed, files)
    if w.modality in ("image_embedding", "zero_shot"):
        return make.image_items(shape, w.items, seed, files)
    if w.modality == "rerank":
        return make.pair_items(shape, w.items, seed, decoded if files else None)
    return make.text_items(shape, w.items, seed, decoded if files else None)


def _pad(a: np.ndarray, rows: int) -> np.ndarray:
    if a.shape[0] == rows:
        return a
    return np.concatenate([a, np.zeros((rows - a.shape[0], *a.shape[1:]), dtype=a.dtype)])


def batches(arrays: list[np.ndarray], b: int) -> list[tuple[int, list[np.ndarray]]]:
    """(real items, arrays padded to ``b`` rows) per batch, in order."""
    n = arrays[0].shape[0]
    return [(min(b, n - i), [_pad(a[i : i + b], b) for a in arrays]) for i in range(0, n, b)]


def run_all(task: EncoderTask, calls: dict[str, Any], arrays: list[np.ndarray], b: int) -> np.ndarray:
    return np.concatenate([task.forward(calls, batch)[:real] for real, batch in batches(arrays, b)])


def _neuron_kwargs(w: EncodeWorkload, task: EncoderTask, name: str, example: list[np.ndarray]) -> dict[str, Any]:
    """The neuron path's arguments of one graph: the workload's compile settings, and its export plan where the
    pair has a route and the task says what the exporter builds from (the first graph)."""
    kw: dict[str, Any] = {"compiler": w.neuron}
    route = EXPORT_ROUTES.get((w.family, w.modality))
    if route is not None and task.source is not None and name == next(iter(task.graphs)):
        kw["export"] = ExportPlan(route, task.source, input_shapes(route, example), w.neuron)
    return kw


def measure_workload(
    w: EncodeWorkload,
    *,
    backend: str,
    seed: int,
    calls: int,
    warmup: int,
    cache_dir: Path | None,
    inputs: Path | None = None,
    place_fn: Place = place,
    build: TaskBuilder = build_task,
    progress: Callable[[str], None] = lambda _task: None,
) -> WorkloadRows:
    rows = WorkloadRows()
    unit = SHAPE_UNITS[w.modality]
    slo = w.slo.p99_ms if w.slo else None
    for shape in w.shapes:
        task = build(w, shape, seed)
        reference = build(w, shape, seed)  # a second instance: fp32 on the CPU, the same weights from the seed
        items = raw_items(w, shape, seed, inputs)
        arrays = task.encode(items)
        for b in w.batch_sizes:
            subject = {
                "workload": w.name,
                "modality": w.modality,
                "model": w.model,
                "family": w.family,
                "backend": backend,
                "shape": shape,
                "shape_unit": unit,
                "batch_size": b,
            }
            examples = task.examples(b)
            placed: dict[str, PlacedGraph] = {}
            model_row = {
                **subject,
                "graphs": len(task.graphs),
                "input_shape": "x".join(str(d) for d in examples[next(iter(task.graphs))][0].shape),
                "slo_p99_ms": slo,
            }
            try:
                for name, module in task.graphs.items():
                    extra = {**task.fingerprint, "neuron": w.neuron.model_dump()}
                    key = graph_key(f"{w.model}-{name}", [a.shape for a in examples[name]], extra)
                    kw = _neuron_kwargs(w, task, name, examples[name]) if backend == "neuron" else {}
                    placed[name] = place_fn(module, examples[name], backend=backend, key=key, cache_dir=cache_dir, **kw)
            except PlacementError as exc:
                status = exc.status
                failed = {"exporter": exc.exporter, "status": status, "reason": str(exc), "ts": _now()}
                rows.models.append({**model_row, **failed})
                progress(f"{w.name} {shape}{unit} b{b}: {status}")
                continue
            graphs = list(placed.values())
            compiled = [g.compile_s for g in graphs if g.compile_s is not None]
            caches = {g.cache for g in graphs}
            refusals = [g.refusal for g in graphs if g.refusal]
            rows.models.append(
                {
                    **model_row,
                    "exporter": graphs[0].path,
                    "status": "ok",
                    "reason": f"{EXPORTER} export refused first: {refusals[0]}" if refusals else None,
                    "compile_s": sum(compiled) if compiled else None,
                    "load_s": sum(g.load_s for g in graphs),
                    "cache": "cold" if "cold" in caches else graphs[0].cache,
                    "ts": _now(),
                }
            )
            backend_calls = {n: g.call for n, g in placed.items()}
            ref_calls = {
                n: place(m, examples[n], backend="cpu", key="reference").call for n, m in reference.graphs.items()
            }
            got = run_all(task, backend_calls, arrays, b)
            want = run_all(reference, ref_calls, arrays, b)
            gate = compare(got, want, min_cosine=w.numerics.min_cosine, max_abs_err=w.numerics.max_abs_err)
            rows.numerics.append(
                {
                    **subject,
                    "reference": "cpu-fp32",
                    "rows": gate.rows,
                    "values": gate.values,
                    "min_cosine": gate.min_cosine,
                    "max_abs_err": gate.max_abs_err,
                    "nan_count": gate.nan_count,
                    "gate_min_cosine": w.numerics.min_cosine,
                    "gate_max_abs_err": w.numerics.max_abs_err,
                    "verdict": gate.verdict,
                    "reason": gate.reason,
                    "ts": _now(),
                }
            )
            progress(f"{w.name} {shape}{unit} b{b}: numerics {gate.verdict}")
            if gate.verdict != "pass":
                continue  # a numerics exclusion: never timed
            chunks = batches(arrays, b)
            for _, batch in chunks[: max(0, warmup)]:
                task.forward(backend_calls, batch)
            index = 0
            for _ in range(calls):
                for real, batch in chunks:
                    t0 = time.perf_counter()
                    task.forward(backend_calls, batch)
                    ms = (time.perf_counter() - t0) * 1000.0
                    rows.calls.append(
                        {
                            **subject,
                            "call": index,
                            "items": real,
                            "latency_ms": ms,
                            "audio_s": float(real * shape) if unit == "s" else None,
                            "ts": _now(),
                        }
                    )
                    index += 1
            progress(f"{w.name} {shape}{unit} b{b}: {index} calls")
    return rows
