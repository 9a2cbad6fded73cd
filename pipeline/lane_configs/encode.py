"""encode's config: the encoder workloads (``pipeline.encoders``: modality, model, batch sizes, shapes, inputs,
numerics gate, SLO), the timed and untimed calls per (batch size, shape), and the seed of the tiny models and the
generated inputs. A workload's local inputs are read here, at plan time: a bad file is refused before anything
starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.lane_configs.bounds import ENCODE_CALLS, ENCODE_WARMUP, SEED, THREADS

TINY_WORKLOADS: list[dict[str, Any]] = [
    {
        "name": "speech",
        "modality": "speech_to_text",
        "model": "tiny-whisper",
        "batch_sizes": [1, 2],
        "shapes": [1],
        "items": 2,
        "decode_tokens": 4,
        "slo": {"p99_ms": 500.0},
    },
    {
        "name": "image",
        "modality": "zero_shot",
        "model": "tiny-clip",
        "batch_sizes": [1, 4],
        "shapes": [32],
        "items": 4,
        "slo": {"p99_ms": 200.0},
    },
    {
        "name": "text",
        "modality": "text_embedding",
        "model": "tiny-bert-embedding",
        "batch_sizes": [1, 4],
        "shapes": [16],
        "items": 4,
        "slo": {"p99_ms": 100.0},
    },
    {
        "name": "rerank",
        "modality": "rerank",
        "model": "tiny-qwen3-reranker",
        "batch_sizes": [4],
        "shapes": [32],
        "items": 4,
        "slo": {"p99_ms": 100.0},
    },
]

FULL_WORKLOADS: list[dict[str, Any]] = [
    {
        "name": "speech",
        "modality": "speech_to_text",
        "model": "openai/whisper-small",
        "batch_sizes": [1],
        "shapes": [11, 30],
        "items": 16,
        "decode_tokens": 64,
        "slo": {"p99_ms": 2000.0},
    },
    {
        "name": "image",
        "modality": "zero_shot",
        "model": "openai/clip-vit-base-patch32",
        "batch_sizes": [1, 8],
        "shapes": [224],
        "items": 64,
        "slo": {"p99_ms": 100.0},
    },
    {
        "name": "siglip-image",
        "modality": "image_embedding",
        "model": "google/siglip-base-patch16-224",
        "batch_sizes": [1],
        "shapes": [224],
        "items": 32,
    },
    {
        "name": "text",
        "modality": "text_embedding",
        "model": "Qwen/Qwen3-Embedding-0.6B",
        "batch_sizes": [1, 8],
        "shapes": [128, 512],
        "items": 64,
        "slo": {"p99_ms": 200.0},
    },
    {
        "name": "rerank",
        "modality": "rerank",
        "model": "Qwen/Qwen3-Reranker-0.6B",
        "batch_sizes": [8],
        "shapes": [512],
        "items": 64,
        "slo": {"p99_ms": 500.0},
    },
]


@dataclass
class Config:
    encoders: list[dict[str, Any]] = field(
        default_factory=lambda: [dict(w) for w in TINY_WORKLOADS],
        metadata={
            "help": "encoder workloads: name, modality (speech_to_text | image_embedding | zero_shot | "
            "text_embedding | rerank), model (tiny-<family> or a catalogue hub id), batch_sizes, shapes (s of "
            "audio | px | tokens), items, inputs (a local file/directory or s3:// prefix; None = generated), "
            "decode_tokens, labels, numerics {min_cosine, max_abs_err}, slo {p99_ms}, neuron {path: auto | export | "
            "trace, auto_cast, auto_cast_type} (docs/reference/lanes.md)"
        },
    )
    calls: int = field(
        default=3, metadata={"help": "timed passes over the items per (workload, batch size, shape)", **ENCODE_CALLS}
    )
    warmup: int = field(
        default=1, metadata={"help": "untimed batches before the timed ones (the first call's load)", **ENCODE_WARMUP}
    )
    seed: int = field(default=0, metadata={"help": "the tiny models' weights and the generated inputs", **SEED})
    cpu_threads: int = field(
        default=1,
        metadata={
            "help": "torch's intra-op threads on the cpu backend (the tiny models gain nothing from more, and lose "
            "much to other processes on the cores); the CPU reference instance runs with the same",
            **THREADS,
        },
    )

    def __post_init__(self) -> None:
        from pipeline.encoders import EncodeSpecError, parse_workloads

        try:
            parsed = parse_workloads(self.encoders)
        except EncodeSpecError as exc:
            raise ValueError(str(exc)) from None
        self.encoders = [w.model_dump() for w in parsed]

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "full":
            return cls(encoders=[dict(w) for w in FULL_WORKLOADS], calls=20, warmup=3)
        return cls()
