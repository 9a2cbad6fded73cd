"""finetune_serve's config: serve_sweep's fields, plus where the merged model (or an outside adapter) comes from."""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.lane_configs.serve_sweep import Config as SweepConfig


@dataclass
class Config(SweepConfig):
    source_run_id: str | None = field(default=None, metadata={
        "help": "run whose merge lane produced the model (default: this run)"})
    verify_models: list[str] | None = field(default=None, metadata={
        "help": "merged models pulled and hash-verified (default: every model of the profile); "
                "`models` are also served and swept"})
    adapter_uri: str | None = field(default=None, metadata={
        "help": "an adapter from outside the run (s3:// or local; .tar.gz or a directory): merged into its "
                "base model here, hashed, served and swept instead of the merge lane's output"})

    @classmethod
    def for_profile(cls, profile: str) -> "Config":
        base = SweepConfig.for_profile(profile)
        return cls(**{k: getattr(base, k) for k in base.__dataclass_fields__})
