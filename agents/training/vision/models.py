"""MLP, CNN and a small ViT for image classification, shapes from the lane's config (pure torch)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

ARCHS = ("mlp", "cnn", "vit")


class MLP(nn.Module):
    """Flattened pixels -> ``depth`` hidden layers of ``hidden`` units (ReLU) -> classes."""

    def __init__(self, in_dim: int, hidden: int, depth: int, classes: int):
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        for i in range(depth):
            layers += [nn.Linear(in_dim if i == 0 else hidden, hidden), nn.ReLU()]
        layers.append(nn.Linear(hidden if depth else in_dim, classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CNN(nn.Module):
    """``len(channels)`` blocks of 3x3 conv (padding 1) + BatchNorm + ReLU + 2x2 max-pool, then a linear head."""

    def __init__(self, in_ch: int, side: int, channels: list[int], classes: int):
        super().__init__()
        blocks: list[nn.Module] = []
        c, s = in_ch, side
        for out in channels:
            blocks += [nn.Conv2d(c, out, 3, padding=1), nn.BatchNorm2d(out), nn.ReLU()]
            if s >= 2:
                blocks.append(nn.MaxPool2d(2))
                s //= 2
            c = out
        self.features = nn.Sequential(*blocks)
        self.head = nn.Linear(c * s * s, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


class Block(nn.Module):
    """Pre-norm encoder block: self-attention and an MLP, each with a residual."""

    def __init__(self, dim: int, heads: int, mlp_dim: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Linear(mlp_dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    """Patches of ``patch`` pixels embedded to ``dim``, a class token, learned positions, ``depth`` blocks."""

    def __init__(self, in_ch: int, side: int, patch: int, dim: int, depth: int, heads: int, mlp_dim: int, classes: int):
        super().__init__()
        n = (side // patch) ** 2
        self.embed = nn.Conv2d(in_ch, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(dim, heads, mlp_dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.embed(x).flatten(2).transpose(1, 2)
        t = torch.cat([self.cls.expand(t.shape[0], -1, -1), t], dim=1) + self.pos
        return self.head(self.norm(self.blocks(t))[:, 0])


class ShapeError(ValueError):
    """A model's shapes do not fit the dataset's images (one line naming the config field)."""


def build(arch: str, image_shape: tuple[int, int, int], classes: int, cfg: Any) -> nn.Module:
    """The model ``arch`` for images ``(H, W, C)`` with the lane config's shape fields."""
    h, w, c = image_shape
    if arch == "mlp":
        return MLP(h * w * c, cfg.mlp_hidden, cfg.mlp_depth, classes)
    if arch == "cnn":
        if h != w:
            raise ShapeError(f"models: cnn needs square images, got {h}x{w}")
        return CNN(c, h, list(cfg.cnn_channels), classes)
    if arch == "vit":
        if h != w or h % cfg.vit_patch:
            raise ShapeError(
                f"vit_patch: {cfg.vit_patch} does not divide the {h}x{w} images (square, a multiple of it)"
            )
        if cfg.vit_dim % cfg.vit_heads:
            raise ShapeError(f"vit_heads: {cfg.vit_heads} does not divide vit_dim {cfg.vit_dim}")
        return ViT(c, h, cfg.vit_patch, cfg.vit_dim, cfg.vit_depth, cfg.vit_heads, cfg.vit_mlp_dim, classes)
    raise ShapeError(f"models: unknown model {arch!r}; valid: {', '.join(ARCHS)}")


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
