"""limits' config: per model, the largest server setting that boots and answers, by bisection.

The search rules are :mod:`pipeline.limits`; this is what the lane runs them on: the model, the server config the
probes start from, the searches and their boot budgets (each boot is a compile on a Neuron box: the plan states
what the budget costs), and, on the CPU, the memory cap that plays the device's memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.lane_configs.bounds import ANSWER_TOKENS, BOOT_S, MEMORY_CAP_MIB, PROBES


@dataclass
class Config:
    model: str = field(default="tiny-llama", metadata={"help": "the model whose limits are searched"})
    server_config: str = field(
        default="A",
        metadata={
            "help": "the catalogue config the probes start from (each probe changes the searched setting, and the "
            "other setting to the search's `at`)"
        },
    )
    searches: list[dict[str, Any]] = field(
        default_factory=list,
        metadata={
            "help": "bisections: {kind: max_model_len | max_num_seqs, good, bad, at (the other setting), precision, "
            "max_boots}; none: the lane has nothing to do (skipped)"
        },
    )
    max_boots: int = field(
        default=8,
        metadata={
            "help": "boot budget of a search that does not set its own (each boot is a compile on a box)",
            **PROBES,
        },
    )
    memory_cap_mib: float | None = field(
        default=None,
        metadata={
            "help": "CPU only: the memory the server's KV cache may take (a device's, played by the CPU): the whole "
            "cache must fit it and is reserved at boot; ignored elsewhere",
            **MEMORY_CAP_MIB,
        },
    )
    answer_tokens: int = field(
        default=4,
        metadata={"help": "a probe that booted must answer one request of this many output tokens", **ANSWER_TOKENS},
    )
    health_timeout_s: float = field(
        default=180.0, metadata={"help": "boot budget of one probe (a cold 8B compile takes tens of minutes)", **BOOT_S}
    )

    def __post_init__(self) -> None:
        from pipeline.limits import check_searches

        check_searches(self.searches, self.max_boots)  # a bad search fails at plan time, not after a boot

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "tiny":
            # the CPU's own limit: the most sequences of 1024 tokens whose whole KV cache (2 KiB per token of the
            # tiny model: 2 MiB a sequence) fits the server's 48 MiB cap, reserved for real at each boot; the
            # bounds straddle the arithmetic's 24 by a factor of two each way (16 fits in 32 MiB, 32 needs 64 MiB),
            # so the bisection brackets it in 6 boots (each about 4.5 s on 2 cores) where 1 to 64 took 8
            return cls(
                searches=[{"kind": "max_num_seqs", "good": 16, "bad": 32, "at": 1024, "max_boots": 8}],
                memory_cap_mib=48.0,
            )
        return cls(model="llama-3.1-8b-instruct", health_timeout_s=7200.0)
