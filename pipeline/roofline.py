"""The roofline of a serving point: the least time its work can take on its hardware, from facts alone.

Decode is bound by memory bandwidth (every step reads the weights and the KV cache of every sequence in the
batch), prefill by compute (2 FLOPs per parameter per prompt token) unless bandwidth binds first. For a point
of batch ``B`` (its concurrency, at most ``max_num_seqs``), input length ``I`` and output length ``O``:

* decode step:   ``t_step = max(bytes_step / BW, flops_step / peak)`` with
  ``bytes_step = W + B · L̄ · kv`` and ``flops_step = 2 · N · B``, where ``L̄ = I + O / 2`` is the mean context a
  sequence holds over its decode;
* **TPOT bound** = ``t_step``; **output tokens/s bound** = ``B / t_step``;
* **TTFT bound** = ``max(2 · N · I / peak, (W + I · kv) / BW)``: one prompt alone, no queue.

``N`` is the parameters that take part in a matrix multiply per token (an untied input embedding is a lookup,
not a multiply: it is left out), ``W = N × weight bytes per parameter`` (the served dtype, or 1 byte for 8-bit
weights), ``kv`` the KV bytes per token of the served KV dtype (layers × kv_heads × head_dim × 2 × bytes), ``BW``
and ``peak`` the hardware's (:mod:`pipeline.hardware`) for the devices the point's tensor parallelism spans: on
Neuron a NeuronCore's share of its chip (``tp / cores per chip`` of the chip's bandwidth and peak), on a GPU
``tp`` GPUs, on the CPU the run's own measured triad bandwidth and matmul peak.

What it leaves out, so that it stays a bound (never above what the hardware could do): attention's FLOPs at
length, activations' traffic, the collective communication of tensor parallelism, kernel launch, scheduling,
sampling, tokenisation, the network. The same formulas are SQL in ``analytics/views/sql/44_report_roofline.sql``
(a test keeps the two equal); ``docs/reference/metrics.md`` ("Roofline") states them once for a reader.

A prediction (``neuronpipe plan``'s what-if) is this module applied to a cell never measured: printed, marked
*predicted, not measured*, never written as a result row.

Stdlib, pydantic and the rules package (the planner imports it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pipeline.hardware import DTYPE_BYTES, get_accelerator
from pipeline.model_catalogue import ModelFacts

PREDICTED = "predicted, not measured"


@dataclass(frozen=True)
class ServedModel:
    """What the roofline needs of a model as one server config serves it."""

    matmul_params: int  # parameters in a matrix multiply per token (an untied input embedding left out)
    weight_bytes_per_param: float  # the served dtype's bytes (1 for 8-bit weights)
    kv_bytes_per_token: int  # layers × kv_heads × head_dim × 2 × the KV dtype's bytes
    tensor_parallel: int = 1
    dtype: str = "bf16"  # the compute dtype whose peak applies

    @property
    def weight_bytes(self) -> float:
        return self.matmul_params * self.weight_bytes_per_param

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Limits:
    """The hardware a point's devices add up to: bytes/s and FLOP/s at most, and where the figures come from."""

    bytes_per_s: float
    flops: float
    label: str  # e.g. "1× Inferentia2 (2 of 2 NeuronCores)"
    source: str


@dataclass(frozen=True)
class Bounds:
    tpot_s: float
    ttft_s: float
    output_tokens_per_s: float
    decode_bound_by: str  # "memory" | "compute"
    prefill_bound_by: str
    batch: int
    context: float  # L̄

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# vLLM's --quantization -> bytes per weight (a bound counts the fewest bytes a scheme could read: an unknown
# scheme is taken as 4-bit)
QUANTIZED_WEIGHT_BYTES: dict[str, float] = {
    "fp8": 1.0,
    "int8": 1.0,
    "int8_weight_only": 1.0,
    "w8a8": 1.0,
    "awq": 0.5,
    "gptq": 0.5,
}
UNKNOWN_QUANTIZED_BYTES = 0.5


def weight_bytes_per_param(dtype: str, quantization: str | None) -> float:
    if quantization:
        return QUANTIZED_WEIGHT_BYTES.get(quantization.lower(), UNKNOWN_QUANTIZED_BYTES)
    return float(DTYPE_BYTES.get(dtype, 2))


def served_model(
    facts: ModelFacts,
    *,
    dtype: str,
    kv_dtype_bytes: int,
    tensor_parallel: int = 1,
    quantization: str | None = None,
) -> ServedModel:
    """A model's roofline facts as a server config serves it (``dtype``: the facts' key, e.g. ``bf16``)."""
    return ServedModel(
        matmul_params=facts.matmul_params,
        weight_bytes_per_param=weight_bytes_per_param(dtype, quantization),
        kv_bytes_per_token=facts.kv_bytes_per_token(kv_dtype_bytes),
        tensor_parallel=max(1, int(tensor_parallel)),
        dtype=dtype,
    )


def served_as(facts: ModelFacts, config: Any, backend: str) -> ServedModel:
    """``facts`` as a server config (:class:`pipeline.servers.ServerConfig`) serves them on ``backend``: the CPU
    servers compute in float32, elsewhere the config's dtype; its KV dtype, quantization and tensor parallelism."""
    from pipeline.hardware import dtype_key
    from pipeline.servers import kv_dtype_bytes

    dtype = "fp32" if backend == "cpu" else dtype_key(config.dtype)
    return served_model(
        facts,
        dtype=dtype,
        kv_dtype_bytes=kv_dtype_bytes(config, DTYPE_BYTES.get(dtype, 2)),
        tensor_parallel=config.tensor_parallel,
        quantization=config.quantization,
    )


def accelerator_limits(accelerator: str, tensor_parallel: int, dtype: str) -> Limits:
    """The devices a tensor-parallel degree spans on a catalogued accelerator: NeuronCores (a share of a chip's
    bandwidth and peak per core) or GPUs."""
    acc = get_accelerator(accelerator)
    tp = max(1, int(tensor_parallel))
    chips = tp / acc.cores
    peak, which = acc.peak(dtype)
    if acc.cores > 1:
        label = f"{chips:g}× {accelerator} ({tp} of its NeuronCores)" if chips < 1 else f"{chips:g}× {accelerator}"
    else:
        label = f"{tp}× {accelerator}"
    return Limits(
        acc.memory_bytes_per_s * chips,
        peak * chips,
        label,
        f"{acc.source} (peak: {which}; as of {acc.as_of})",
    )


def cpu_limits(triad_gb_s: float, matmul_gflop_s: float) -> Limits:
    """The CPU backend's measured ceiling: the host_cpu lane's best triad bandwidth and matmul throughput."""
    return Limits(
        triad_gb_s * 1e9,
        matmul_gflop_s * 1e9,
        "CPU (measured)",
        "this run's host_cpu lane: best triad GB/s and matmul GFLOP/s on all threads",
    )


def decode_step_s(model: ServedModel, limits: Limits, batch: int, context: float) -> tuple[float, str]:
    mem = (model.weight_bytes + batch * context * model.kv_bytes_per_token) / limits.bytes_per_s
    compute = 2.0 * model.matmul_params * batch / limits.flops
    return (mem, "memory") if mem >= compute else (compute, "compute")


def prefill_s(model: ServedModel, limits: Limits, input_len: int) -> tuple[float, str]:
    compute = 2.0 * model.matmul_params * input_len / limits.flops
    mem = (model.weight_bytes + input_len * model.kv_bytes_per_token) / limits.bytes_per_s
    return (compute, "compute") if compute >= mem else (mem, "memory")


def mean_context(input_len: int, output_len: int) -> float:
    """L̄: the mean KV length a sequence holds over its decode steps."""
    return float(input_len) + float(output_len) / 2.0


def bounds(
    model: ServedModel, limits: Limits, *, batch: int, input_len: int, output_len: int, max_num_seqs: int | None = None
) -> Bounds:
    """The point's bounds at ``batch`` sequences (at most ``max_num_seqs``)."""
    b = max(1, min(int(batch), int(max_num_seqs)) if max_num_seqs else int(batch))
    context = mean_context(input_len, output_len)
    step, decode_by = decode_step_s(model, limits, b, context)
    first, prefill_by = prefill_s(model, limits, input_len)
    return Bounds(step, first, b / step, decode_by, prefill_by, b, context)


def kv_sequences(weight_bytes: float, kv_bytes_per_token: int, memory_bytes: float, max_model_len: int) -> int:
    """How many sequences of ``max_model_len`` the memory left after the weights holds (the grid's arithmetic)."""
    free = memory_bytes - weight_bytes
    per_seq = kv_bytes_per_token * max_model_len
    return int(free // per_seq) if free > 0 and per_seq > 0 else 0


def max_request_rate(output_tokens_per_s: float, output_len: int) -> float:
    """An upper bound on requests/s (a capacity search's predicted knee): the output tokens/s bound at the batch
    over the tokens each request outputs."""
    return output_tokens_per_s / max(1, int(output_len))


def predicted_rate_max(
    served: dict[str, Any], accelerator: str, input_len: int, output_len: int
) -> tuple[float, str] | None:
    """A capacity search's top from its served-model facts (``sweep_points.served_json``) on ``accelerator``: the
    most requests/s the hardware allows at ``max_num_seqs`` sequences, and the sentence that says so; None when the
    facts lack what the bound needs."""
    keys = ("matmul_params", "weight_bytes_per_param", "kv_bytes_per_token", "tensor_parallel", "dtype")
    if not served or any(served.get(k) is None for k in keys) or not served.get("max_num_seqs"):
        return None
    model = ServedModel(**{k: served[k] for k in keys})
    limits = accelerator_limits(accelerator, model.tensor_parallel, model.dtype)
    b = bounds(model, limits, batch=int(served["max_num_seqs"]), input_len=input_len, output_len=output_len)
    rate = max_request_rate(b.output_tokens_per_s, output_len)
    return rate, (
        f"rate_max {rate:.4g} req/s from the roofline ({PREDICTED}): {b.output_tokens_per_s:,.0f} output tok/s at "
        f"{b.batch} sequences on {limits.label} over {output_len} tokens per request"
    )
