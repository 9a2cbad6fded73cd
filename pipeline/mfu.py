"""LoRA-aware FLOPs per token and MFU (docs/reference/metrics.md, "Training"), one implementation.

FLOPs per token, parameters counted after the LoRA wrap:

* ``lora_6t_4f``            = 6·N_trainable + 4·N_frozen  (frozen weights need no weight gradient)
* ``lora_recompute_8t_6f``  = 8·N_trainable + 6·N_frozen  (activation recompute re-runs every forward: +2·N)

MFU = tokens/s × FLOPs per token / (device's dense BF16 peak × devices). The
peak is a table entry with its source; where the peak is unknown (a CPU) or the
counts are degenerate (e.g. everything counted as trainable under LoRA) MFU is
NULL with the reason — never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.hardware import ACCELERATORS


@dataclass(frozen=True)
class Peak:
    """A device's published dense BF16 peak, per device (chip / GPU)."""

    flops: float
    source: str
    alt_flops: float | None = None
    alt_source: str | None = None


def _peak(accelerator: str, form: str = "") -> Peak:
    """An accelerator's dense BF16 peak from the hardware catalogue (pipeline.hardware), its source with it."""
    acc = ACCELERATORS[accelerator]
    return Peak(acc.peak_flops["bf16"], f"{acc.source}{form} (as of {acc.as_of})")


PEAKS: dict[str, Peak] = {
    "trn1": Peak(
        ACCELERATORS["Trainium"].peak_flops["bf16"],
        ACCELERATORS["Trainium"].source,
        210e12,
        "older AWS Neuron docs / trn1 launch material: 210 TFLOP/s BF16 per chip",
    ),
    "inf2": _peak("Inferentia2"),
    "h100_sxm": _peak("H100"),
    "h200_sxm": _peak("H200"),
    "a100_sxm": _peak("A100-40GB"),
}

FORMULAS = {
    False: ("lora_6t_4f", 6.0, 4.0),
    True: ("lora_recompute_8t_6f", 8.0, 6.0),
}


class DegenerateCountsError(ValueError):
    """Parameter counts that cannot describe a LoRA run (MFU must be NULL, not a guess)."""


@dataclass(frozen=True)
class FlopsPerToken:
    value: float | None
    formula: str
    null_reason: str | None = None


@dataclass(frozen=True)
class MfuResult:
    mfu: float | None
    mfu_alt: float | None
    peak_flops: float | None
    peak_source: str | None
    peak_alt_flops: float | None
    peak_alt_source: str | None
    null_reason: str | None

    def as_row(self) -> dict:
        return {
            "mfu": self.mfu,
            "mfu_alt": self.mfu_alt,
            "peak_flops": self.peak_flops,
            "peak_source": self.peak_source,
            "peak_alt_flops": self.peak_alt_flops,
            "peak_alt_source": self.peak_alt_source,
            "mfu_null_reason": self.null_reason,
        }


def check_counts(params_trainable: int, params_frozen: int, lora: bool = True) -> None:
    if params_trainable is None or params_frozen is None:
        raise DegenerateCountsError("parameter counts missing")
    if params_trainable < 0 or params_frozen < 0:
        raise DegenerateCountsError(f"negative parameter count (trainable={params_trainable}, frozen={params_frozen})")
    if params_trainable == 0:
        raise DegenerateCountsError("no trainable parameters counted after the wrap")
    if lora and params_frozen == 0:
        raise DegenerateCountsError(
            "everything counted as trainable under LoRA (frozen=0): parameters were not counted after the LoRA wrap"
        )
    if lora and params_trainable >= params_frozen:
        raise DegenerateCountsError(
            f"trainable ({params_trainable}) >= frozen ({params_frozen}) under LoRA: the count is not a LoRA wrap"
        )


def flops_per_token(
    params_trainable: int, params_frozen: int, activation_recompute: bool, lora: bool = True
) -> FlopsPerToken:
    name, kt, kf = FORMULAS[bool(activation_recompute)]
    try:
        check_counts(params_trainable, params_frozen, lora)
    except DegenerateCountsError as exc:
        return FlopsPerToken(None, name, str(exc))
    return FlopsPerToken(kt * params_trainable + kf * params_frozen, name)


def compute_mfu(tokens_per_s: float | None, fpt: FlopsPerToken, device: str, num_devices: int = 1) -> MfuResult:
    """MFU against the device's peak (and its alternative peak where one is published)."""
    peak = PEAKS.get(device)
    p_flops = peak.flops * num_devices if peak else None
    p_alt = peak.alt_flops * num_devices if peak and peak.alt_flops else None
    base = dict(
        peak_flops=p_flops,
        peak_source=peak.source if peak else None,
        peak_alt_flops=p_alt,
        peak_alt_source=peak.alt_source if peak else None,
    )
    reason = None
    if peak is None:
        reason = f"no published dense BF16 peak for device {device!r} (peak table: {', '.join(sorted(PEAKS))})"
    elif fpt.value is None:
        reason = f"FLOPs per token unavailable: {fpt.null_reason}"
    elif tokens_per_s is None or tokens_per_s <= 0:
        reason = "tokens/s unavailable (fewer than two timed optimizer steps)"
    elif num_devices < 1:
        reason = f"num_devices={num_devices}"
    if reason:
        return MfuResult(None, None, null_reason=reason, **base)
    achieved = tokens_per_s * fpt.value
    return MfuResult(achieved / p_flops, achieved / p_alt if p_alt else None, null_reason=None, **base)


def device_key(backend: str, device_name: str | None = None) -> str:
    """The peak-table key for where training ran: trn1 on neuron, the GPU model on cuda, cpu otherwise."""
    if backend == "neuron":
        return "trn1"
    if backend == "cuda" and device_name:
        name = device_name.upper()
        if "PCIE" in name or " NVL" in name:  # other form factors have other peaks: not in the table
            return device_name
        for key, marker in (("h200_sxm", "H200"), ("h100_sxm", "H100"), ("a100_sxm", "A100")):
            if marker in name:
                return key
        return device_name
    return "cpu"
