"""from_scratch's config: small vision models (MLP, CNN, ViT) trained from scratch on an image-classification set.

The dataset is an ``.npz`` file (local path or ``s3://`` URI; the format is
``agents.training.vision.dataset``'s, docs/reference/lanes.md) or, without one, a set the lane generates from
the seed (glyphs of strokes, shifted, with noise: no download). The models' shapes are fields here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.lane_configs.bounds import (
    BATCH,
    CHANNELS,
    CLASSES,
    DEPTH,
    EPOCHS,
    IMAGE_SAMPLES,
    IMAGE_SIDE,
    KEPT_APART_STEPS,
    LEARNING_RATE,
    NOISE,
    SEED,
    THREADS,
    WEIGHT_DECAY,
    WIDTH,
)

ARCHS = ("mlp", "cnn", "vit")


@dataclass
class Config:
    models: list[str] = field(
        default_factory=lambda: list(ARCHS),
        metadata={"help": f"models to train, one run each, in order: any of {', '.join(ARCHS)}"},
    )
    dataset: str | None = field(
        default=None,
        metadata={
            "help": ".npz image-classification set (x_train, y_train, x_test, y_test, num_classes), a path or "
            "s3:// URI; None = generate one from the seed (the generated_* fields)"
        },
    )
    generated_side: int = field(default=16, metadata={"help": "generated images' side, pixels", **IMAGE_SIDE})
    generated_channels: int = field(default=1, metadata={"help": "generated images' channels", **CHANNELS})
    generated_classes: int = field(default=10, metadata={"help": "generated classes (glyphs)", **CLASSES})
    generated_train: int = field(default=1280, metadata={"help": "generated training images", **IMAGE_SAMPLES})
    generated_test: int = field(default=400, metadata={"help": "generated test images", **IMAGE_SAMPLES})
    generated_noise: float = field(
        default=40.0, metadata={"help": "generated images' pixel noise (std, grey levels)", **NOISE}
    )
    epochs: int = field(default=3, metadata={"help": "passes over the training split per model", **EPOCHS})
    batch_size: int = field(
        default=32,
        metadata={"help": "images per step; the last partial training batch is dropped (fixed shapes)", **BATCH},
    )
    learning_rate: float = field(default=3e-3, metadata={"help": "AdamW learning rate", **LEARNING_RATE})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW weight decay", **WEIGHT_DECAY})
    warmup_steps: int = field(
        default=2,
        metadata={
            "help": "a model's first steps kept apart from its steady step time (the first holds XLA's compile "
            "on neuron): first_step_s is the first's, steady_step_s the median of the rest",
            **KEPT_APART_STEPS,
        },
    )
    mlp_hidden: int = field(default=128, metadata={"help": "MLP hidden units per layer", **WIDTH})
    mlp_depth: int = field(default=2, metadata={"help": "MLP hidden layers", **DEPTH})
    cnn_channels: list[int] = field(
        default_factory=lambda: [16, 32],
        metadata={"help": "CNN channels per conv block (each block halves the side)", **WIDTH},
    )
    vit_patch: int = field(default=4, metadata={"help": "ViT patch side, pixels (divides the image side)", **WIDTH})
    vit_dim: int = field(default=64, metadata={"help": "ViT embedding dimension", **WIDTH})
    vit_depth: int = field(default=2, metadata={"help": "ViT encoder blocks", **DEPTH})
    vit_heads: int = field(default=4, metadata={"help": "ViT attention heads (divide vit_dim)", **DEPTH})
    vit_mlp_dim: int = field(default=128, metadata={"help": "ViT MLP hidden units", **WIDTH})
    cpu_threads: int = field(
        default=1,
        metadata={
            "help": "torch's intra-op threads on the cpu backend (models this small gain nothing from more, and "
            "lose much to other processes on the cores)",
            **THREADS,
        },
    )
    seed: int = field(default=0, metadata={"help": "seed for the generated set, init and data order", **SEED})

    def __post_init__(self) -> None:
        unknown = [m for m in self.models if m not in ARCHS]
        if unknown or not self.models:
            raise ValueError(f"models: {unknown[0] if unknown else 'none'}: valid models are {', '.join(ARCHS)}")
        if self.vit_dim % self.vit_heads:
            raise ValueError(f"vit_heads: {self.vit_heads} does not divide vit_dim {self.vit_dim}")
        if "vit" in self.models and self.dataset is None and self.generated_side % self.vit_patch:
            raise ValueError(f"vit_patch: {self.vit_patch} does not divide generated_side {self.generated_side}")

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "full":  # MNIST's shape and size (60,000 + 10,000 images of 28x28), the predecessor's shapes
            return cls(
                generated_side=28,
                generated_train=60_000,
                generated_test=10_000,
                epochs=5,
                batch_size=128,
                learning_rate=1e-3,
                mlp_hidden=256,
                cnn_channels=[32, 64],
                vit_patch=7,
                vit_dim=64,
                vit_depth=4,
                vit_heads=4,
                vit_mlp_dim=128,
            )
        return cls()
