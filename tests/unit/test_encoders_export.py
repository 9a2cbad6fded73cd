"""The neuron compile path's decision with a fake optimum-neuron tree in ``sys.modules`` (its ``TasksManager`` lists
bert for feature-extraction and nothing for qwen3; its ``main_export`` traces the saved model with
``torch.jit.trace`` into ``model.neuron`` and writes the input and output names to ``config.json``, as the real one
does) and a fake ``torch_neuronx`` (``trace`` = ``torch.jit.trace``):

* a listed model is exported at the graph's static shapes and compiler casting, through the compile cache (cold,
  then warm: nothing exported again), and its outputs pass the numerics gate against the CPU fp32 reference;
* an unlisted one is traced, and ``encode_models.exporter`` says so (path ``export``: the exporter's words refuse it);
* an exporter that raises: path ``auto`` records its words and traces; path ``export`` is an ``export_refused``
  row with its words, nothing run.
"""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest
import torch

from agents.compile_cache import NEURON_KINDS, CacheLayout
from agents.encoders.export import ExportPlan
from agents.encoders.measure import measure_workload
from agents.encoders.placement import ExportRefusedError, place
from pipeline.encoders import EXPORT_ROUTES, EncodeWorkload, NeuronCompile

NOT_LISTED = "qwen3 is not supported yet for transformers. Only ['bert', 'clip'] are supported for the library"
EXPORT_ONLY = NeuronCompile(path="export")
EXPORT_ERROR = "Dictionary inputs to traced functions must have consistent type"


class _Features(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return out.last_hidden_state, out.pooler_output


@pytest.fixture
def fakes(monkeypatch):
    from transformers import AutoModel

    calls: list[dict] = []
    state = {"fail": False}

    def get_supported_tasks_for_model_type(model_type, exporter, library_name=None):
        assert exporter == "neuron" and library_name == "transformers"
        if model_type != "bert":
            raise KeyError(NOT_LISTED.replace("qwen3", model_type))
        return {"feature-extraction": None, "text-classification": None}

    def main_export(model_name_or_path, output, compiler_kwargs, task, library_name, do_validation, **kw):
        calls.append({"task": task, "compiler": compiler_kwargs, **kw})
        if state["fail"]:
            raise ValueError(EXPORT_ERROR)
        model = AutoModel.from_pretrained(model_name_or_path, attn_implementation="eager").eval()
        b, t = kw["batch_size"], kw["sequence_length"]
        ids = torch.zeros((b, t), dtype=torch.int64)
        traced = torch.jit.trace(_Features(model), (ids, torch.ones_like(ids), torch.zeros_like(ids)), strict=False)
        output.mkdir(parents=True)
        torch.jit.save(traced, str(output / "model.neuron"))
        neuron = {"input_names": ["input_ids", "attention_mask", "token_type_ids"]}
        neuron["output_names"] = ["last_hidden_state", "pooler_output"]
        (output / "config.json").write_text(json.dumps({"model_type": "bert", "neuron": neuron}))

    tasks = types.ModuleType("optimum.exporters.tasks")
    tasks.TasksManager = types.SimpleNamespace(get_supported_tasks_for_model_type=get_supported_tasks_for_model_type)
    neuron = types.ModuleType("optimum.exporters.neuron")
    neuron.main_export = main_export
    neuronx = types.ModuleType("torch_neuronx")
    neuronx.traces = []

    def trace(module, example, compiler_workdir=None, compiler_args=None):
        neuronx.traces.append(compiler_args)
        return torch.jit.trace(module, example, strict=False)

    neuronx.trace = trace
    for name, mod in {
        "optimum": types.ModuleType("optimum"),
        "optimum.exporters": types.ModuleType("optimum.exporters"),
        "optimum.exporters.tasks": tasks,
        "optimum.exporters.neuron": neuron,
        "torch_neuronx": neuronx,
    }.items():
        monkeypatch.setitem(sys.modules, name, mod)
    return types.SimpleNamespace(exports=calls, traces=neuronx.traces, state=state)


def _run(model: str, cache, path: str = "auto", **neuron):
    w = EncodeWorkload(
        name="t",
        modality="text_embedding",
        model=model,
        batch_sizes=[2],
        shapes=[8],
        items=3,
        neuron={"path": path, **neuron},
    )
    return measure_workload(w, backend="neuron", seed=0, calls=1, warmup=0, cache_dir=cache)


def test_a_listed_model_is_exported_through_the_cache_and_passes_the_gate(tmp_path, fakes):
    cold = _run("tiny-bert-embedding", tmp_path, auto_cast="matmul")
    (m,) = cold.models
    assert (m["status"], m["exporter"], m["cache"], m["reason"]) == ("ok", "optimum-neuron", "cold", None)
    assert m["compile_s"] is not None and m["compile_s"] >= 0
    (export,) = fakes.exports
    assert export["task"] == "feature-extraction"
    assert (export["batch_size"], export["sequence_length"]) == (2, 8)  # the graph's static shapes
    assert export["compiler"] == {"auto_cast": "matmul", "auto_cast_type": "bf16"}
    assert fakes.traces == []
    (gate,) = cold.numerics
    assert gate["verdict"] == "pass" and gate["nan_count"] == 0 and gate["min_cosine"] > 0.999
    assert sum(c["items"] for c in cold.calls) == 3
    (entry,) = CacheLayout(tmp_path, "ns", NEURON_KINDS).entries()  # pushed and seeded like a NEFF
    assert entry.endswith("-optimum-neuron") and not list((tmp_path / entry).glob(".source*"))
    warm = _run("tiny-bert-embedding", tmp_path, auto_cast="matmul")
    assert (warm.models[0]["cache"], warm.models[0]["compile_s"]) == ("warm", None)
    assert len(fakes.exports) == 1 and warm.numerics[0]["verdict"] == "pass"


def test_an_unlisted_model_is_traced_and_the_row_says_so(tmp_path, fakes):
    rows = _run("tiny-qwen3-embedding", tmp_path)
    (m,) = rows.models
    assert (m["status"], m["exporter"], m["reason"]) == ("ok", "torch_neuronx.trace", None)
    assert fakes.exports == [] and fakes.traces == [["--auto-cast", "none"]]
    assert rows.numerics[0]["verdict"] == "pass"
    route = EXPORT_ROUTES["qwen3-embedding", "text_embedding"]
    plan = ExportPlan(route, "unused: never exported", {"batch_size": 1, "sequence_length": 8}, NeuronCompile())
    ids = np.zeros((1, 8), dtype=np.int64)
    with pytest.raises(ExportRefusedError) as exc:  # path export: the exporter's word is the result
        place(
            torch.nn.Identity(),
            [ids, ids],
            backend="neuron",
            key="k",
            cache_dir=tmp_path,
            export=plan,
            compiler=EXPORT_ONLY,
        )
    assert str(exc.value) == "KeyError: " + repr(NOT_LISTED) and exc.value.exporter == "optimum-neuron"
    assert fakes.exports == [] and len(fakes.traces) == 1


def test_an_exporter_error_is_recorded_verbatim_then_traced_or_refused(tmp_path, fakes):
    fakes.state["fail"] = True
    auto = _run("tiny-bert-embedding", tmp_path / "auto")
    (m,) = auto.models
    assert (m["status"], m["exporter"]) == ("ok", "torch_neuronx.trace")
    assert m["reason"] == f"optimum-neuron export refused first: ValueError: {EXPORT_ERROR}"
    assert auto.numerics[0]["verdict"] == "pass" and len(fakes.traces) == 1
    assert not list((tmp_path / "auto").rglob("*.lock"))  # the refused export leaves no half-built entry
    only = _run("tiny-bert-embedding", tmp_path / "export", path="export")
    (m,) = only.models
    assert (m["status"], m["exporter"], m["reason"]) == (
        "export_refused",
        "optimum-neuron",
        f"ValueError: {EXPORT_ERROR}",
    )
    assert only.numerics == [] and only.calls == [] and len(fakes.traces) == 1
