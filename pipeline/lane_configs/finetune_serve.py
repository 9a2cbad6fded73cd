"""finetune_serve's config: serve_sweep's fields, plus where the merged model (or an outside adapter) comes from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.lane_configs.serve_sweep import TINY_VARIANTS
from pipeline.lane_configs.serve_sweep import Config as SweepConfig

# The tiny profile measures "merge or serve adapters": the merged fine-tune as A (and its A/A copy, the noise
# floor), and the same fine-tune unmerged — the sft adapter loaded on the base model, under two names that take
# 3:1 of the requests (two adapter slots, mixed in every batch). B and the repeated turn are serve_sweep's: here
# each config is swept once, to keep make run's time
TINY_FT_VARIANTS: dict[str, Any] = {
    **{k: v for k, v in TINY_VARIANTS.items() if k in ("A", "A-copy")},
    "lora": {
        "base": "A",
        "lora": {"adapters": {"ft": {"source": "sft", "weight": 3}, "ft-b": {"source": "sft", "weight": 1}}},
        "description": "the fine-tune served unmerged: the sft adapter on the base model under two names (3:1)",
    },
}


@dataclass
class Config(SweepConfig):
    source_run_id: str | None = field(
        default=None, metadata={"help": "run whose merge lane produced the model (default: this run)"}
    )
    verify_models: list[str] | None = field(
        default=None,
        metadata={
            "help": "merged models pulled and hash-verified (default: every model of the profile); "
            "`models` are also served and swept"
        },
    )
    adapter_uri: str | None = field(
        default=None,
        metadata={
            "help": "an adapter from outside the run (s3:// or local; .tar.gz or a directory): merged into its "
            "base model here, hashed, served and swept instead of the merge lane's output"
        },
    )

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        base = SweepConfig.for_profile(profile)
        fields = {k: getattr(base, k) for k in base.__dataclass_fields__}
        if profile == "tiny":
            fields["server_configs"] = dict(TINY_FT_VARIANTS)
            fields["workloads"] = None  # serve_sweep measures the workloads; the fine-tune its shapes and adapters
            fields["sweep_repeats"] = 1
        return cls(**fields)
