"""int8 weight-only quantization for the neuronpipe server: a prepared checkpoint and the linear layer that serves it.

Each ``nn.Linear`` of the decoder layers keeps its weight as int8 with one float32 scale per output channel
(symmetric: scale = max |w| of the row / 127, q = round(w / scale) in [-127, 127]); on the CPU the matmul
dequantizes inside torch's int8 weight-pack kernel (``torch._weight_int8pack_mm``: activations stay in the served
dtype, nothing quantizes them), elsewhere (a GPU, a torch without that kernel) it is ``x @ (q * scale)ᵀ``. The
output head and the embeddings stay in the checkpoint's dtype.

:func:`prepare_int8_checkpoint` writes the prepared checkpoint: ``model.safetensors`` (``NAME.weight`` int8 and
``NAME.weight_scale`` float32 for each quantized layer, every other tensor as the source had it), the source's
config, tokenizer and generation files, and :data:`MANIFEST` (the method, the quantized layers, the source's
bytes). :func:`load_int8_model` builds the model from its config, swaps those layers for
:class:`Int8WeightOnlyLinear` and loads the tensors: the served weights really are int8.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pipeline.servers import INT8_WEIGHT_ONLY

MANIFEST = "neuronpipe_quantization.json"
SCALE_SUFFIX = ".weight_scale"  # vLLM's name for a quantized weight's scale (not a parameter of the model)
# layers left in the checkpoint's dtype: the output head (often tied to the embeddings)
KEPT_MODULES = ("lm_head",)
WEIGHT_FILES = ("*.safetensors", "*.bin")


class Int8CheckpointError(ValueError):
    """A directory that is not a prepared int8 checkpoint (no manifest, another method, a tensor missing)."""


class Int8WeightOnlyLinear(nn.Module):
    """``y = x Wᵀ + b`` with W held as int8 rows and a float32 scale per row (output channel)."""

    def __init__(self, in_features: int, out_features: int, bias: bool):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer("weight", torch.zeros(out_features, in_features, dtype=torch.int8))
        self.register_buffer("weight_scale", torch.ones(out_features, dtype=torch.float32))
        self.bias = nn.Parameter(torch.zeros(out_features), requires_grad=False) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).contiguous()
        scale = self.weight_scale.to(x.dtype)
        if x.device.type == "cpu" and hasattr(torch, "_weight_int8pack_mm"):
            out = torch._weight_int8pack_mm(flat, self.weight, scale)
        else:
            out = flat @ (self.weight.to(x.dtype) * scale[:, None]).t()
        out = out.reshape(*x.shape[:-1], self.out_features)
        return out + self.bias.to(x.dtype) if self.bias is not None else out

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def quantize_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 rows, float32 scale per row): symmetric per-output-channel quantization of a linear weight."""
    w = weight.detach().float()
    scale = (w.abs().amax(dim=1) / 127.0).clamp(min=torch.finfo(torch.float32).tiny)
    q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


def quantized_modules(model: nn.Module) -> list[str]:
    """The linear layers the method quantizes: every ``nn.Linear`` but :data:`KEPT_MODULES`."""
    return [
        name
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear) and name.rsplit(".", 1)[-1] not in KEPT_MODULES
    ]


def weight_bytes(model_dir: Path) -> int:
    """Bytes of a checkpoint's weight files (safetensors, else torch bins)."""
    files = list(Path(model_dir).glob(WEIGHT_FILES[0])) or list(Path(model_dir).glob(WEIGHT_FILES[1]))
    return sum(f.stat().st_size for f in files)


@dataclass(frozen=True)
class PreparedCheckpoint:
    path: Path
    method: str
    modules: int  # linear layers quantized
    source_bytes: int  # the source checkpoint's weight files
    bytes: int  # the prepared checkpoint's weight files


def prepare_int8_checkpoint(source: Path, dest: Path) -> PreparedCheckpoint:
    """Quantize the checkpoint at ``source`` into ``dest`` (a new directory, written whole then renamed)."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    source, dest = Path(source), Path(dest)
    model = AutoModelForCausalLM.from_pretrained(source, dtype="auto")
    names = quantized_modules(model)
    state = model.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for key, t in state.items():  # a tied tensor is saved once: the model ties it again at load
        ptr = t.untyped_storage().data_ptr()
        if ptr in seen:
            continue
        seen.add(ptr)
        tensors[key] = t.detach().contiguous()
    for name in names:
        q, scale = quantize_weight(state[f"{name}.weight"])
        tensors[f"{name}.weight"], tensors[f"{name}{SCALE_SUFFIX}"] = q, scale
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt", "quantization": INT8_WEIGHT_ONLY})
    for f in source.iterdir():  # config, tokenizer, generation config, chat template: everything but weights
        if f.is_file() and not any(f.match(p) for p in WEIGHT_FILES) and not f.name.endswith(".index.json"):
            shutil.copy2(f, tmp / f.name)
    prepared = PreparedCheckpoint(dest, INT8_WEIGHT_ONLY, len(names), weight_bytes(source), weight_bytes(tmp))
    manifest = {
        "method": INT8_WEIGHT_ONLY,
        "modules": names,
        "source": str(source),
        "source_bytes": prepared.source_bytes,
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return prepared


def read_manifest(model_dir: Path) -> dict[str, Any]:
    path = Path(model_dir) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise Int8CheckpointError(f"{model_dir}: not a prepared {INT8_WEIGHT_ONLY} checkpoint ({exc})") from None
    if manifest.get("method") != INT8_WEIGHT_ONLY:
        raise Int8CheckpointError(f"{path}: method {manifest.get('method')!r}, not {INT8_WEIGHT_ONLY}")
    return manifest


def load_int8_model(model_dir: Path, dtype: Any) -> nn.Module:
    """The model of a prepared checkpoint: its quantized layers as :class:`Int8WeightOnlyLinear` (int8 weights),
    everything else in ``dtype``."""
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM

    manifest = read_manifest(model_dir)
    config = AutoConfig.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    for name in manifest["modules"]:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        old = getattr(parent, child)
        setattr(parent, child, Int8WeightOnlyLinear(old.in_features, old.out_features, old.bias is not None))
    state = load_file(str(Path(model_dir) / "model.safetensors"))
    state = {k: v if v.dtype == torch.int8 or k.endswith(SCALE_SUFFIX) else v.to(dtype) for k, v in state.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {k for k in missing if k.endswith("lm_head.weight") and getattr(config, "tie_word_embeddings", False)}
    if set(missing) - tied or unexpected:
        raise Int8CheckpointError(
            f"{model_dir}: the tensors do not match the model (missing {sorted(set(missing) - tied)[:3]}, "
            f"unexpected {sorted(unexpected)[:3]})"
        )
    if tied:
        model.tie_weights()
    return model.eval()
