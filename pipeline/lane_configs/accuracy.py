"""accuracy's config: which tasks lm-eval runs against which served models and server configs, how many samples,
within what time budget (the lane's timeout follows it).

The first server config is the baseline: the base model and (``finetune``) its fine-tune are evaluated on it; every
further config is a variant, evaluated on the base model and paired with the baseline's base evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.lane_configs.bounds import (
    BOOT_S,
    EVAL_BUDGET_S,
    FEWSHOT,
    NEW_TOKENS,
    REQUEST_TIMEOUT_S,
    RETRIES,
    SAMPLES,
    SEED,
)

# rows of accuracy_samples / accuracy_tasks name the base model's pair so; a variant may not take either name
PAIR_VARIANTS = ("base", "finetune")
# the lane's timeout: its time budget plus this (the last request's timeout, the commit)
TIMEOUT_MARGIN_S = 1800


@dataclass
class Config:
    model: str = field(default="tiny-llama", metadata={"help": "catalogue model (base) evaluated, and its fine-tune"})
    server_configs: list[str] | dict[str, Any] = field(
        default_factory=lambda: ["A"],
        metadata={
            "help": "server configs (names or a map of variants, as serve_sweep's): the first is the baseline the base "
            "model and its fine-tune are evaluated on; each other one is a variant evaluated on the base model"
        },
    )
    tasks: list[str] | None = field(
        default=None,
        metadata={
            "help": "lm-eval tasks: shipped (np_arith, np_classify, np_facts, np_choice), standard (gsm8k, mmlu, "
            "arc_easy, arc_challenge, hellaswag: with datasets.NAME) or of task_dir; None: the shipped tasks "
            "the server can run (np_choice only where it returns prompt logprobs)"
        },
    )
    task_dir: str | None = field(
        default=None,
        metadata={
            "help": "a local or s3:// directory of lm-eval task YAMLs and their data (data_files relative to a YAML "
            "are read from its directory)"
        },
    )
    datasets: dict[str, str] | None = field(
        default=None,
        metadata={
            "help": "standard task -> a local or s3:// directory of its dataset, one file per split "
            "(<split>.jsonl or .parquet; mmlu: <subject>/<split>.jsonl); docs/reference/accuracy.md"
        },
    )
    sample_limit: int | None = field(
        default=16,
        metadata={"help": "samples per task (lm-eval's limit: its first documents); None: every document", **SAMPLES},
    )
    max_gen_toks: int | None = field(
        default=None, metadata={"help": "generation budget per sample; None: each task's own", **NEW_TOKENS}
    )
    num_fewshot: int | None = field(
        default=None,
        metadata={"help": "few-shot examples per prompt; None: each task's own (the shipped tasks: 0)", **FEWSHOT},
    )
    seed: int = field(
        default=1234,
        metadata={"help": "lm-eval's seeds (sampling order, few-shot draw) and every request's seed", **SEED},
    )
    finetune: bool = field(default=True, metadata={"help": "also evaluate the merged fine-tune (from the merge lane)"})
    source_run_id: str | None = field(
        default=None, metadata={"help": "run whose merge lane produced the fine-tune (default: this run)"}
    )
    time_budget_s: float = field(
        default=600.0,
        metadata={
            "help": "the lane's time budget, boots included; requests past it fail as samples (the lane's timeout is "
            f"this + {TIMEOUT_MARGIN_S} s)",
            **EVAL_BUDGET_S,
        },
    )
    request_timeout_s: float = field(default=120.0, metadata={"help": "one request's timeout", **REQUEST_TIMEOUT_S})
    max_retries: int = field(
        default=1,
        metadata={
            "help": "retries of a request that failed to connect or got a 5xx (a 4xx is an answer: never retried)",
            **RETRIES,
        },
    )
    health_timeout_s: float = field(default=180.0, metadata={"help": "boot budget of each server", **BOOT_S})

    def __post_init__(self) -> None:
        from pipeline.servers import ServerVariantError, check_server_configs

        names = [n for n, _ in check_server_configs(self.server_configs)]  # ServerVariantError: plan time
        taken = [n for n in names[1:] if n in PAIR_VARIANTS]
        if taken:
            raise ServerVariantError(
                f"server_configs: {taken[0]!r} names the base model's pair in the accuracy "
                "rows (base, finetune); give the variant another name"
            )
        if self.tasks is not None and not isinstance(self.tasks, list):
            raise ValueError(f"tasks: a list of task names, got {self.tasks!r}")

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "tiny":
            from pipeline.lane_configs.serve_sweep import tiny_int8_variants

            # A, and serve_sweep's int8 variant where the local server has it: its accuracy verdict beside its speed
            int8 = tiny_int8_variants()
            return cls(server_configs={"A": {}, **int8}) if int8 else cls()
        # every shipped document (the largest task has 200), the 8B boot budget; 5.5 h: with the margin, a 6 h lane
        return cls(
            model="llama-3.1-8b-instruct",
            sample_limit=250,
            time_budget_s=19800.0,
            request_timeout_s=600.0,
            max_retries=2,
            health_timeout_s=5400.0,
        )
