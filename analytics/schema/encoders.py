"""The encode lane's tables: ``encode_models`` (each graph placed: exporter path, compile and load, cache state,
status), ``encode_numerics`` (each output against the CPU fp32 reference: the gate's evidence and verdict) and
``encode_calls`` (every timed call). Percentiles, their intervals, items/s, the real-time factor and the decision
are the views' (48_report_encoders.sql); a numerics or exporter exclusion is report_exclusions'.

One row of ``encode_models`` and of ``encode_numerics`` per workload x shape x batch size (each is its own static
shape, so its own graph); ``encode_calls`` has rows only where the numerics verdict is ``pass``.
"""

import pyarrow as pa

from analytics.schema._types import TS, f, table

ENCODE_STATUSES = ("ok", "export_refused", "compile_failed", "load_failed")
NUMERICS_VERDICTS = ("pass", "nan", "diverged")

_SUBJECT = (
    f("workload", pa.string(), False, "the workload's name in the lane config"),
    f(
        "modality",
        pa.string(),
        False,
        "speech_to_text | image_embedding | zero_shot | text_embedding | rerank",
    ),
    f("model", pa.string(), False, "tiny-<family> or the hub id"),
    f("family", pa.string(), doc="whisper | clip | siglip | bert-embedding | qwen3-embedding | *-reranker"),
    f("backend", pa.string(), doc="neuron | cuda | cpu"),
    f("shape", pa.int32(), doc="the input shape: seconds of audio, image side in px, or tokens"),
    f("shape_unit", pa.string(), doc="s | px | tokens"),
    f("batch_size", pa.int32(), doc="items per call (the graph's static batch; a short batch is padded)"),
)

ENCODE_MODELS = table(
    *_SUBJECT,
    f("exporter", pa.string(), doc="eager (cpu, cuda) | torch_neuronx.trace | optimum-neuron"),
    f("status", pa.string(), False, "ok | export_refused | compile_failed | load_failed"),
    f(
        "reason",
        pa.string(),
        doc="the exporter's or compiler's error, verbatim; on an ok row, the refusal a fallback path followed",
    ),
    f("graphs", pa.int32(), doc="graphs placed for the task (speech: encoder and decoder)"),
    f("compile_s", pa.float64(), doc="seconds compiling (sum over the graphs); NULL: nothing compiled"),
    f("load_s", pa.float64(), doc="seconds loading the graphs and their first call"),
    f("cache", pa.string(), doc="cold | warm (the one compile cache) | none (nothing compiled ahead of time)"),
    f("input_shape", pa.string(), doc="the first graph's input array shape, e.g. 8x80x200"),
    f("slo_p99_ms", pa.float64(), doc="the workload's SLO: p99 latency per call bound (NULL: none set)"),
    f("ts", TS, doc="when the graphs were placed"),
    doc="One row per workload x shape x batch size: how its graphs were built on the backend, and what that cost.",
)

ENCODE_NUMERICS = table(
    *_SUBJECT,
    f("reference", pa.string(), doc="what the outputs were compared with: cpu-fp32 (a reference instance)"),
    f("rows", pa.int64(), doc="output rows compared (one per item)"),
    f("values", pa.int64(), doc="output values compared"),
    f("min_cosine", pa.float64(), doc="the lowest cosine similarity of an output row with its reference row"),
    f("max_abs_err", pa.float64(), doc="max |output - reference| over the finite rows"),
    f("nan_count", pa.int64(), doc="output values that are NaN or infinite"),
    f("gate_min_cosine", pa.float64(), doc="the gate's threshold: every row's cosine at least this"),
    f("gate_max_abs_err", pa.float64(), doc="the gate's threshold: the max abs error at most this"),
    f("verdict", pa.string(), False, "pass | nan | diverged"),
    f("reason", pa.string(), doc="the evidence of a nan or diverged verdict"),
    f("ts", TS, doc="when the comparison ended"),
    doc="One row per workload x shape x batch size: the backend's outputs against the CPU fp32 reference.",
)

ENCODE_CALLS = table(
    *_SUBJECT,
    f("call", pa.int32(), False, "the timed call's index, 0-based, in call order"),
    f("items", pa.int32(), False, "real items in the call (the last batch of a pass may be short, padded)"),
    f("latency_ms", pa.float64(), False, "wall milliseconds of the call: host arrays in, host outputs back"),
    f("audio_s", pa.float64(), doc="seconds of audio in the call's real items (speech_to_text), else NULL"),
    f("ts", TS, doc="when the call ended"),
    doc="One row per timed call of a workload x shape x batch size whose numerics passed.",
)

ENCODER_TABLES = {
    "encode_models": ENCODE_MODELS,
    "encode_numerics": ENCODE_NUMERICS,
    "encode_calls": ENCODE_CALLS,
}
