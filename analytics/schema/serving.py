"""Serving-side tables: requests, sweep_points, sustained_windows, quality. (Owned by the load generator and serving lanes.)

Field names follow `vllm bench serve --save-result` where one exists.
"""
import pyarrow as pa

from analytics.schema._types import TS, f, table

REQUESTS = table(
    f("point_id", pa.string(), False, "the measurement point this request belongs to"),
    f("request_id", pa.string(), False),
    f("model", pa.string()),
    f("server_config", pa.string()),
    f("warmup", pa.bool_(), False, "warm-up requests are stored but excluded from every metric"),
    f("t_scheduled_ns", pa.int64(), doc="perf_counter_ns when the arrival process said to start"),
    f("t_sent_ns", pa.int64(), doc="perf_counter_ns when the request was written"),
    f("client_queue_s", pa.float64()),
    f("ttft_s", pa.float64()),
    f("e2el_s", pa.float64()),
    f("chunk_times_s", pa.list_(pa.float64()), doc="arrival of each content chunk, seconds after t_sent"),
    f("chunk_tokens", pa.list_(pa.int32())),
    f("prompt_tokens", pa.int32()),
    f("output_tokens", pa.int32()),
    f("tokens_source", pa.string(), doc="usage | retokenized"),
    f("input_len", pa.int32(), doc="requested input length"),
    f("output_len", pa.int32(), doc="requested output length"),
    f("success", pa.bool_(), False),
    f("error_type", pa.string()),
    f("error", pa.string()),
    f("sent_at", TS),
    doc="One row per request, failed ones included.",
)

SWEEP_POINTS = table(
    f("point_id", pa.string(), False),
    f("model", pa.string()),
    f("server_config", pa.string()),
    f("backend", pa.string()),
    f("endpoint", pa.string()),
    f("input_len", pa.int32()),
    f("output_len", pa.int32()),
    f("max_concurrency", pa.int32()),
    f("request_rate", pa.float64(), doc="NULL for closed loop (vLLM writes inf)"),
    f("burstiness", pa.float64()),
    f("num_prompts", pa.int32()),
    f("window_start", TS),
    f("window_end", TS),
    f("grid_json", pa.string(), doc="the declared grid: values, bound, reduced, reason, arithmetic"),
    f("slo_json", pa.string(), doc="declared SLOs for goodput"),
    f("client_lag_bound_ms", pa.float64()),
    doc="One row per measurement point (its declaration); metrics come from the views over requests.",
)

SUSTAINED_WINDOWS = table(
    f("point_id", pa.string(), False),
    f("model", pa.string()),
    f("server_config", pa.string()),
    f("window", pa.int32(), False),
    f("window_s", pa.float64()),
    f("window_start", TS),
    f("output_tokens", pa.int64()),
    f("output_throughput", pa.float64()),
    f("completed", pa.int32()),
    f("p99_ttft_ms", pa.float64()),
    f("warmup", pa.bool_()),
    doc="Fixed windows of a sustained closed loop.",
)

QUALITY = table(
    f("model", pa.string()),
    f("variant", pa.string(), False, "base | finetune"),
    f("prompt_id", pa.string(), False),
    f("prompt", pa.string()),
    f("text_1", pa.string()),
    f("text_2", pa.string()),
    f("deterministic", pa.bool_()),
    f("mean_logprob", pa.float64(), doc="NULL where the server returns no logprobs"),
    f("logprob_note", pa.string(), doc="the server's verbatim refusal when NULL"),
    f("output_tokens", pa.int32()),
    doc="Fixed prompts, greedy, asked twice.",
)

SERVING_TABLES = {
    "requests": REQUESTS,
    "sweep_points": SWEEP_POINTS,
    "sustained_windows": SUSTAINED_WINDOWS,
    "quality": QUALITY,
}
