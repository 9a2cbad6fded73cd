"""optimum-neuron's exporter as the neuron path of a graph it lists (:data:`pipeline.encoders.EXPORT_ROUTES`).

* :func:`exporter_lists` asks the exporter itself: ``TasksManager.get_supported_tasks_for_model_type(model_type,
  exporter="neuron", library_name="transformers")`` after importing ``optimum.exporters.neuron`` (which registers
  its configs). A model type it does not know (its ``KeyError``, verbatim) or a task it does not list for it is
  "not listed"; an exporter that is not importable on the box is "not listed" too, with the import error.
* :func:`export` runs ``optimum.exporters.neuron.main_export`` on the Hugging Face model behind the graph (a tiny
  model is saved next to the artefact first: the exporter reads a directory or a hub id) at the graph's static
  shapes (:func:`input_shapes`) and the workload's compiler casting, with the exporter's own validation off (the
  lane's numerics gate compares every output with the CPU fp32 reference instead).
* :func:`load` reads the artefact back: ``model.neuron`` (TorchScript) and the input and output names the exporter
  stored in ``config.json`` (``neuron.input_names`` / ``neuron.output_names``), and makes a call with the lane
  graph's signature: its arrays passed by name in the exporter's order (an input the graph lacks, e.g. BERT's
  ``token_type_ids``, is zeros of the ids' shape: one segment), the route's output picked by name and pooled on the
  host where the route says so.

Every import of ``optimum`` is inside a function: it exists only on a box's Neuron venv.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.encoders import ExportRoute, NeuronCompile

EXPORTER = "optimum-neuron"
ARTIFACT = "model.neuron"


@dataclass(frozen=True)
class ExportPlan:
    """One graph's export: its route, the Hugging Face model (a ``PreTrainedModel``, or a hub id) behind it, its
    static input shapes and the compiler's casting."""

    route: ExportRoute
    source: Any
    shapes: dict[str, int]
    compiler: NeuronCompile


def input_shapes(route: ExportRoute, example: Sequence[np.ndarray]) -> dict[str, int]:
    """The exporter's mandatory shape arguments for the graph's example arrays (the lane's static shapes)."""
    named = dict(zip(route.inputs, example, strict=False))
    if "pixel_values" in named:
        px, ids = named["pixel_values"], named["input_ids"]
        return {
            "image_batch_size": int(px.shape[0]),
            "text_batch_size": int(ids.shape[0]),
            "sequence_length": int(ids.shape[1]),
            "num_channels": int(px.shape[1]),
            "height": int(px.shape[2]),
            "width": int(px.shape[3]),
        }
    ids = named["input_ids"]
    return {"batch_size": int(ids.shape[0]), "sequence_length": int(ids.shape[1])}


def compiler_kwargs(compiler: NeuronCompile) -> dict[str, Any]:
    """optimum's ``compiler_kwargs``: no casting for ``none``."""
    if compiler.auto_cast == "none":
        return {"auto_cast": None, "auto_cast_type": None}
    return {"auto_cast": compiler.auto_cast, "auto_cast_type": compiler.auto_cast_type}


def trace_args(compiler: NeuronCompile) -> list[str]:
    """neuronx-cc's arguments for ``torch_neuronx.trace`` (its spelling of matmul casting is ``matmult``)."""
    cast = "matmult" if compiler.auto_cast == "matmul" else compiler.auto_cast
    args = ["--auto-cast", cast]
    return args if cast == "none" else [*args, "--auto-cast-type", compiler.auto_cast_type]


def exporter_lists(route: ExportRoute) -> tuple[bool, str]:
    """(whether optimum-neuron lists ``route``'s model type for its task, why not in the exporter's words)."""
    try:
        import optimum.exporters.neuron  # noqa: F401 - registers the neuron exporter's configs
        from optimum.exporters.tasks import TasksManager
    except ImportError as e:
        return False, f"optimum-neuron is not importable here: {e}"
    try:
        tasks = TasksManager.get_supported_tasks_for_model_type(
            route.model_type, exporter="neuron", library_name="transformers"
        )
    except KeyError as e:
        return False, f"{type(e).__name__}: {e}"
    if route.task not in tasks:
        return False, f"optimum-neuron lists {route.model_type} for {', '.join(sorted(tasks))}, not {route.task}"
    return True, ""


def export(plan: ExportPlan, out: Path, workdir: Path) -> None:
    """The exporter's artefact for ``plan`` in ``out`` (raises whatever the exporter raises)."""
    from optimum.exporters.neuron import main_export

    source, src = plan.source, None
    if not isinstance(source, str):
        src = out.parent / f".source-{out.name.lstrip('.')}"
        source.save_pretrained(str(src))
        source = str(src)
    try:
        main_export(
            model_name_or_path=source,
            output=out,
            compiler_kwargs=compiler_kwargs(plan.compiler),
            task=plan.route.task,
            library_name="transformers",
            do_validation=False,
            compiler_workdir=str(workdir),
            **plan.shapes,
        )
    finally:
        if src is not None:
            shutil.rmtree(src, ignore_errors=True)


def _pool(hidden: np.ndarray, mask: np.ndarray, how: str) -> np.ndarray:
    if how == "mean":
        w = mask.astype(hidden.dtype)[..., None]
        return (hidden * w).sum(1) / np.maximum(w.sum(1), 1.0)
    last = np.maximum(mask.sum(1) - 1, 0)
    return hidden[np.arange(hidden.shape[0]), last]


def load(out: Path, route: ExportRoute) -> Callable[..., tuple[np.ndarray, ...]]:
    """A call with the lane graph's signature over the exported artefact in ``out`` (ValueError: the artefact does not
    say its input and output names, or lacks the route's output)."""
    import torch

    meta = json.loads((out / "config.json").read_text()).get("neuron") or {}
    names, outputs = meta.get("input_names"), meta.get("output_names")
    if not names or not outputs:
        raise ValueError(f"{out / 'config.json'}: no neuron.input_names / neuron.output_names")
    if route.output not in outputs:
        raise ValueError(f"the exported graph's outputs are {outputs}, not {route.output}")
    index = list(outputs).index(route.output)
    module = torch.jit.load(str(out / ARTIFACT))

    def call(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        got = dict(zip(route.inputs, arrays, strict=False))
        ids = got.get("input_ids")
        args = []
        for name in names:
            a = got.get(name)
            if a is None:
                if name != "token_type_ids" or ids is None:
                    raise ValueError(f"the exported graph takes {name}, which the lane's graph does not give")
                a = np.zeros_like(ids)
            args.append(torch.from_numpy(np.ascontiguousarray(a)))
        with torch.no_grad():  # not inference_mode: TorchScript's executor may run a graph it profiled with autograd
            res = module(*args)
        res = tuple(res.values()) if isinstance(res, dict) else res if isinstance(res, tuple | list) else (res,)
        picked = res[index].detach().float().cpu().numpy()
        if route.pool is not None:
            picked = _pool(picked, got["attention_mask"], route.pool)
        return (picked,)

    return call
