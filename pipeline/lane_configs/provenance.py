"""provenance's config: how long to wait for IMDSv2 and each device CLI, and what else to record."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.lane_configs.bounds import COMMAND_TIMEOUT_S, IMDS_TIMEOUT_S


@dataclass
class Config:
    imds_timeout_s: float = field(
        default=0.5, metadata={"help": "IMDSv2 timeout; short so off-EC2 runs are fast", **IMDS_TIMEOUT_S}
    )
    query_imds: str = field(
        default="auto", metadata={"help": "auto (only where /sys says this is EC2) | always | never"}
    )
    command_timeout_s: float = field(
        default=20.0, metadata={"help": "timeout for each device CLI", **COMMAND_TIMEOUT_S}
    )
    extra_packages: tuple[str, ...] = field(default=(), metadata={"help": "more distributions to record"})
