"""merge's config: which models' adapters to merge, the shard size, the reload check."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.lane_configs.bounds import SEED
from pipeline.model_catalogue import model_names


@dataclass
class Config:
    models: list[str] = field(
        default_factory=lambda: model_names("tiny"), metadata={"help": "models whose sft adapters to merge"}
    )
    max_shard_size: str = field(default="5GB", metadata={"help": "safetensors shard size of the merged model"})
    verify_generate: bool = field(
        default=True, metadata={"help": "reload the merged model from disk and generate a few tokens before uploading"}
    )
    seed: int = field(default=0, metadata={"help": "seed of the tiny base models (must match sft)", **SEED})

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "full":
            return cls(models=model_names("full"), verify_generate=False)
        return cls()
