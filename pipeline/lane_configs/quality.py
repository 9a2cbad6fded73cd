"""quality's config: the base model whose fine-tune is compared, the completion budget, the seed."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.lane_configs.bounds import BOOT_S, NEW_TOKENS, SEED


@dataclass
class Config:
    model: str = field(default="tiny-llama", metadata={"help": "catalogue model (base) whose fine-tune is compared"})
    server_config: str = field(default="A", metadata={"help": "server config both variants are served with"})
    max_tokens: int = field(
        default=32, metadata={"help": "completion budget per ask (natural stops allowed)", **NEW_TOKENS}
    )
    seed: int = field(default=0, metadata={"help": "request seed", **SEED})
    finetune: bool = field(default=True, metadata={"help": "also ask the merged fine-tune (from the merge lane)"})
    source_run_id: str | None = field(
        default=None, metadata={"help": "run whose merge lane produced the fine-tune (default: this run)"}
    )
    health_timeout_s: float = field(default=180.0, metadata={"help": "boot budget", **BOOT_S})

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "tiny":
            return cls()
        return cls(model="llama-3.1-8b-instruct", max_tokens=256, health_timeout_s=5400.0)
