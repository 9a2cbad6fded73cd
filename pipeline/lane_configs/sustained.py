"""sustained's config: one model, a fixed closed-loop concurrency for a fixed duration, windows, retention."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.lane_configs.bounds import (
    BOOT_S,
    CONCURRENCY,
    DEVICE_MEM_GIB,
    RETENTION_K,
    SUSTAINED_S,
    WARMUP_REQUESTS,
    WINDOW_S,
    WINDOWS,
)
from pipeline.slo import default_slo, parse_slo


@dataclass
class Config:
    model: str = field(default="tiny-llama", metadata={"help": "catalogue model to serve"})
    server_config: str = field(default="A", metadata={"help": "server config (pipeline.servers)"})
    shape: str = field(default="64:64", metadata={"help": "input:output lengths"})
    concurrency: int | None = field(
        default=2,
        metadata={
            "help": "fixed closed-loop concurrency; None: the top of the config's KV-derived grid",
            **CONCURRENCY,
        },
    )
    duration_s: float = field(
        default=24.0, metadata={"help": "measured duration after warm-up requests", **SUSTAINED_S}
    )
    window_s: float = field(
        default=4.0, metadata={"help": "window length (docs/reference/metrics.md: 60 s on hardware)", **WINDOW_S}
    )
    warmup_windows: int = field(default=1, metadata={"help": "leading windows excluded from retention", **WINDOWS})
    retention_k: int = field(default=2, metadata={"help": "K windows compared for retention", **RETENTION_K})
    warmup_requests: int = field(
        default=2, metadata={"help": "warm-up requests before the clock starts", **WARMUP_REQUESTS}
    )
    endpoint: str = field(default="completions", metadata={"help": "completions | chat"})
    health_timeout_s: float = field(default=180.0, metadata={"help": "boot budget", **BOOT_S})
    device_mem_gib: float | None = field(
        default=None, metadata={"help": "grid arithmetic memory; None: detect", **DEVICE_MEM_GIB}
    )
    slo: str | dict[str, Any] = field(
        default=default_slo("tiny").name,
        metadata={
            "help": "the SLO the point carries (goodput): a set name from pipeline.slo or "
            "ttft_ms=..,tpot_ms=..[,percentile=..]; default per profile (docs/reference/slo.md)"
        },
    )

    workload: dict[str, Any] | None = field(
        default=None,
        metadata={
            "help": "a workload whose requests replace `shape` (drawn lengths, its prompt source, shared prefixes; "
            "docs/reference/workloads.md): a map of one NAME -> workload, or a run request's workload by name"
        },
    )

    def __post_init__(self) -> None:
        parse_slo(self.slo)  # a bad SLO fails when the config is built, not after the boot
        from pipeline.workloads import lane_workload

        lane_workload(self.workload, "sustained")

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "tiny":
            return cls()
        return cls(
            model="llama-3.1-8b-instruct",
            shape="512:256",
            concurrency=None,
            duration_s=1800.0,
            window_s=60.0,
            warmup_windows=2,
            retention_k=5,
            warmup_requests=8,
            health_timeout_s=5400.0,
            slo=default_slo("full").name,
        )
