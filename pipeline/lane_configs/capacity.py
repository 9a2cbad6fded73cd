"""capacity's config: per model and server config, an open-loop search for the highest rate meeting the SLO.

The search itself is :mod:`pipeline.capacity` (ladder, bisection, pass and saturation rules); this is what the
lane runs it on, and its time budget (``max_search_s``, the plan's duration for the lane).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.capacity import CONFIRM_MAX_S_DEFAULT, CONFIRM_OVERLOAD_DEFAULT, CapacitySpec
from pipeline.lane_configs.bounds import (
    ATTAINMENT,
    BOOT_S,
    BURSTINESS,
    CONFIRM_OVERLOAD,
    CONFIRM_S,
    DEVICE_MEM_GIB,
    POINT_S,
    RATE,
    SEARCH_BUDGET_S,
    SEARCH_PRECISION,
)
from pipeline.slo import default_slo, parse_slo


@dataclass
class Config:
    models: list[str] = field(default_factory=lambda: ["tiny-llama"], metadata={"help": "catalogue models"})
    server_configs: list[str] | dict[str, Any] = field(
        default_factory=lambda: ["A"],
        metadata={
            "help": "server configs (names or a map of variants, as serve_sweep's; one search per model x config)"
        },
    )
    shape: str = field(default="32:16", metadata={"help": "input:output lengths of every request"})
    slo: str | dict[str, Any] = field(
        default=default_slo("tiny").name,
        metadata={
            "help": "the SLO the search holds rates to: a set name from pipeline.slo or "
            "ttft_ms=..,tpot_ms=..[,percentile=..]"
        },
    )
    attainment: float = field(
        default=0.9, metadata={"help": "share of a rate's requests that must be good for it to pass", **ATTAINMENT}
    )
    rate_min: float | None = field(
        default=None,
        metadata={"help": "start rate R0 (req/s); None: one stream's rate from a short closed-loop probe", **RATE},
    )
    rate_max: float | None = field(default=None, metadata={"help": "the highest rate tried; None: no limit", **RATE})
    rate_max_from_roofline: bool = field(
        default=False,
        metadata={
            "help": "cap the search's top at the roofline's bound on req/s for the model, config, shape and "
            "instance type (predicted, not measured: no higher rate can be sustained; an explicit rate_max wins; "
            "the CPU has no datasheet ceiling, so not there)"
        },
    )
    precision: float = field(
        default=0.5,
        metadata={"help": "stop when (lowest failing - highest passing) / highest passing <= this", **SEARCH_PRECISION},
    )
    point_duration_s: float = field(default=2.0, metadata={"help": "seconds of arrivals per rate", **POINT_S})
    max_search_s: float = field(
        default=30.0,
        metadata={
            "help": "time budget of one search (the plan counts it); the bracket so far is the answer",
            **SEARCH_BUDGET_S,
        },
    )
    confirm_overload: float | None = field(
        default=CONFIRM_OVERLOAD_DEFAULT,
        metadata={
            "help": "the overload (fraction above capacity) the confirmation point at the answer must show: it lasts "
            "4 x the point's median latency / this (an overload this size adds 4 service times of queueing by its "
            "end), at least one point, at most confirm_max_s; None: the answer is not confirmed",
            **CONFIRM_OVERLOAD,
        },
    )
    confirm_max_s: float = field(
        default=CONFIRM_MAX_S_DEFAULT,
        metadata={
            "help": "the longest confirmation point (s; never shorter than a point); capped, it shows an overload of "
            "4 x the service time / this",
            **CONFIRM_S,
        },
    )
    burstiness: float = field(default=1.0, metadata={"help": "gamma shape of the arrivals (1 = Poisson)", **BURSTINESS})
    endpoint: str = field(default="completions", metadata={"help": "completions | chat"})
    health_timeout_s: float = field(default=180.0, metadata={"help": "boot budget", **BOOT_S})
    device_mem_gib: float | None = field(
        default=None, metadata={"help": "grid arithmetic memory; None: detect", **DEVICE_MEM_GIB}
    )

    workload: dict[str, Any] | None = field(
        default=None,
        metadata={
            "help": "a workload whose requests replace `shape` at every searched rate (drawn lengths, its prompt "
            "source, shared prefixes; docs/reference/workloads.md): a map of one NAME -> workload, or a run "
            "request's workload by name"
        },
    )

    def __post_init__(self) -> None:
        from pipeline.servers import check_server_configs
        from pipeline.workloads import lane_workload

        self.spec()  # a bad SLO or search fails when the config is built (plan time), not after the boot
        check_server_configs(self.server_configs)
        lane_workload(self.workload, "capacity")

    def spec(self) -> CapacitySpec:
        slo = parse_slo(self.slo)
        out = int(str(self.shape).split(":")[-1]) if ":" in str(self.shape) else 1
        return CapacitySpec(
            ttft_ms=slo.ttft_ms,
            tpot_ms=slo.tpot_ms,
            percentile=slo.percentile,
            slo_name=slo.name,
            attainment=self.attainment,
            rate_min=self.rate_min,
            rate_max=self.rate_max,
            precision=self.precision,
            point_duration_s=self.point_duration_s,
            max_search_s=self.max_search_s,
            output_len=max(out, 1),
            confirm_overload=self.confirm_overload,
            confirm_max_s=self.confirm_max_s,
        )

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "tiny":  # a confirmation of at most two points: the tiny search's budget stays 30 s
            return cls(confirm_max_s=4.0)
        # The predecessor's knee shape (512:128, Poisson), the 8B server SLO, 2-minute points, a 2-hour budget.
        return cls(
            models=["llama-3.1-8b-instruct"],
            shape="512:128",
            slo=default_slo("full").name,
            attainment=0.99,
            precision=0.1,
            point_duration_s=120.0,
            max_search_s=7200.0,
            health_timeout_s=5400.0,
        )
