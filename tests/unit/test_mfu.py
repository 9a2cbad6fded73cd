"""FLOPs per token (LoRA- and recompute-aware), MFU against the peak table, and the NULL cases."""

from __future__ import annotations

import pytest

from pipeline.mfu import PEAKS, compute_mfu, device_key, flops_per_token
from pipeline.steps import StepRecord, loss_falls, summarize


def test_flops_per_token_lora_without_recompute():
    fpt = flops_per_token(params_trainable=1_000, params_frozen=100_000, activation_recompute=False)
    assert fpt.value == 6 * 1_000 + 4 * 100_000
    assert fpt.formula == "lora_6t_4f" and fpt.null_reason is None


def test_flops_per_token_with_recompute_adds_two_per_parameter():
    fpt = flops_per_token(1_000, 100_000, activation_recompute=True)
    assert fpt.value == 8 * 1_000 + 6 * 100_000
    assert fpt.formula == "lora_recompute_8t_6f"


def test_post_wrap_counts_of_an_8b_lora_run():
    # Llama 3.1 8B, r=16 on all seven projections: ~42M trainable, ~8.03B frozen after the wrap.
    trainable, frozen = 41_943_040, 8_030_261_248
    fpt = flops_per_token(trainable, frozen, activation_recompute=True)
    assert fpt.value == pytest.approx(8 * trainable + 6 * frozen)
    # without recompute, below the 6N of full fine-tuning: frozen weights need no weight gradient
    assert flops_per_token(trainable, frozen, False).value < 6 * (trainable + frozen)


@pytest.mark.parametrize(
    "trainable,frozen,why",
    [
        (8_000_000_000, 0, "everything counted as trainable"),
        (0, 8_000_000_000, "no trainable"),
        (5_000, 4_000, "trainable"),
        (-1, 10, "negative"),
    ],
)
def test_degenerate_counts_make_flops_and_mfu_null(trainable, frozen, why):
    fpt = flops_per_token(trainable, frozen, activation_recompute=False)
    assert fpt.value is None and why in fpt.null_reason
    result = compute_mfu(1000.0, fpt, "trn1")
    assert result.mfu is None and result.mfu_alt is None
    assert why in result.null_reason
    assert result.peak_flops == 190e12  # the peak is still reported


def test_trn1_mfu_against_both_published_peaks():
    fpt = flops_per_token(1_000_000, 99_000_000, activation_recompute=True)
    tokens_per_s = 2_000.0
    r = compute_mfu(tokens_per_s, fpt, "trn1", num_devices=1)
    achieved = tokens_per_s * (8 * 1_000_000 + 6 * 99_000_000)
    assert r.mfu == pytest.approx(achieved / 190e12)
    assert r.mfu_alt == pytest.approx(achieved / 210e12)
    assert "190" in r.peak_source and "210" in r.peak_alt_source
    assert r.null_reason is None


def test_gpu_peaks_and_devices_multiply():
    fpt = flops_per_token(10, 1000, False)
    r = compute_mfu(1e9, fpt, "h100_sxm", num_devices=2)
    assert r.peak_flops == 2 * 989e12 and r.mfu == pytest.approx(1e9 * fpt.value / (2 * 989e12))
    assert r.mfu_alt is None and r.peak_alt_flops is None
    assert PEAKS["h200_sxm"].flops == 989e12


def test_unknown_peak_is_null_with_reason():
    r = compute_mfu(500.0, flops_per_token(10, 1000, False), "cpu")
    assert r.mfu is None and r.peak_flops is None and "cpu" in r.null_reason
    row = r.as_row()
    assert row["mfu"] is None and row["mfu_null_reason"] == r.null_reason


def test_missing_tokens_per_s_is_null():
    r = compute_mfu(None, flops_per_token(10, 1000, False), "trn1")
    assert r.mfu is None and "tokens/s" in r.null_reason


@pytest.mark.parametrize(
    "backend,name,key",
    [
        ("neuron", None, "trn1"),
        ("cuda", "NVIDIA H100 80GB HBM3", "h100_sxm"),
        ("cuda", "NVIDIA H200", "h200_sxm"),
        ("cuda", "NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
        ("cpu", None, "cpu"),
    ],
)
def test_device_key(backend, name, key):
    assert device_key(backend, name) == key


def _steps(spec):
    return [
        StepRecord(step=i + 1, loss=loss, learning_rate=1e-3, grad_norm=1.0, tokens=tok, step_s=s)
        for i, (loss, tok, s) in enumerate(spec)
    ]


def test_summary_uses_steps_after_the_first():
    steps = _steps([(3.0, 100, 10.0), (2.5, 100, 1.0), (2.0, 200, 1.0), (1.5, 100, 2.0)])
    s = summarize(steps)
    assert s.first_step_s == 10.0  # includes compile on neuron; kept apart
    assert s.median_step_s == 1.0
    assert s.tokens_per_s == 100.0  # median of 100, 200, 50
    assert s.tokens_total == 500 and s.final_loss == 1.5 and s.steps == 4


def test_summary_of_one_step_has_no_rate():
    s = summarize(_steps([(3.0, 100, 5.0)]))
    assert s.tokens_per_s is None and s.median_step_s is None and s.first_step_s == 5.0


def test_loss_falls():
    assert loss_falls(_steps([(3, 1, 1), (2.9, 1, 1), (2.5, 1, 1), (2.0, 1, 1)]))
    assert not loss_falls(_steps([(2, 1, 1), (2.1, 1, 1), (2.5, 1, 1), (3.0, 1, 1)]))
    assert not loss_falls(_steps([(2, 1, 1)]))
