"""The concurrency grid, derived from KV arithmetic (docs/reference/metrics.md, "Serving grid"; rule 6)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_CANDIDATES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class ModelConfigError(ValueError):
    """The model config lacks what the KV arithmetic needs."""


@dataclass(frozen=True)
class KvGrid:
    values: tuple[int, ...]
    bound: int  # resident sequences the KV budget allows at max_model_len
    limit: int  # min(bound, max_num_seqs): the grid stops here
    kv_bytes_per_token: int
    free_kv_bytes: int
    max_model_len: int
    max_num_seqs: int
    reduced: bool  # the KV budget, not max_num_seqs, stops the grid
    reason: str
    arithmetic: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def kv_bytes_per_token(model_config: Mapping[str, Any], dtype_bytes: int = 2) -> tuple[int, str]:
    """layers × kv_heads × head_dim × 2 (K and V) × bytes per element, with the arithmetic spelled out."""
    cfg = model_config.get("text_config", model_config)
    try:
        layers = int(cfg["num_hidden_layers"])
        heads = int(cfg["num_attention_heads"])
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        head_dim = int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelConfigError(
            f"model config lacks {exc} (needs num_hidden_layers, num_attention_heads, "
            "hidden_size or head_dim; num_key_value_heads optional)"
        ) from exc
    n = layers * kv_heads * head_dim * 2 * dtype_bytes
    return n, f"{layers} layers × {kv_heads} kv_heads × {head_dim} head_dim × 2 (K,V) × {dtype_bytes} B = {n} B/token"


def derive_grid(
    model_config: Mapping[str, Any],
    device_mem_bytes: int,
    weight_bytes: int,
    max_model_len: int,
    max_num_seqs: int,
    dtype_bytes: int = 2,
    candidates: Sequence[int] = DEFAULT_CANDIDATES,
) -> KvGrid:
    per_token, text = kv_bytes_per_token(model_config, dtype_bytes)
    free = device_mem_bytes - weight_bytes
    per_seq = per_token * max_model_len
    bound = max(0, free // per_seq) if free > 0 else 0
    limit = min(bound, max_num_seqs)
    values = tuple(sorted({c for c in candidates if c <= limit} | ({limit} if limit >= 1 else set())))
    if limit < 1:
        reason = (
            f"no sequence fits: {free} B left after {weight_bytes} B of weights, one sequence of "
            f"{max_model_len} tokens needs {per_seq} B"
        )
    elif bound < max_num_seqs:
        reason = f"KV budget bounds resident sequences at {bound} (< max_num_seqs {max_num_seqs})"
    else:
        reason = f"max_num_seqs {max_num_seqs} (the KV budget allows {bound})"
    arithmetic = (
        f"{text}; free = {device_mem_bytes} - {weight_bytes} = {free} B; "
        f"bound = floor({free} / ({per_token} × {max_model_len})) = {bound}; "
        f"limit = min({bound}, max_num_seqs {max_num_seqs}) = {limit}"
    )
    return KvGrid(
        values=values,
        bound=int(bound),
        limit=int(limit),
        kv_bytes_per_token=per_token,
        free_kv_bytes=int(free),
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        reduced=bound < max_num_seqs,
        reason=reason,
        arithmetic=arithmetic,
    )
