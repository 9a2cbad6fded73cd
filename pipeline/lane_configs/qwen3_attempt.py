"""qwen3_attempt's config: the Qwen3 model, the first-token probe, then a sweep like serve_sweep's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.lane_configs.serve_sweep import FULL_SWEEP, SweepFields


@dataclass
class Config(SweepFields):
    model: str = field(default="tiny-qwen3", metadata={"help": "the Qwen3 catalogue model"})
    server_configs: list[str] | dict[str, Any] = field(
        default_factory=lambda: ["A"],
        metadata={
            "help": "server configs (names or a map of variants, as serve_sweep's) to sweep once Qwen3 boots and "
            "generates"
        },
    )
    probe_shape: str = field(default="16:8", metadata={"help": "input:output of the first-token probe"})

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "tiny":
            return cls()
        return cls(
            model="qwen3-8b",
            server_configs=["A", "B"],
            shapes={"A": ["128:128", "512:256"], "B": ["2048:256"]},
            **FULL_SWEEP,
        )
