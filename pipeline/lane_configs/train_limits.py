"""train_limits' config: per model, the largest training sequence length that fits at a per-device batch size.

The search rules are :mod:`pipeline.limits` (kind ``train_seq_len``, ``at`` the per-device batch size); this is
what the lane runs them on: the model, the searches and their probe budgets (each probe is a short LoRA SFT run,
a compile of the training graph on trn1: the plan states what the budget costs), the steps of a probe, and, on
the CPU, the memory cap that plays the device's memory. The LoRA settings are the sft lane's at the profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.lane_configs.bounds import BOOT_S, MEMORY_CAP_MIB, PROBE_STEPS, PROBES, SEED


@dataclass
class Config:
    model: str = field(default="tiny-llama", metadata={"help": "the model whose training limit is searched"})
    searches: list[dict[str, Any]] = field(
        default_factory=list,
        metadata={
            "help": "bisections: {kind: train_seq_len, good, bad, at (the per-device batch size; default the sft "
            "lane's), precision, max_boots (its probe budget)}; none: the lane has nothing to do (skipped)"
        },
    )
    max_boots: int = field(
        default=6,
        metadata={
            "help": "probe budget of a search that does not set its own (each probe compiles the training graph on "
            "trn1)",
            **PROBES,
        },
    )
    steps: int = field(
        default=2,
        metadata={
            "help": "optimizer steps of one probe (the first compiles on trn1; memory peaks within the first)",
            **PROBE_STEPS,
        },
    )
    memory_cap_mib: float | None = field(
        default=None,
        metadata={
            "help": "CPU only: a probe's address space may grow this much once its libraries are imported and the "
            "model has loaded (a device's memory, played by the CPU); ignored elsewhere",
            **MEMORY_CAP_MIB,
        },
    )
    probe_timeout_s: float = field(
        default=600.0,
        metadata={
            "help": "one probe's budget, compile included (a cold 8B training-graph compile takes ~25 min)",
            **BOOT_S,
        },
    )
    seed: int = field(default=0, metadata={"help": "seed for init, data order and the tiny models", **SEED})

    def __post_init__(self) -> None:
        from pipeline.limits import TRAINING_KINDS, Ceiling, check_searches
        from pipeline.model_catalogue import get_model

        facts = get_model(self.model).facts  # known for catalogue models; a tiny one's on the box (config.json)
        ceiling = Ceiling(facts.max_positions, f"{self.model}'s max_position_embeddings") if facts else None
        check_searches(self.searches, self.max_boots, TRAINING_KINDS, ceiling)  # fails at plan time, not on a box

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "tiny":
            # the CPU's own limit: the longest packed sequence whose LoRA SFT step fits when a probe's address
            # space may grow by 400 MiB after the model loads (about 0.24 MiB per token of the tiny llama at
            # batch 1 on top of ~80 MiB of trainer and optimizer; measured, not computed, in
            # docs/guides/training-limits.md; the tiny model has 2,048 positions, so the bad bound is its maximum)
            return cls(
                searches=[
                    {"kind": "train_seq_len", "good": 256, "bad": 2048, "at": 1, "precision": 256, "max_boots": 6}
                ],
                memory_cap_mib=400.0,
            )
        # on a box the search is declared, like the serving limits lane's: each probe is a ~25-minute compile of the
        # training graph, so a default run does not spend hours on it. The predecessor's Phase 2 (seq 4,096 trained
        # at batch 1, 8,192 failed its compile with NCC_EOOM002) as a request: docs/guides/training-limits.md
        return cls(model="llama-3.1-8b-instruct", probe_timeout_s=3600.0)
