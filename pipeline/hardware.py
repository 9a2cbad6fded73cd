"""What each accelerator can do at most, as data: a dated, sourced catalogue the roofline reads.

Per accelerator (a chip or a GPU, the unit :mod:`pipeline.instance_types` counts in ``accelerators``): its dense
peak FLOP/s per dtype, its memory and that memory's bandwidth, how many cores (NeuronCores; 1 for a GPU) share
them, and the interconnect between accelerators where tensor parallelism spans several. Every figure is the
vendor's published one, with its source and the month it was read (:data:`FACTS_MONTH`).

A bound must never sit below what a device can do, so where two readings of one figure disagree the higher is
kept and the other is named in the source (Inferentia2's and Trainium's HBM: "820 GB/sec" in older Neuron pages,
"820 GiB/sec" in newer ones). Sparsity figures are never used: serving runs dense matrices.

The CPU backend has no published figure that bounds a given host: its bandwidth and its matmul peak are what the
run's own ``host_cpu`` lane measured (``host_bench``: triad GB/s, matmul GFLOP/s, best of repeats). That is an
empirical ceiling, not a datasheet's, and data that sits in a cache can beat DRAM bandwidth: the roofline says so
on CPU points (``docs/reference/metrics.md``, "Roofline").

Stdlib + pydantic only (the planner and the Lambdas import it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

FACTS_MONTH = "2026-12"
GIB = 2**30

Dtype = Literal["fp32", "bf16", "fp16", "fp8", "int8"]
DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8")

# Server and config spellings -> the facts' dtype names (bytes per element beside them).
DTYPE_ALIASES: dict[str, str] = {
    "float32": "fp32",
    "fp32": "fp32",
    "float": "fp32",
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
    "fp8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "int8": "int8",
}
DTYPE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}


class UnknownAcceleratorError(KeyError):
    def __init__(self, name: str):
        super().__init__(f"no hardware facts for accelerator {name!r}; catalogued: {', '.join(ACCELERATORS)}")

    def __str__(self) -> str:
        return self.args[0]


class Accelerator(BaseModel):
    """One chip or GPU: the most it can compute and read per second (dense, published)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    vendor: Literal["AWS", "NVIDIA"]
    cores: int = Field(ge=1)  # NeuronCores per chip; 1 for a GPU
    memory_gib: float = Field(gt=0)
    memory_bytes_per_s: float = Field(gt=0)
    peak_flops: dict[str, float]  # dtype -> dense FLOP/s (int8: OP/s), per accelerator
    interconnect: str | None = None
    interconnect_bytes_per_s: float | None = Field(None, gt=0)  # per accelerator, all links
    source: str
    as_of: str = FACTS_MONTH

    @field_validator("peak_flops")
    @classmethod
    def _known_dtypes(cls, value: dict[str, float]) -> dict[str, float]:
        bad = [k for k, v in value.items() if k not in DTYPES or not v > 0]
        if bad:
            raise ValueError(f"peak_flops: unknown dtype or non-positive figure: {', '.join(bad)}")
        if "bf16" not in value and "fp16" not in value:
            raise ValueError("peak_flops: a 16-bit figure is required (serving's default dtype)")
        return value

    def peak(self, dtype: str) -> tuple[float, str]:
        """The dense peak for ``dtype`` and which figure it is: a dtype without a figure of its own computes at
        the 16-bit peak (weights in fp8/int8 are dequantised to it), fp32 without one at the 16-bit peak too
        (a bound, never below)."""
        key = DTYPE_ALIASES.get(dtype, dtype)
        if key in self.peak_flops:
            return self.peak_flops[key], key
        sixteen = "bf16" if "bf16" in self.peak_flops else "fp16"
        return self.peak_flops[sixteen], sixteen


_NEURON_V2 = "NeuronLink-v2"

ACCELERATORS: dict[str, Accelerator] = {
    a.name: a
    for a in (
        Accelerator(
            name="Inferentia2",
            vendor="AWS",
            cores=2,
            memory_gib=32,
            memory_bytes_per_s=820 * GIB,
            peak_flops={"bf16": 190e12, "fp16": 190e12, "fp8": 190e12, "fp32": 47.5e12, "int8": 380e12},
            interconnect=_NEURON_V2,
            source="AWS Neuron docs, Inferentia2 architecture: 2 NeuronCore-v2, 190 FP16/BF16/cFP8/TF32 TFLOPS, "
            "47.5 FP32 TFLOPS, 380 INT8 TOPS, 32 GiB HBM at 820 GiB/s (older pages: 820 GB/s; the higher is kept)",
        ),
        Accelerator(
            name="Trainium",
            vendor="AWS",
            cores=2,
            memory_gib=32,
            memory_bytes_per_s=820 * GIB,
            peak_flops={"bf16": 190e12, "fp16": 190e12, "fp8": 190e12, "fp32": 47.5e12, "int8": 380e12},
            interconnect=_NEURON_V2,
            source="AWS Neuron docs, Trainium architecture: 2 NeuronCore-v2, 190 FP16/BF16/cFP8/TF32 TFLOPS, "
            "47.5 FP32 TFLOPS, 32 GiB at 820 GiB/s (older pages: 820 GB/s; the higher is kept)",
        ),
        Accelerator(
            name="Trainium2",
            vendor="AWS",
            cores=8,
            memory_gib=96,
            memory_bytes_per_s=3.0e12,
            peak_flops={"bf16": 667e12, "fp16": 667e12, "fp8": 1299e12, "fp32": 181e12},
            interconnect="NeuronLink-v3",
            interconnect_bytes_per_s=1.28e12,
            source="AWS Neuron docs, Trainium2 architecture: 8 NeuronCore-v3, 667 BF16/FP16 TFLOPS, 1,299 FP8 "
            "TFLOPS (dense), 181 FP32, 96 GiB at 2.9 TB/s (the NKI guide: 3 TB/s; the higher is kept), "
            "NeuronLink-v3 1.28 TB/s per chip",
        ),
        Accelerator(
            name="A10G",
            vendor="NVIDIA",
            cores=1,
            memory_gib=24,
            memory_bytes_per_s=600e9,
            peak_flops={"bf16": 125e12, "fp16": 125e12, "fp32": 31.2e12, "int8": 250e12},
            source="NVIDIA A10 datasheet (the A10G is AWS's variant; its clocks may be lower, so this bounds it "
            "from above): 125 BF16/FP16 tensor TFLOPS dense, 31.2 FP32, 24 GB GDDR6 at 600 GB/s",
        ),
        Accelerator(
            name="L4",
            vendor="NVIDIA",
            cores=1,
            memory_gib=24,
            memory_bytes_per_s=300e9,
            peak_flops={"bf16": 121e12, "fp16": 121e12, "fp8": 242.5e12, "fp32": 30.3e12, "int8": 242.5e12},
            source="NVIDIA L4 datasheet: 121 BF16/FP16 tensor TFLOPS dense (242 with sparsity), 242.5 FP8, "
            "30.3 FP32, 24 GB GDDR6 at 300 GB/s",
        ),
        Accelerator(
            name="L40S",
            vendor="NVIDIA",
            cores=1,
            memory_gib=48,
            memory_bytes_per_s=864e9,
            peak_flops={"bf16": 362.05e12, "fp16": 362.05e12, "fp8": 733e12, "fp32": 91.6e12, "int8": 733e12},
            source="NVIDIA L40S datasheet: 362 BF16/FP16 tensor TFLOPS dense (733 with sparsity), 733 FP8, "
            "91.6 FP32, 48 GB GDDR6 at 864 GB/s",
        ),
        Accelerator(
            name="A100-40GB",
            vendor="NVIDIA",
            cores=1,
            memory_gib=40,
            memory_bytes_per_s=1555e9,
            peak_flops={"bf16": 312e12, "fp16": 312e12, "fp32": 19.5e12, "int8": 624e12},
            interconnect="NVLink 3",
            interconnect_bytes_per_s=600e9,
            source="NVIDIA A100 datasheet (SXM4 40 GB): 312 BF16/FP16 tensor TFLOPS dense, 19.5 FP32, "
            "HBM2 at 1,555 GB/s, NVLink 600 GB/s",
        ),
        Accelerator(
            name="H100",
            vendor="NVIDIA",
            cores=1,
            memory_gib=80,
            memory_bytes_per_s=3.35e12,
            peak_flops={"bf16": 989e12, "fp16": 989e12, "fp8": 1979e12, "fp32": 67e12, "int8": 1979e12},
            interconnect="NVLink 4",
            interconnect_bytes_per_s=900e9,
            source="NVIDIA H100 datasheet (SXM5): 989 BF16/FP16 tensor TFLOPS dense (1,979 with sparsity), "
            "1,979 FP8 dense, 67 FP32, 80 GB HBM3 at 3.35 TB/s, NVLink 900 GB/s",
        ),
        Accelerator(
            name="H200",
            vendor="NVIDIA",
            cores=1,
            memory_gib=141,
            memory_bytes_per_s=4.8e12,
            peak_flops={"bf16": 989e12, "fp16": 989e12, "fp8": 1979e12, "fp32": 67e12, "int8": 1979e12},
            interconnect="NVLink 4",
            interconnect_bytes_per_s=900e9,
            source="NVIDIA H200 datasheet (SXM): 989 BF16/FP16 tensor TFLOPS dense, 1,979 FP8 dense, "
            "141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s",
        ),
    )
}

# nvidia-smi's name of a GPU -> the catalogue's accelerator (a name not here has no facts: the bound is NULL).
GPU_NAMES: tuple[tuple[str, str], ...] = (
    ("H200", "H200"),
    ("H100", "H100"),
    ("A100", "A100-40GB"),
    ("L40S", "L40S"),
    ("A10G", "A10G"),
    ("L4", "L4"),
)


def get_accelerator(name: str) -> Accelerator:
    try:
        return ACCELERATORS[name]
    except KeyError:
        raise UnknownAcceleratorError(name) from None


def accelerator_of_gpu(device_name: str) -> str | None:
    """The catalogue's accelerator for an nvidia-smi GPU name (None: not catalogued; PCIe and NVL parts differ)."""
    upper = device_name.upper()
    if "PCIE" in upper or " NVL" in upper:
        return None
    return next((acc for marker, acc in GPU_NAMES if marker in upper), None)


def dtype_key(dtype: str | None, default: str = "bf16") -> str:
    """A server's dtype spelling as the facts' key (``bfloat16`` -> ``bf16``); None or ``auto``: ``default``."""
    if not dtype or dtype == "auto":
        return default
    return DTYPE_ALIASES.get(dtype.lower(), dtype.lower())
