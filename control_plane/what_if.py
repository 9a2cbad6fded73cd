"""The plan's what-if: the roofline's bounds (:mod:`pipeline.roofline`) for each serving box of a plan whose model
has catalogue facts, and the warnings its facts give before a cold compile is paid.

Every figure here is **predicted, not measured** (:data:`pipeline.roofline.PREDICTED`): printed by ``neuronpipe
plan`` and put in its ``--json``, never written to the results store. Per (box, model, server config) and a few
shapes (:data:`SHAPES`, input/output tokens) at batch 1 and at the config's ``max_num_seqs``: the TPOT and TTFT
lower bounds and the output tokens/s upper bound, with ``accelerator_limits(instance type's accelerator,
tensor_parallel, dtype)``.

Warnings (a line each, never a refusal; a config in which not one sequence fits is refused by
``ServingTarget.kv_problem`` already): fewer sequences of ``max_model_len`` fit the memory the config's tensor
parallelism spans (less the weights) than ``max_num_seqs`` declares; on Neuron, a ``max_model_len`` past the
context-length compile cliff the predecessor measured on inf2 (:data:`NEURON_CONTEXT_CLIFF`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from pipeline.roofline import PREDICTED, accelerator_limits, bounds, max_request_rate, served_as

SHAPES: tuple[tuple[int, int], ...] = ((128, 128), (1024, 128))
SOURCE = f"PREDICTED ({PREDICTED}): pipeline.roofline"
GIB = 2**30
# The predecessor's measured context cliff on inf2.xlarge at 8 sequences (vLLM 0.16 + NxDI 0.10, neuronx-cc
# 2.26): max_model_len 3072 boots, 4096 fails compiling (NCC_INLA001 in the context-encoding buckets at 4096,
# 6144, 8192, 9216 and 10240): the limits interval (3072, 4096].
NEURON_CONTEXT_CLIFF = (3072, 4096, 8)


@dataclass(frozen=True)
class Served:
    """One (box, model, server config) of a plan: where it serves, what, with which config."""

    box: str
    instance_type: str
    model: str
    config: Any  # pipeline.servers.ServerConfig


@dataclass(frozen=True)
class WhatIfRow:
    box: str
    instance_type: str
    model: str
    config: str
    input_len: int
    output_len: int
    batch: int
    tpot_ms: float
    ttft_ms: float
    output_tokens_per_s: float
    decode_bound_by: str
    limits: str
    source: str = SOURCE

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _facts(model: str) -> Any:
    from pipeline.model_catalogue import MODEL_CATALOGUE

    entry = MODEL_CATALOGUE.get(model)
    return entry.facts if entry is not None else None


def what_if_rows(served: Iterable[Served], shapes: Iterable[tuple[int, int]] = SHAPES) -> list[WhatIfRow]:
    """The bounds of each served (model, config) with facts, per shape (that fits max_model_len), at batch 1
    and at max_num_seqs."""
    from pipeline.instance_types import get_instance_type

    out = []
    for s in served:
        facts = _facts(s.model)
        if facts is None:
            continue
        itype = get_instance_type(s.instance_type)
        model = served_as(facts, s.config, itype.backend)
        limits = accelerator_limits(itype.accelerator, model.tensor_parallel, model.dtype)
        for i, o in shapes:
            if i + o > s.config.max_model_len:
                continue
            for batch in dict.fromkeys((1, int(s.config.max_num_seqs))):
                b = bounds(model, limits, batch=batch, input_len=i, output_len=o, max_num_seqs=s.config.max_num_seqs)
                out.append(
                    WhatIfRow(
                        s.box,
                        s.instance_type,
                        s.model,
                        s.config.name,
                        i,
                        o,
                        b.batch,
                        b.tpot_s * 1e3,
                        b.ttft_s * 1e3,
                        b.output_tokens_per_s,
                        b.decode_bound_by,
                        limits.label,
                    )
                )
    return out


def fit_warnings(served: Iterable[Served]) -> list[str]:
    """One line per (box, model, config) the facts say cannot work as declared (see the module's doc)."""
    from pipeline.instance_types import get_instance_type
    from pipeline.roofline import kv_sequences

    out = []
    for s in served:
        facts, cfg, it = _facts(s.model), s.config, get_instance_type(s.instance_type)
        if facts is None:
            continue
        model = served_as(facts, cfg, it.backend)
        tp = min(model.tensor_parallel, it.cores)
        memory = it.accelerator_memory_gib * GIB * tp / it.cores
        weights = facts.params * model.weight_bytes_per_param
        per_seq = model.kv_bytes_per_token * cfg.max_model_len
        fits = kv_sequences(weights, model.kv_bytes_per_token, memory, cfg.max_model_len)
        where = f"{s.box} ({s.instance_type}) {s.model} config {cfg.name}"
        if 0 < fits < cfg.max_num_seqs:
            out.append(
                f"warning: {where}: {weights / GIB:.1f} GiB of weights and {per_seq / GIB:.2f} GiB of KV per "
                f"sequence of {cfg.max_model_len} tokens in {memory / GIB:g} GiB (tensor parallel {tp} of "
                f"{it.cores} cores): at most {fits} sequence(s) fit where max_num_seqs declares {cfg.max_num_seqs}"
            )
        good, bad, seqs = NEURON_CONTEXT_CLIFF
        if it.backend == "neuron" and cfg.max_model_len > good:
            out.append(
                f"warning: {where}: max_model_len {cfg.max_model_len} is past the compile cliff measured on inf2 "
                f"at {seqs} sequences: {good} booted, {bad} failed compiling (NCC_INLA001); a cold compile may fail"
            )
    return out


def plan_served(plan: Any) -> list[Served]:
    """Each serving (box, model, server config) of a plan's segments, resolved on the box's own backend."""
    from control_plane.lane_configs import built_config
    from control_plane.request_configs import SERVER_CONFIGS_FIELD
    from pipeline.instance_types import get_instance_type
    from pipeline.lanes import get_lane
    from pipeline.servers import resolve_server_configs, served_models

    out: dict[tuple[str, str, str], Served] = {}
    for seg in plan.segments:
        backend = get_instance_type(seg.instance_type).backend
        for step in seg.lanes:
            built = built_config(get_lane(step.lane), plan.request.profile, step.config, SERVER_CONFIGS_FIELD)
            if built is None:
                continue
            configs = resolve_server_configs(built.server_configs, plan.request.profile, backend, check=False)
            for model in served_models(built):
                for cfg in configs:
                    box = seg.box or seg.box_role
                    out.setdefault((box, model, cfg.name), Served(box, seg.instance_type, model, cfg))
    return list(out.values())


def what_if_json(plan: Any) -> Mapping[str, Any]:
    """The plan's what-if for ``plan --json``: its rows and warnings, marked predicted."""
    served = plan_served(plan)
    return {
        "source": SOURCE,
        "rows": [r.to_json() for r in what_if_rows(served)],
        "warnings": fit_warnings(served),
    }


def capacity_knees(plan: Any) -> list[str]:
    """A line per capacity search with no start rate (``rate_min``) on a model with facts: the predicted knee,
    an upper bound on requests/s (the output tokens/s bound at max_num_seqs over the search's output tokens)."""
    from control_plane.lane_configs import built_config
    from pipeline.instance_types import get_instance_type
    from pipeline.lanes import get_lane
    from pipeline.servers import resolve_server_configs, served_models

    out = []
    for seg in plan.segments:
        backend = get_instance_type(seg.instance_type).backend
        for step in (st for st in seg.lanes if st.lane == "capacity"):
            built = built_config(get_lane("capacity"), plan.request.profile, step.config, "rate_min")
            if built is None or built.rate_min is not None or ":" not in str(built.shape):
                continue
            i, o = (int(x) for x in str(built.shape).split(":")[-2:])
            configs = resolve_server_configs(built.server_configs, plan.request.profile, backend, check=False)
            for m in served_models(built):
                for cfg in configs:
                    rows = what_if_rows([Served(seg.box or seg.box_role, seg.instance_type, m, cfg)], [(i, o)])
                    if rows:  # the last row: at max_num_seqs
                        out.append(_knee_line(step.result_lane or step.lane, rows[-1], i, o))
    return out


def _knee_line(lane: str, r: WhatIfRow, i: int, o: int) -> str:
    knee = max_request_rate(r.output_tokens_per_s, o)
    return (
        f"{lane} {r.model} config {r.config}: no start rate, its ladder starts from a closed-loop probe; the "
        f"predicted knee is at most {knee:.2f} req/s ({i}:{o} at {r.batch} sequences: "
        f"{r.output_tokens_per_s:,.0f} output tok/s / {o} tokens; {PREDICTED}); lane config "
        "rate_max_from_roofline caps the search there"
    )
