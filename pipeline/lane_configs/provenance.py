"""provenance's config: how long to wait for IMDSv2 and each device CLI, and what else to record."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Config:
    imds_timeout_s: float = field(default=0.5, metadata={
        "help": "IMDSv2 timeout; short so off-EC2 runs are fast", "min": 0.01, "max": 60.0})
    query_imds: str = field(default="auto", metadata={
        "help": "auto (only where /sys says this is EC2) | always | never"})
    command_timeout_s: float = field(default=20.0, metadata={
        "help": "timeout for each device CLI", "min": 0.1, "max": 600.0})
    extra_packages: tuple[str, ...] = field(default=(), metadata={"help": "more distributions to record"})
