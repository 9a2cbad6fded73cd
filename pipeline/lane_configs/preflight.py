"""preflight's config: what the gate checks on a box before any compute is spent."""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.model_catalog import model_names

GIB_FREE = {"min": 0.0, "max": 16384.0}
SKEW_S = {"min": 1.0, "max": 3600.0}
TIMEOUT_S = {"min": 1.0, "max": 600.0}


@dataclass
class Config:
    models: list[str] = field(default_factory=lambda: model_names("tiny"), metadata={
        "help": "models the run will load: their hub licence is checked (an authenticated HEAD) when they come "
                "from the hub"})
    dataset: str | None = field(default=None, metadata={
        "help": "the training dataset (a path or s3:// URI) whose reachability is checked; None = the bundled "
                "set or $NEURONPIPE_DATASET"})
    cache_free_gib: float = field(default=0.5, metadata={
        "help": "free space the compile cache's filesystem must have (GiB)", **GIB_FREE})
    max_clock_skew_s: float = field(default=60.0, metadata={
        "help": "largest difference from a reference clock (an HTTP Date header) before the gate fails: SigV4 "
                "rejects requests more than 5 minutes off", **SKEW_S})
    install_missing: bool = field(default=True, metadata={
        "help": "trn1: install the pinned optimum-neuron / trl into the training venv where missing (never into "
                "the vLLM venv)"})
    check_timeout_s: float = field(default=30.0, metadata={
        "help": "per network check / CLI call", **TIMEOUT_S})

    @classmethod
    def for_profile(cls, profile: str) -> "Config":
        if profile == "full":
            # an 8B model's NEFFs, NxDI artifacts and a merged checkpoint: the predecessor's cache held 1.2 GB of
            # NEFFs per config, the merged model ~16 GB
            return cls(models=model_names("full"), cache_free_gib=40.0)
        return cls()
