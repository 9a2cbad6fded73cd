"""Bounds the lane configs share (inclusive ``min``/``max``, spread into a field's metadata next to its help).

At least 1 where zero means nothing; the upper bound is where a larger value would run for days, not
hours, on one box (100k optimizer steps, a day of boot budget), or would not fit any model served here.
"""
from __future__ import annotations

DAY_S = 86_400.0

STEPS = {"min": 1, "max": 100_000}  # optimizer steps
WARMUP_STEPS = {"min": 0, "max": 100_000}
SEQ_LEN = {"min": 1, "max": 131_072}  # tokens: Llama 3.1's context
BATCH = {"min": 1, "max": 1024}  # examples per micro-batch, micro-batches per step
LEARNING_RATE = {"min": 1e-9, "max": 1.0}
LORA_RANK = {"min": 1, "max": 1024}
LORA_ALPHA = {"min": 1, "max": 4096}
DROPOUT = {"min": 0.0, "max": 0.9}
SEED = {"min": 0, "max": 2**32 - 1}
NEW_TOKENS = {"min": 1, "max": 32_768}  # tokens generated per request
BOOT_S = {"min": 1.0, "max": DAY_S}  # a server's boot budget (a cold 8B Neuron compile takes tens of minutes)
CONCURRENCY = {"min": 1, "max": 4096}
PROMPTS = {"min": 1, "max": 100_000}
WARMUP_REQUESTS = {"min": 0, "max": 10_000}
REPEATS = {"min": 1, "max": 100}  # repeats of a sweep's points (A/A noise): a hundred already measures the spread
DEVICE_MEM_GIB = {"min": 0.1, "max": 4096.0}
