"""The ``encode`` lane's workload specs: which encoder model, which modality, which batch sizes and input shapes,
which inputs, the numerics gate's thresholds and the SLO the decision judges — checked at plan time.

Modalities and the families that run them:

* ``speech_to_text`` — Whisper-style (``whisper``): log-mel features of audio, an encoder pass and a greedy
  decode of ``decode_tokens`` tokens; the shape is the clip's length in seconds.
* ``image_embedding`` / ``zero_shot`` — CLIP- and SigLIP-style (``clip``, ``siglip``): the image tower's
  embedding, or the image-to-label logits against fixed label prompts; the shape is the image side in pixels.
* ``text_embedding`` — BERT-style (mean pooling) and Qwen3-embedding-style (last-token pooling); the shape is the
  text's token length.
* ``rerank`` — a cross-encoder's (query, passage) score; the shape is the pair's token length.

A model is ``tiny-<family>`` (built from a config where the lane runs: :data:`TINY_MODELS`) or a hub id of the
catalogue (:data:`HUB_MODELS`, downloaded on the box, never at plan time). Inputs are made by the project unless
``inputs`` names a local file or directory (read and checked here, at plan time: an undecodable, empty or
wrong-shaped file is refused naming it) or an ``s3://`` prefix (read and checked by the lane where it runs).

What each backend runs (:data:`BACKEND_PATHS`, checked at plan time against the plan's backend by
:func:`backend_problem`): cpu and cuda run every (family, modality) pair above as eager torch on the device. On neuron
a pair runs by the workload's ``neuron.path``: ``trace`` (``torch_neuronx.trace`` of the lane's graphs, static shapes;
every pair has it), ``export`` (optimum-neuron's exporter only: the pairs of :data:`EXPORT_ROUTES`) or ``auto`` (the
exporter where it lists the model, the trace otherwise or after its refusal). A pair without an export route asked
to run by ``export`` is refused: that modality has no neuron path in this lane (speech_to_text, for one: Whisper's
exported decoder is optimum's own generation loop, not the lane's greedy step over a static buffer).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pipeline.spec_types import NAME, NAME_RULE, Refusal, count, first_refusal

Modality = Literal["speech_to_text", "image_embedding", "zero_shot", "text_embedding", "rerank"]
MODALITIES: tuple[str, ...] = ("speech_to_text", "image_embedding", "zero_shot", "text_embedding", "rerank")
FAMILY_MODALITIES: dict[str, tuple[str, ...]] = {
    "whisper": ("speech_to_text",),
    "clip": ("image_embedding", "zero_shot"),
    "siglip": ("image_embedding", "zero_shot"),
    "bert-embedding": ("text_embedding",),
    "qwen3-embedding": ("text_embedding",),
    "bert-reranker": ("rerank",),
    "qwen3-reranker": ("rerank",),
}
TINY_MODELS: dict[str, str] = {f"tiny-{family}": family for family in FAMILY_MODALITIES}
HUB_MODELS: dict[str, str] = {
    "openai/whisper-small": "whisper",
    "openai/clip-vit-base-patch32": "clip",
    "google/siglip-base-patch16-224": "siglip",
    "BAAI/bge-small-en-v1.5": "bert-embedding",
    "Qwen/Qwen3-Embedding-0.6B": "qwen3-embedding",
    "Qwen/Qwen3-Reranker-0.6B": "qwen3-reranker",
}
# The shape's unit per modality, and its bounds (a 30 s window is Whisper's own; 1024 px and 8192 tokens are past
# every family here).
SHAPE_UNITS = {
    "speech_to_text": "s",
    "image_embedding": "px",
    "zero_shot": "px",
    "text_embedding": "tokens",
    "rerank": "tokens",
}
SHAPE_LIMITS = {"s": (1, 30), "px": (16, 1024), "tokens": (8, 8192)}


class ExportRoute(BaseModel):
    """How optimum-neuron's exporter stands for one of the lane's graphs: its model type and task (what
    ``TasksManager`` lists for the ``neuron`` exporter), the exporter's input name of each array the graph takes (in
    the graph's order), the output the graph returns, and the host-side pooling of a hidden-state output."""

    model_config = ConfigDict(frozen=True)
    model_type: str
    task: str
    inputs: tuple[str, ...]
    output: str
    pool: Literal["mean", "last"] | None = None


# (family, modality) -> the exporter's route. The exported graph is the whole Hugging Face model at the workload's
# static shapes; a pair absent here has no export route (its graphs are the lane's own wrappers: Whisper's greedy
# decoder step, the image tower alone, the span-cosine reranker).
_ZERO_SHOT = ("pixel_values", "input_ids", "attention_mask")
EXPORT_ROUTES: dict[tuple[str, str], ExportRoute] = {
    ("clip", "zero_shot"): ExportRoute(
        model_type="clip", task="zero-shot-image-classification", inputs=_ZERO_SHOT, output="logits_per_image"
    ),
    ("siglip", "zero_shot"): ExportRoute(
        model_type="siglip", task="zero-shot-image-classification", inputs=_ZERO_SHOT, output="logits_per_image"
    ),
    ("bert-embedding", "text_embedding"): ExportRoute(
        model_type="bert",
        task="feature-extraction",
        inputs=("input_ids", "attention_mask"),
        output="last_hidden_state",
        pool="mean",
    ),
    ("qwen3-embedding", "text_embedding"): ExportRoute(
        model_type="qwen3",
        task="feature-extraction",
        inputs=("input_ids", "attention_mask"),
        output="last_hidden_state",
        pool="last",
    ),
}
NEURON_PATHS = ("auto", "export", "trace")


def _pairs() -> list[tuple[str, str]]:
    return [(f, m) for f, modalities in FAMILY_MODALITIES.items() for m in modalities]


# backend -> (family, modality) -> the paths that run it (neuron.path values on neuron; "eager" elsewhere)
BACKEND_PATHS: dict[str, dict[tuple[str, str], tuple[str, ...]]] = {
    "cpu": {pair: ("eager",) for pair in _pairs()},
    "cuda": {pair: ("eager",) for pair in _pairs()},
    "neuron": {pair: NEURON_PATHS if pair in EXPORT_ROUTES else ("auto", "trace") for pair in _pairs()},
}


class EncodeSpecError(ValueError):
    """A workload spec refused at plan time: one ``field: reason`` line."""


def family_of(model: str) -> str | None:
    """The family of a catalogue model (tiny or hub), else None."""
    return TINY_MODELS.get(model) or HUB_MODELS.get(model)


class NumericsGate(BaseModel):
    """Each output against the CPU fp32 reference on the same inputs: every row's cosine similarity at least
    ``min_cosine``, the max absolute error at most ``max_abs_err``, no NaN or infinity."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    min_cosine: float = Field(0.99, ge=0.0, le=1.0)
    max_abs_err: float = Field(0.05, gt=0.0, le=1e6)


class EncodeSlo(BaseModel):
    """What the decision judges a (batch size, shape) by: its p99 latency per batch within ``p99_ms``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    p99_ms: float = Field(gt=0.0, le=600_000.0)


class NeuronCompile(BaseModel):
    """How the neuron backend builds the workload's graphs: ``path`` (auto | export | trace, see the module's
    docstring) and the compiler's casting, passed to both paths (optimum's ``auto_cast`` / ``auto_cast_type``,
    neuronx-cc's ``--auto-cast`` / ``--auto-cast-type``). ``none`` keeps fp32, what the numerics gate's CPU
    reference computes."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    path: Literal["auto", "export", "trace"] = "auto"
    auto_cast: Literal["none", "matmul", "all"] = "none"
    auto_cast_type: Literal["bf16", "fp16", "tf32"] = "bf16"


class EncodeWorkload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    modality: Modality
    model: str
    batch_sizes: list[count(hi=1024)] = Field(min_length=1, max_length=16)  # type: ignore[valid-type]
    shapes: list[count(hi=8192)] = Field(min_length=1, max_length=16)  # type: ignore[valid-type]
    items: count(hi=100_000) = 32  # type: ignore[valid-type]
    inputs: str | None = None
    decode_tokens: count(hi=448) = 8  # type: ignore[valid-type]
    labels: list[str] = Field(default_factory=lambda: ["a cat", "a dog", "a circle", "a square"], max_length=64)
    numerics: NumericsGate = NumericsGate()
    slo: EncodeSlo | None = None
    neuron: NeuronCompile = NeuronCompile()

    @model_validator(mode="after")
    def _check(self) -> EncodeWorkload:
        if not NAME.match(self.name):
            raise Refusal(f"{NAME_RULE}, got {self.name!r}", "name")
        family = family_of(self.model)
        if family is None:
            known = ", ".join([*TINY_MODELS, *HUB_MODELS])
            raise Refusal(f"unknown encoder model {self.model!r}; known: {known}", "model")
        if self.modality not in FAMILY_MODALITIES[family]:
            runs = ", ".join(FAMILY_MODALITIES[family])
            raise Refusal(f"{self.model} is a {family} model: it runs {runs}, not {self.modality}", "modality")
        unit = SHAPE_UNITS[self.modality]
        lo, hi = SHAPE_LIMITS[unit]
        for i, s in enumerate(self.shapes):
            if not lo <= s <= hi:
                raise Refusal(f"{self.modality} shapes are in {unit}, within [{lo}, {hi}], got {s}", "shapes", i)
        if self.inputs is not None and not self.inputs.startswith("s3://"):
            check_local_inputs(self.modality, Path(self.inputs))
        return self

    @property
    def family(self) -> str:
        return family_of(self.model) or ""


def backend_problem(w: EncodeWorkload, backend: str) -> str | None:
    """``modality: reason`` when ``backend`` cannot run ``w``'s modality with its model's family (and, on neuron,
    its ``neuron.path``), per :data:`BACKEND_PATHS`; None when it runs (or the backend is not one of the table's:
    the lane says so where it runs)."""
    table = BACKEND_PATHS.get(backend)
    if table is None:
        return None
    pair = (w.family, w.modality)
    paths = table.get(pair)
    if not paths:
        return f"modality: {w.modality} of {w.model} ({w.family}) does not run on the {backend} backend"
    if backend == "neuron" and w.neuron.path not in paths:
        return (
            f"modality: {w.modality} of {w.model} ({w.family}) has no neuron path {w.neuron.path!r} in this lane "
            f"(optimum-neuron's exporter has no route for it here); its neuron paths: {', '.join(paths)}"
        )
    return None


def backend_problems(workloads: list[EncodeWorkload], backend: str) -> list[str]:
    """``encoders.<i>.modality: reason`` for every workload ``backend`` cannot run (:func:`backend_problem`)."""
    return [f"encoders.{i}.{p}" for i, w in enumerate(workloads) if (p := backend_problem(w, backend))]


def check_local_inputs(modality: str, path: Path) -> None:
    """Every input file under ``path`` decodes as the modality's kind (WAV, image, JSONL of ``{"text": ...}`` or
    ``{"query", "passage"}``) and is not empty, else :class:`Refusal` naming the file."""
    from pipeline.encoder_inputs import InputFileError, read_inputs

    try:
        read_inputs(modality, path)
    except InputFileError as exc:
        raise Refusal(str(exc), "inputs") from None


def parse_workloads(raw: Any) -> list[EncodeWorkload]:
    """The workloads of a lane config (a list of mappings), each checked; the first problem refused as
    ``encoders.<i>.<field>: reason``."""
    if not isinstance(raw, list) or not raw:
        raise EncodeSpecError(f"encoders: a non-empty list of workload specs, got {raw!r}")
    out = []
    for i, spec in enumerate(raw):
        if isinstance(spec, EncodeWorkload):
            out.append(spec)
            continue
        try:
            out.append(EncodeWorkload.model_validate(spec))
        except ValidationError as exc:
            raise EncodeSpecError(first_refusal(exc, f"encoders.{i}")) from None
    names = [w.name for w in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise EncodeSpecError(f"encoders: the name {dup!r} is given twice")
    return out
