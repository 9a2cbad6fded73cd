"""The lane registry: names, boxes, order, where each runner and config lives — without importing the lanes.

Listing lanes must stay cheap (no torch), so each entry names the module that
implements it; the module is imported only when the lane runs. A lane module
defines ``run(ctx: LaneContext, config: Config) -> None``; its ``Config`` (a dataclass with
defaults, help text and bounds in field metadata) is declared in ``pipeline.lane_configs.<lane>``
and named by the entry (``config``), so the planner checks configs without importing ``agents``.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Literal

BoxRole = Literal["trn1", "inf2"]


@dataclass(frozen=True, kw_only=True)
class LaneSpec:
    name: str
    module: str
    boxes: tuple[BoxRole, ...]
    order: int
    summary: str
    timeout_s: int = 3600  # on hardware (full profile); Step Functions TimeoutSeconds
    heartbeat_s: int = 300  # Step Functions HeartbeatSeconds
    # The longest a lane may go without a progress event (and the start-up grace before the first)
    # before the runner stops heartbeating it; None: heartbeat_s. Longer where a lane is silent for
    # a long stretch on purpose (a Neuron compile, a server boot).
    stall_s: int | None = None
    # Lanes whose committed output this lane consumes (it waits for them; when one does not succeed
    # this lane is recorded skipped with the reason). See pipeline.graph for the rules.
    needs: tuple[str, ...] = ()
    # A gate: a failure stops the rest of its box (the lanes after it in order), and the run is failed.
    gate: bool = False
    # Where the lane's Config is declared, "module:Class" (imported by config_class()); None: it takes no config.
    config: str | None = None

    @property
    def stall_window_s(self) -> int:
        return self.stall_s if self.stall_s is not None else self.heartbeat_s

    def load(self) -> ModuleType:
        """The runner's module (box-side: imports ``agents``)."""
        return importlib.import_module(self.module)

    def config_class(self) -> type | None:
        """The lane's Config dataclass, imported from where :attr:`config` says (None: the lane takes no config)."""
        if self.config is None:
            return None
        module, _, name = self.config.partition(":")
        return getattr(importlib.import_module(module), name or "Config", None)


class UnknownLaneError(KeyError):
    def __init__(self, name: str):
        self.name = name
        super().__init__(f"unknown lane {name!r}; valid lanes: {', '.join(lane_names())}")

    def __str__(self) -> str:
        return self.args[0]


_BOTH: tuple[BoxRole, ...] = ("trn1", "inf2")

_CONFIGS = "pipeline.lane_configs"

LANES: dict[str, LaneSpec] = {
    s.name: s
    for s in [
        LaneSpec(
            name="provenance",
            module="agents.lanes.provenance",
            boxes=_BOTH,
            order=10,
            summary="versions, drivers, instance/AMI, harness sha, artifact hashes",
            timeout_s=600,
            heartbeat_s=120,
            stall_s=300,
            config=f"{_CONFIGS}.provenance:Config",
        ),
        LaneSpec(
            name="preflight",
            module="agents.lanes.preflight",
            boxes=_BOTH,
            order=15,
            summary="the box's environment checked before compute is spent: venvs and pinned versions, CLIs on the "
            "lanes' PATH, NeuronCores free, compile cache writable with room, hub token and licence, "
            "dataset, clock",
            timeout_s=600,
            heartbeat_s=120,
            stall_s=300,
            gate=True,
            config=f"{_CONFIGS}.preflight:Config",
        ),
        LaneSpec(
            name="host_cpu",
            module="agents.lanes.host_cpu",
            boxes=_BOTH,
            order=20,
            summary="host memory bandwidth, matmul scaling, tokenizer throughput",
            timeout_s=900,
            heartbeat_s=120,
            stall_s=600,
            config=f"{_CONFIGS}.host_cpu:Config",
        ),
        LaneSpec(
            name="smoke",
            module="agents.lanes.smoke",
            boxes=_BOTH,
            order=30,
            summary="tiny model through train -> merge -> reload -> generate",
            timeout_s=3600,
            heartbeat_s=300,
            stall_s=3600,
            gate=True,
            config=f"{_CONFIGS}.smoke:Config",
        ),
        LaneSpec(
            name="precompile",
            module="agents.lanes.precompile",
            boxes=("trn1",),
            order=40,
            summary="training graph compile wall time, cold vs warm cache (no loss)",
            timeout_s=7200,
            heartbeat_s=600,
            stall_s=3600,
            config=f"{_CONFIGS}.precompile:Config",
        ),
        LaneSpec(
            name="nki",
            module="agents.lanes.nki",
            boxes=("trn1",),
            order=45,
            summary="NKI kernels from specs: simulator correctness against the reference, device compile (verbatim, "
            "classified errors), latency percentiles of the kernel and its torch reference per shape",
            timeout_s=3600,  # the bundled kernels' simulate and compiles: about 15 min (the plan's anchor)
            heartbeat_s=600,
            stall_s=3600,
            config=f"{_CONFIGS}.nki:Config",
        ),
        LaneSpec(
            name="sft",
            module="agents.lanes.sft",
            boxes=("trn1",),
            order=50,
            summary="LoRA SFT per model: loss trace, step times, tokens/s, MFU",
            timeout_s=6 * 3600,
            heartbeat_s=600,
            stall_s=3600,
            config=f"{_CONFIGS}.sft:Config",
        ),
        LaneSpec(
            name="from_scratch",
            module="agents.lanes.from_scratch",
            boxes=("trn1",),
            order=55,
            summary="small vision models (MLP, CNN, ViT) trained from scratch: test accuracy per epoch, steady "
            "step time, samples/s",
            timeout_s=3600,  # three small models at MNIST's size: about 330 s on one NeuronCore (the plan's anchor)
            heartbeat_s=600,
            stall_s=3600,
            config=f"{_CONFIGS}.from_scratch:Config",
        ),
        LaneSpec(
            name="merge",
            module="agents.lanes.merge",
            boxes=("trn1",),
            order=60,
            summary="merged weights + SHA-256 manifest, uploaded to the store",
            timeout_s=3600,
            heartbeat_s=300,
            stall_s=1800,
            needs=("sft",),
            config=f"{_CONFIGS}.merge:Config",
        ),
        LaneSpec(
            name="train_limits",
            module="agents.lanes.train_limits",
            boxes=("trn1",),
            order=65,
            summary="per model: the largest training sequence length that fits at a per-device batch size, "
            "bisected between a known-good and a known-bad bound (each probe a short LoRA SFT run in its "
            "own process)",
            timeout_s=4 * 3600,
            heartbeat_s=600,
            stall_s=7200,
            config=f"{_CONFIGS}.train_limits:Config",
        ),
        LaneSpec(
            name="serve_sweep",
            module="agents.lanes.serve_sweep",
            boxes=("inf2",),
            order=70,
            summary="per server config: boot (cold/warm compile), KV-derived grid, sweep points",
            timeout_s=4 * 3600,
            heartbeat_s=600,
            stall_s=3600,
            config=f"{_CONFIGS}.serve_sweep:Config",
        ),
        LaneSpec(
            name="capacity",
            module="agents.lanes.capacity",
            boxes=("inf2",),
            order=75,
            summary="per model and server config: open-loop search for the highest rate meeting the SLO (the knee)",
            timeout_s=4 * 3600,
            heartbeat_s=600,
            stall_s=3600,
            config=f"{_CONFIGS}.capacity:Config",
        ),
        LaneSpec(
            name="limits",
            module="agents.lanes.limits",
            boxes=("inf2",),
            order=77,
            summary="per model: the largest max_model_len / max_num_seqs that boots and answers, bisected between "
            "a known-good and a known-bad bound (each probe a boot)",
            timeout_s=8 * 3600,
            heartbeat_s=600,
            stall_s=7200,
            config=f"{_CONFIGS}.limits:Config",
        ),
        LaneSpec(
            name="sustained",
            module="agents.lanes.sustained",
            boxes=("inf2",),
            order=80,
            summary="closed loop for a fixed duration, windowed time series, retention",
            timeout_s=2 * 3600,
            heartbeat_s=600,
            stall_s=3600,
            config=f"{_CONFIGS}.sustained:Config",
        ),
        LaneSpec(
            name="quality",
            module="agents.lanes.quality",
            boxes=("inf2",),
            order=90,
            summary="fixed prompts, greedy, determinism and style delta base vs fine-tune",
            timeout_s=3600,
            heartbeat_s=600,
            stall_s=3600,
            needs=("merge",),
            config=f"{_CONFIGS}.quality:Config",
        ),
        LaneSpec(
            name="accuracy",
            module="agents.lanes.accuracy",
            boxes=("inf2",),
            order=92,
            summary="lm-eval tasks against the served endpoint: per-sample results of the base model, its "
            "fine-tune and each server variant (log-likelihood tasks only where the server returns prompt "
            "logprobs)",
            timeout_s=6 * 3600,
            heartbeat_s=600,
            stall_s=3600,
            needs=("merge",),
            config=f"{_CONFIGS}.accuracy:Config",
        ),
        LaneSpec(
            name="encode",
            module="agents.lanes.encode",
            boxes=("inf2",),
            order=94,
            summary="encoder models (speech-to-text, image embedding / zero-shot, text embedding, rerank) per batch "
            "and shape: compile and load, a numerics gate against a CPU fp32 reference, latency and items/s",
            timeout_s=3600,  # the full profile's estimate is 900 s (Whisper-small's compile alone took 157.6 s)
            heartbeat_s=600,
            stall_s=3600,
            config=f"{_CONFIGS}.encode:Config",
        ),
        LaneSpec(
            name="rag",
            module="agents.lanes.rag",
            boxes=("inf2",),
            order=96,
            summary="RAG appliance: corpus ingested (chunks/s), embedded, indexed in a vector store (pgvector, "
            "LanceDB); retrieval probes with and without the reranker; embed, search, rerank and generate per "
            "stage under load; the embedder placed beside the served model",
            timeout_s=2 * 3600,  # two encoder compiles (571 s, 909 s), the 8B boot (548 s warm), the load levels
            heartbeat_s=600,
            stall_s=3600,
            config=f"{_CONFIGS}.rag:Config",
        ),
        LaneSpec(
            name="finetune_serve",
            module="agents.lanes.finetune_serve",
            boxes=("inf2",),
            order=100,
            summary="the trained merged model pulled from the store, hashes verified, served and swept",
            timeout_s=4 * 3600,
            heartbeat_s=600,
            stall_s=3600,
            needs=("merge",),
            config=f"{_CONFIGS}.finetune_serve:Config",
        ),
        LaneSpec(
            name="qwen3_attempt",
            module="agents.lanes.qwen3_attempt",
            boxes=("inf2",),
            order=110,
            summary="boot + generate attempt with Qwen3: metrics or a structured failure record",
            timeout_s=2 * 3600,
            heartbeat_s=600,
            stall_s=3600,
            config=f"{_CONFIGS}.qwen3_attempt:Config",
        ),
    ]
}


def _extra_lanes() -> dict[str, LaneSpec]:
    """Lanes added without editing this file: NEURONPIPE_EXTRA_LANES="name[!]=module[:order][:needs+needs][:boxes],..."
    (plugins, tests); e.g. ``boom=tests.fixtures.lanes:55`` or ``late=pkg.late:120:merge``; ``!`` after the name
    makes the lane a gate, ``boxes`` (``trn1``, ``inf2``, ``trn1+inf2``; default both) where it runs."""
    out: dict[str, LaneSpec] = {}
    text = os.environ.get("NEURONPIPE_EXTRA_LANES", "").strip()
    for i, item in enumerate(x for x in text.split(",") if x.strip()):
        name, sep, rest = item.strip().partition("=")
        if not sep or not name or not rest:
            raise ValueError(f"NEURONPIPE_EXTRA_LANES entry {item!r}: expected name=module[:order]")
        module, _, tail = rest.partition(":")
        order, _, tail = tail.partition(":")
        needs, _, boxes = tail.partition(":")
        gate = name.endswith("!")
        name = name.removesuffix("!")
        roles = tuple(b for b in _BOTH if b in boxes.split("+")) if boxes else _BOTH
        out[name] = LaneSpec(
            name=name,
            module=module,
            boxes=roles or _BOTH,
            order=int(order) if order else 1000 + i,
            summary=f"extra lane from {module}",
            needs=tuple(n for n in needs.split("+") if n),
            gate=gate,
            config=f"{module}:Config",
        )  # its own module's Config, if it has one
    return out


def all_lanes() -> dict[str, LaneSpec]:
    lanes = {**LANES, **_extra_lanes()}
    if len(lanes) != len(LANES):
        validate_graph(lanes)
    return lanes


def lane_names() -> list[str]:
    return [s.name for s in sorted(all_lanes().values(), key=lambda s: s.order)]


def get_lane(name: str) -> LaneSpec:
    try:
        return all_lanes()[name]
    except KeyError:
        raise UnknownLaneError(name) from None


CELL_ENV = "NEURONPIPE_CELL"  # set by a matrix cell's scripts: its lanes commit as <lane>@<cell>


def cell_result_lane(name: str, cell: str) -> str:
    """A matrix cell's lane: ``serve_sweep@c03`` (every lane of a cell, whatever boxes it is declared for)."""
    return f"{name}@{cell}"


def result_lane(name: str, box_role: str, cell: str | None = None) -> str:
    """The lane name results are committed under.

    A lane that runs on both boxes (provenance, host_cpu, smoke) commits per box on AWS —
    ``provenance@trn1``, ``provenance@inf2`` — so the second box's attempt is neither skipped as
    "already committed" nor hides the first box's rows. Locally (box role ``local``) and for
    single-box lanes the name is the lane's own.
    """
    spec = get_lane(name)
    if cell:
        return cell_result_lane(spec.name, cell)
    if box_role in spec.boxes and len(spec.boxes) > 1:
        return f"{name}@{box_role}"
    return name


BOOT_RECORD_PREFIX = "boot@"


def boot_record_lane(box_role: str, segment: int) -> str:
    """The store "lane" a segment's boot record (``box_boots``, written by ``agents cache push``) commits under:
    ``boot@inf2.w1``. Not a lane of the catalogue: nothing runs it, the planner never skips or waits for it."""
    return f"{BOOT_RECORD_PREFIX}{box_role}.w{segment}"


def base_lane(result_name: str) -> str:
    """Inverse of :func:`result_lane`: ``provenance@inf2`` -> ``provenance``."""
    return result_name.split("@", 1)[0]


def plan_order(names: list[str] | None = None) -> list[LaneSpec]:
    """The given lanes (all when None) in plan order; unknown names fail listing the valid ones."""
    specs = [get_lane(n) for n in names] if names else list(LANES.values())
    seen: dict[str, LaneSpec] = {s.name: s for s in specs}
    return sorted(seen.values(), key=lambda s: s.order)


# What a request's ``preset`` runs (None: every lane of the catalogue).
PRESETS: dict[str, tuple[str, ...] | None] = {
    "full": None,
    "smoke": ("provenance", "preflight", "host_cpu", "smoke"),
    "finetune_serve": ("provenance", "preflight", "finetune_serve"),
}


def request_lanes(lanes: list[str] | None, preset: str | None) -> list[LaneSpec]:
    """The lanes a request runs, in plan order: its lane list, else its preset's (default ``full``)."""
    names = lanes if lanes is not None else PRESETS[preset or "full"]
    return plan_order(list(names) if names else None)


def validate_graph(specs: dict[str, LaneSpec]) -> None:
    """No unknown needs, no cycles (checked at import for the built-in lanes, and for extra lanes)."""
    from pipeline.graph import validate

    validate(specs)


validate_graph(LANES)
