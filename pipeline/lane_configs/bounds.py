"""Bounds every user-written number shares (inclusive ``min``/``max``): spread into a lane config field's metadata
next to its help, and built into the constrained types of :mod:`pipeline.spec_types` that the server variant,
workload, trace, capacity-search and limits-search specs use.

At least 1 where zero means nothing; the upper bound is where a larger value would run for days, not
hours, on one box (100k optimizer steps, a day of boot budget, a day of replayed trace), would allocate without
limit (a million arrivals in one point), or would not fit any model served here (a million tokens).
docs/reference/workloads.md states the workload and trace bounds.
"""

from __future__ import annotations

DAY_S = 86_400.0


def shown(bound: float) -> str:
    """A bound as a refusal shows it: ``1,048,576``, ``86,400``, ``1e+09``."""
    if isinstance(bound, int):
        return f"{bound:,}"
    return f"{int(bound):,}" if float(bound).is_integer() and abs(bound) < 1e8 else f"{bound:g}"


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
MATRIX_BOXES = {"min": 1, "max": 64}  # a run matrix's boxes at once
TTFT_MS = {"min": 0.1, "max": 600_000.0}  # an SLO's TTFT bound: under 0.1 ms no server answers; over 10 minutes, no SLO
TPOT_MS = {"min": 0.1, "max": 60_000.0}  # an SLO's TPOT bound: over a minute per token is no SLO

# ---- each lane's own numbers -----------------------------------------------------------------------------------
TRIAD_ELEMENTS = {"min": 1, "max": 1 << 28}  # float64 elements per triad array
GEMM_N = {"min": 1, "max": 16384}  # the side of the GEMM's square fp32 matrices
BENCH_REPEATS = {"min": 1, "max": 1000}  # timed repeats of a host measurement
THREADS = {"min": 1, "max": 1024}
TOKENIZER_TEXTS = {"min": 1, "max": 1_000_000}
CACHE_FREE_GIB = {"min": 0.0, "max": 16384.0}  # free space the compile cache's filesystem must have
CLOCK_SKEW_S = {"min": 1.0, "max": 3600.0}
CHECK_TIMEOUT_S = {"min": 1.0, "max": 600.0}  # a preflight network check or CLI call
IMDS_TIMEOUT_S = {"min": 0.01, "max": 60.0}
COMMAND_TIMEOUT_S = {"min": 0.1, "max": 600.0}  # a device CLI
DATASET_RECORDS = {"min": 1, "max": 100_000_000}
SAMPLES = {"min": 1, "max": 1_000_000}  # samples per accuracy task
FEWSHOT = {"min": 0, "max": 64}  # few-shot examples per prompt
EVAL_BUDGET_S = {"min": 60.0, "max": DAY_S}  # the accuracy lane's time budget, boots included
REQUEST_TIMEOUT_S = {"min": 1.0, "max": DAY_S}
RETRIES = {"min": 0, "max": 10}
ATTAINMENT = {"min": 0.01, "max": 1.0}  # share of a rate's requests that must be good
SEARCH_PRECISION = {"min": 0.001, "max": 0.99}  # a capacity search's relative bracket
POINT_S = {"min": 0.5, "max": DAY_S}  # a capacity point's arrivals: below half a second a verdict rests on a handful
SEARCH_BUDGET_S = {"min": 1.0, "max": DAY_S}
# a capacity search's confirmation: the overload it must show (a fraction above capacity: under 0.5 % the point
# would need thousands of service times), and its longest duration
CONFIRM_OVERLOAD = {"min": 0.005, "max": 0.5}
CONFIRM_S = {"min": 0.5, "max": DAY_S}
SUSTAINED_S = {"min": 1.0, "max": DAY_S}  # the sustained lane's measured duration
WINDOW_S = {"min": 0.1, "max": 3600.0}
WINDOWS = {"min": 0, "max": 10_000}  # leading windows left out of retention
RETENTION_K = {"min": 1, "max": 10_000}
PROBES = {"min": 2, "max": 32}  # a limits search's probes (each a compile on a box): the good and the bad bound
PROBE_STEPS = {"min": 1, "max": 100}  # optimizer steps of a training-limit probe
ANSWER_TOKENS = {"min": 1, "max": 4096}  # a limits probe's answer
MEMORY_CAP_MIB = {"min": 1.0, "max": 1_048_576.0}  # the CPU's stand-in for a device's memory
# the nki lane: a kernel input's rank, dimensions and elements (2**26 float32 is 256 MiB, a device's share), its
# shape sets, and the timed calls per shape and implementation
KERNEL_RANK = {"min": 1, "max": 4}
KERNEL_DIM = {"min": 1, "max": 1 << 20}
KERNEL_ELEMENTS = {"min": 1, "max": 1 << 26}
KERNEL_SHAPE_SETS = {"min": 1, "max": 16}
KERNEL_CALLS = {"min": 2, "max": 100_000}  # two: the least a percentile's interval can rest on
KERNEL_WARMUP = {"min": 0, "max": 10_000}
SAVE_EVERY_STEPS = {"min": 1, "max": STEPS["max"]}  # optimizer steps between two mid-run checkpoint saves
SAVE_TOTAL_LIMIT = {"min": 1, "max": 1000}  # checkpoints kept on disk at once (older ones deleted)
IMAGE_SIDE = {"min": 4, "max": 512}  # a generated image's side in pixels
IMAGE_SAMPLES = {"min": 1, "max": 10_000_000}  # images per split
EPOCHS = {"min": 1, "max": 1000}
CLASSES = {"min": 2, "max": 1000}
WIDTH = {"min": 1, "max": 65_536}  # a small vision model's hidden width, channels or embedding dimension
DEPTH = {"min": 1, "max": 64}  # a small vision model's layers or blocks
WEIGHT_DECAY = {"min": 0.0, "max": 1.0}
KEPT_APART_STEPS = {"min": 1, "max": 10_000}  # first steps kept apart from the steady step time (compile, warm-up)
CHANNELS = {"min": 1, "max": 4}  # a generated image's channels
NOISE = {"min": 0.0, "max": 255.0}  # standard deviation of a generated image's pixel noise, in grey levels

# ---- requests, workloads, traces, searches -------------------------------------------------------------------
TOKENS = {"min": 1, "max": 1 << 20}  # a request's tokens: the longest max_model_len a server config may declare
MAX_NUM_SEQS = {"min": 1, "max": 4096}  # sequences a server batches at once

# ---- server variants -----------------------------------------------------------------------------------------
MAX_MODEL_LEN = {"min": 16, "max": TOKENS["max"]}  # the longest sequence a server admits
BLOCK_SIZE = {"min": 1, "max": TOKENS["max"]}  # tokens per KV cache block
TENSOR_PARALLEL = {"min": 1, "max": 64}  # devices one server shards the model over
TENANTS = {"min": 1, "max": 64}  # servers of one variant at once
SPECULATIVE_TOKENS = {"min": 1, "max": 16}  # tokens a draft proposes per step
LORA_SLOTS = {"min": 1, "max": 64}  # adapters loaded at once
RATE = {"min": 1e-4, "max": 1e5}  # requests (sessions) per second offered
POINT_ARRIVALS = 1_000_000  # arrivals one point schedules (rate x duration): each an offset, a request and a row
TURNS = {"min": 1, "max": 1000}  # user turns of one session
THINK_S = {"min": 0.0, "max": 3600.0}  # seconds between a turn's answer and the next turn
PREFIX_GROUPS = {"min": 1, "max": 100_000}
BURSTINESS = {"min": 0.01, "max": 1000.0}  # gamma shape of the arrivals (1 = Poisson)
TIME_SCALE = {"min": 1e-6, "max": 1e6}  # a trace's gaps times this
REPLAY_S = DAY_S  # a replayed trace's span, after time_scale
EMPIRICAL_VALUES = 10_000  # values of an empirical length distribution
WEIGHT = {"min": 0.0, "max": 1e9}  # an empirical value's relative weight (> 0)
TRACE_MAX_BYTES = 256 * 1024 * 1024  # a trace file (Mooncake's is a few MB, a BurstGPT month tens)
DATASET_MAX_BYTES = 1024 * 1024 * 1024  # a prompt file (ShareGPT V3's JSON is 642 MB)
ENCODE_CALLS = {"min": 1, "max": 100_000}  # timed calls per (workload, batch size, shape) in the encode lane
ENCODE_WARMUP = {"min": 0, "max": 1_000}
