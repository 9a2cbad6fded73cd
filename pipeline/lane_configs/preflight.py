"""preflight's config: what the gate checks on a box before any compute is spent."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.lane_configs.bounds import CACHE_FREE_GIB, CHECK_TIMEOUT_S, CLOCK_SKEW_S
from pipeline.model_catalogue import model_names


@dataclass
class Config:
    models: list[str] = field(
        default_factory=lambda: model_names("tiny"),
        metadata={
            "help": "models the run will load: their hub licence is checked (an authenticated HEAD) when they come "
            "from the hub"
        },
    )
    dataset: str | None = field(
        default=None,
        metadata={
            "help": "the training dataset (a path or s3:// URI) whose reachability is checked; None = the bundled "
            "set or $NEURONPIPE_DATASET"
        },
    )
    cache_free_gib: float = field(
        default=0.5, metadata={"help": "free space the compile cache's filesystem must have (GiB)", **CACHE_FREE_GIB}
    )
    max_clock_skew_s: float = field(
        default=60.0,
        metadata={
            "help": "largest difference from a reference clock (an HTTP Date header) before the gate fails: SigV4 "
            "rejects requests more than 5 minutes off",
            **CLOCK_SKEW_S,
        },
    )
    install_missing: bool = field(
        default=True,
        metadata={
            "help": "trn1: install the pinned optimum-neuron / trl into the training venv where missing (never into "
            "the vLLM venv)"
        },
    )
    check_timeout_s: float = field(default=30.0, metadata={"help": "per network check / CLI call", **CHECK_TIMEOUT_S})

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "full":
            # an 8B model's NEFFs, NxDI artifacts and a merged checkpoint: the predecessor's cache held 1.2 GB of
            # NEFFs per config, the merged model ~16 GB
            return cls(models=model_names("full"), cache_free_gib=40.0)
        return cls()
