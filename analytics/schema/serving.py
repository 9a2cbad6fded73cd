"""Serving-side tables: requests, sweep_points, sustained_windows, quality, limit_probes, accuracy.

``requests``, ``sweep_points`` and ``sustained_windows`` are owned by the load
generator (agents/loadgen); ``quality`` by the serving lanes. Field names follow
`vllm bench serve --save-result` where one exists. Metrics are never stored on
these rows: the serving views (``analytics/views/sql/1*_serving_*.sql``) derive them (docs/reference/metrics.md).
"""

import pyarrow as pa

from analytics.schema._types import TS, f, table

REQUESTS = table(
    f("point_id", pa.string(), False, "the measurement point this request belongs to"),
    f("request_id", pa.string(), False, "sent as the X-Request-Id header (the server logs it)"),
    f("request_index", pa.int32(), doc="order of dispatch within the point (warm-up first)"),
    f("model", pa.string()),
    f(
        "request_model",
        pa.string(),
        doc="the name the request asked the server for: the model's, or a LoRA "
        "adapter's (a multi-LoRA variant's traffic split)",
    ),
    f("server_config", pa.string()),
    f("endpoint", pa.string(), doc="/v1/completions | /v1/chat/completions"),
    f(
        "prefix_group",
        pa.int64(),
        doc="a shared-prefix workload's group of this request (a trace: its first "
        "hash_ids block); NULL: no shared prefix",
    ),
    f("session_id", pa.string(), doc="a multi-turn workload's session (w<i>: a warm-up session)"),
    f("turn_index", pa.int32(), doc="0-based turn of the session this request carried"),
    f(
        "session_turns",
        pa.int32(),
        doc="the turns its session was drawn to have (fewer are sent when a turn would "
        "pass max_model_len or a turn fails)",
    ),
    f("warmup", pa.bool_(), False, "warm-up requests are stored but excluded from every metric"),
    f("t_scheduled_ns", pa.int64(), doc="perf_counter_ns when the arrival process said to start"),
    f("t_sent_ns", pa.int64(), doc="perf_counter_ns when the request was written"),
    f("t_done_ns", pa.int64(), doc="perf_counter_ns when the response ended (complete, failed or timed out)"),
    f("client_queue_s", pa.float64(), doc="t_sent - t_scheduled"),
    f("ttft_s", pa.float64(), doc="first event with non-empty choices - t_sent"),
    f("e2el_s", pa.float64(), doc="last event with non-empty choices - t_sent"),
    f("chunk_times_s", pa.list_(pa.float64()), doc="arrival of each content chunk, seconds after t_sent"),
    f("chunk_tokens", pa.list_(pa.int32()), doc="tokens per content chunk (per-chunk usage, else 1)"),
    f("chunk_tokens_source", pa.string(), doc="usage | assumed_one"),
    f("prompt_tokens", pa.int32()),
    f("prompt_tokens_source", pa.string(), doc="usage | built (the client's exact count)"),
    f("output_tokens", pa.int32()),
    f("tokens_source", pa.string(), doc="usage | retokenized | chunk_count (output_tokens)"),
    f("input_len", pa.int32(), doc="requested input length"),
    f("output_len", pa.int32(), doc="requested output length"),
    f("http_status", pa.int32()),
    f("success", pa.bool_(), False),
    f(
        "error_type",
        pa.string(),
        doc="HttpStatusError | StreamClosedError | MalformedEventError | NonSseBodyError | "
        "StallTimeoutError | RequestTimeoutError | ConnectError | EmptyStreamError | "
        "TruncatedStreamError",
    ),
    f("error", pa.string(), doc="verbatim error message"),
    f("sent_at", TS, doc="wall-clock time of t_sent (for telemetry joins)"),
    doc="One row per request, failed ones included.",
)

SWEEP_POINTS = table(
    f("point_id", pa.string(), False),
    f("model", pa.string()),
    f("server_config", pa.string()),
    f("server_kind", pa.string(), doc="vllm | transformers | synthetic | openai (the request adapter used)"),
    f("backend", pa.string()),
    f("endpoint", pa.string()),
    f("mode", pa.string(), doc="closed | open | sustained"),
    f("tokenizer", pa.string(), doc="the tokenizer the prompts were built with"),
    f("prompt_source", pa.string(), doc="random | instructions | sharegpt"),
    f("input_len", pa.int32()),
    f("output_len", pa.int32()),
    f("max_concurrency", pa.int32(), doc="closed-loop streams, or the open-loop cap (NULL: uncapped)"),
    f("request_rate", pa.float64(), doc="NULL for closed loop (vLLM writes inf)"),
    f("burstiness", pa.float64()),
    f("num_prompts", pa.int32()),
    f("warmup_requests", pa.int32()),
    f("seed", pa.int64()),
    f("duration_limit_s", pa.float64(), doc="closed loop for a duration: no request is sent after this"),
    f("window_s", pa.float64(), doc="sustained: window length"),
    f("warmup_windows", pa.int32(), doc="sustained: leading windows excluded from retention and drift"),
    f("retention_k", pa.int32(), doc="sustained: K windows compared for retention"),
    f("window_start", TS, doc="wall clock at the first measured dispatch (telemetry join)"),
    f("window_end", TS, doc="wall clock at the last completion (telemetry join)"),
    f("t_start_ns", pa.int64(), doc="perf_counter_ns of window_start"),
    f("grid_json", pa.string(), doc="the declared grid: values, bound, reduced, reason, arithmetic"),
    f("slo_json", pa.string(), doc='declared SLOs for goodput, e.g. {"ttft_ms": 500, "tpot_ms": 50}'),
    f("client_lag_bound_ms", pa.float64(), doc="a point whose client_queue p99 exceeds this is invalid"),
    f(
        "rate_tolerance",
        pa.float64(),
        doc="open loop: achieved dispatch rate may fall short of the offered by this fraction",
    ),
    f(
        "burst_bound",
        pa.float64(),
        doc="decode tokens per network read above which the stream counts as coalesced "
        "(TPOT/ITL then measure delivery, not decode); NULL: the views' default 2.0",
    ),
    f(
        "repeat_index",
        pa.int32(),
        doc="0-based repeat of this point within its run (lane config sweep_repeats > 1); "
        "NULL: measured once. Repeats share the point's key and are the unit of "
        "compare's run-level test",
    ),
    f("note", pa.string()),
    f(
        "search_json",
        pa.string(),
        doc="the search this point belongs to (pipeline.capacity: kind, search_id, SLO, "
        "attainment, precision, phase, step); NULL: not part of a search",
    ),
    f(
        "stop_reason",
        pa.string(),
        doc="why the point was cut short (saturation rule, pipeline.capacity); NULL: it ran its duration",
    ),
    f(
        "server_config_fingerprint",
        pa.string(),
        doc="the server config's fingerprint (every field that changes the "
        "compiled graphs; compiles.config_json says what it sets); NULL: "
        "imported, or measured before variants were recorded",
    ),
    f("workload", pa.string(), doc="the workload the point ran (pipeline.workloads); NULL: a fixed shape"),
    f(
        "workload_json",
        pa.string(),
        doc="its spec, what was drawn (lengths' mean, stdev, range; sessions), its "
        "fingerprint and the SHA-256 of any dataset or trace file it read",
    ),
    f("arrival", pa.string(), doc="a workload point's arrivals: closed | poisson | gamma | trace | ramp"),
    f(
        "prefix_cache_queries",
        pa.int64(),
        doc="the server's prefix-cache lookups (tokens) over the measured "
        "requests (vLLM's vllm:prefix_cache_queries counter); NULL: not exported",
    ),
    f("prefix_cache_hits", pa.int64(), doc="of those, the tokens found in the cache (vllm:prefix_cache_hits)"),
    f("prefix_cache_note", pa.string(), doc="why the prefix-cache counters are NULL"),
    f(
        "served_json",
        pa.string(),
        doc="what the point's roofline needs of the served model (pipeline.roofline.ServedModel: matmul_params, "
        "weight_bytes_per_param, kv_bytes_per_token, tensor_parallel, dtype; params and where they were counted; "
        "max_num_seqs, max_model_len); NULL: not recorded (an older or imported point without facts)",
    ),
    f(
        "model_mix_json",
        pa.string(),
        doc="a multi-LoRA variant's traffic split, {name: weight} (its adapters and, "
        "where it has a share, the base model); requests.request_model says which "
        "each request asked for; NULL: every request asked for the model",
    ),
    doc="One row per measurement point (its declaration); metrics come from the views over requests.",
)

SUSTAINED_WINDOWS = table(
    f("point_id", pa.string(), False),
    f("model", pa.string()),
    f("server_config", pa.string()),
    f("window", pa.int32(), False),
    f("window_s", pa.float64()),
    f("window_start", TS),
    f("output_tokens", pa.int64(), doc="tokens of the content chunks that arrived in the window"),
    f("output_throughput", pa.float64()),
    f("completed", pa.int32(), doc="successful requests that ended in the window"),
    f("failed", pa.int32()),
    f("p99_ttft_ms", pa.float64(), doc="over requests sent in the window"),
    f("warmup", pa.bool_()),
    doc="Fixed windows of a sustained closed loop (materialised from the sustained_window_metrics view).",
)

QUALITY = table(
    f("model", pa.string(), doc="the catalogue model (the same for the base and its fine-tune)"),
    f("variant", pa.string(), False, "base | finetune"),
    f("server_config", pa.string()),
    f("backend", pa.string()),
    f("endpoint", pa.string(), doc="/v1/chat/completions"),
    f("prompt_id", pa.string(), False),
    f("category", pa.string()),
    f("prompt", pa.string()),
    f("temperature", pa.float64()),
    f("seed", pa.int64()),
    f("max_tokens", pa.int32()),
    f("text_1", pa.string()),
    f("text_2", pa.string()),
    f("deterministic", pa.bool_(), doc="text_1 == text_2 (NULL when an ask failed)"),
    f("mean_logprob", pa.float64(), doc="mean per-token logprob of the first ask; NULL where the server returns none"),
    f("mean_logprob_2", pa.float64(), doc="the same for the second ask"),
    f("logprob_note", pa.string(), doc="the server's verbatim refusal (or what it returned instead) when NULL"),
    f("output_tokens", pa.int32(), doc="completion tokens of the first ask (server usage)"),
    f("output_tokens_2", pa.int32()),
    f("finish_reason", pa.string()),
    f("error", pa.string(), doc="verbatim error of a failed ask (the row stays: a failure is a result)"),
    doc="Fixed prompts, greedy, asked twice.",
)

LIMIT_PROBES = table(
    f("search_id", pa.string(), False, "one bisection of the limits or train_limits lane"),
    f("model", pa.string()),
    f(
        "kind",
        pa.string(),
        False,
        "the searched setting: max_model_len | max_num_seqs (serving) | train_seq_len (the training sequence length)",
    ),
    f("at_field", pa.string(), doc="the setting held fixed (train_seq_len: batch_size, per device)"),
    f("at_value", pa.int64(), doc="its value"),
    f("good", pa.int64(), doc="the search's known-good bound"),
    f("bad", pa.int64(), doc="the search's known-bad bound"),
    f("precision", pa.int64(), doc="the search stops when the bracket is this narrow"),
    f("max_boots", pa.int64(), doc="the search's boot budget (train_seq_len: its probe budget)"),
    f("probe", pa.int32(), doc="1-based order of the probe in its search; NULL on the outcome row"),
    f("phase", pa.string(), False, "good | bad | bisect (a probe), outcome (the search's last row: its stop_reason)"),
    f("value", pa.int64(), doc="the probed value"),
    f(
        "succeeded",
        pa.bool_(),
        doc="the server booted and answered one request (train_seq_len: the training run "
        "finished its steps); NULL on the outcome row",
    ),
    f(
        "error_kind",
        pa.string(),
        doc="a failed probe's classified error: oom | compile_error | timeout | exited | no_answer | ...",
    ),
    f("error", pa.string(), doc="its verbatim line"),
    f("wall_s", pa.float64(), doc="boot and answer, seconds (train_seq_len: the probe's run, a trn1 compile included)"),
    f(
        "config",
        pa.string(),
        doc="the probe's server config (its compiles row has the same name); train_seq_len: train-seq-<L>-bs<batch>",
    ),
    f("config_fingerprint", pa.string()),
    f("backend", pa.string()),
    f(
        "stop_reason",
        pa.string(),
        doc="outcome row: why the search stopped (precision, budget, a bound that was not what it said)",
    ),
    f(
        "peak_mem_bytes",
        pa.int64(),
        doc="train_seq_len: the probe's peak memory where a sensor exists (the "
        "device's on neuron, the probe process's RSS on the CPU); NULL otherwise",
    ),
    f("peak_mem_source", pa.string(), doc="what measured peak_mem_bytes"),
    f("tokens_per_s", pa.float64(), doc="train_seq_len: the probe's training tokens/s where it succeeded"),
    doc="One row per probe of the limits and train_limits lanes' bisections, and one outcome row per search.",
)

ACCURACY_SAMPLES = table(
    f("eval_id", pa.string(), False, "one evaluation: (model, variant, server_config, task) in one lane attempt"),
    f("model", pa.string()),
    f("variant", pa.string(), doc="base | finetune (the quality pair), or the served variant's name"),
    f("server_config", pa.string()),
    f("backend", pa.string()),
    f("task", pa.string(), False),
    f("output_type", pa.string(), doc="generate_until | multiple_choice (lm-eval's output type)"),
    f("doc_id", pa.int64(), False, "the task's document index (the pairing key across configurations)"),
    f("target", pa.string(), doc="the expected answer, as the task renders it"),
    f(
        "prediction",
        pa.string(),
        doc="the filtered answer (multiple choice: the chosen index); NULL when longer "
        "than 512 characters (prediction_hash and prediction_chars still kept)",
    ),
    f(
        "prediction_hash",
        pa.string(),
        doc="sha256 of the raw completion (multiple choice: of the choice log-likelihoods "
        "as printed to 6 significant digits): equal hashes, identical outputs",
    ),
    f("prediction_chars", pa.int32(), doc="length of the raw completion in characters"),
    f("metric", pa.string(), doc="the task's primary metric (exact_match | acc)"),
    f("correct", pa.bool_(), doc="metric_value == 1 for a 0/1 metric; NULL for a failed sample"),
    f("metric_value", pa.float64(), doc="the metric's value for this sample; NULL for a failed sample"),
    f("latency_s", pa.float64(), doc="wall seconds of this sample's request(s) to the server; NULL where not timed"),
    f("requests", pa.int32(), doc="requests this sample took (multiple choice: one per choice)"),
    f("error", pa.string(), doc="verbatim error of a failed sample (the row stays, excluded from accuracy)"),
    doc="One row per (evaluation, task document): the accuracy lane's per-sample results (lm-eval, served endpoint).",
)

ACCURACY_TASKS = table(
    f("eval_id", pa.string(), False),
    f("model", pa.string()),
    f("variant", pa.string()),
    f("server_config", pa.string()),
    f("backend", pa.string()),
    f("task", pa.string(), False),
    f("task_source", pa.string(), doc="shipped | path the task YAML and its data were read from"),
    f("output_type", pa.string()),
    f("metric", pa.string()),
    f("sample_limit", pa.int32(), doc="the lane's per-task sample limit (NULL: every document)"),
    f("n_docs", pa.int32(), doc="documents the task has"),
    f("n_samples", pa.int32(), doc="samples evaluated (rows in accuracy_samples)"),
    f("n_failed", pa.int32(), doc="of them, samples whose request failed"),
    f("lm_eval_score", pa.float64(), doc="lm-eval's own aggregate of the metric (a cross-check of the views)"),
    f("lm_eval_version", pa.string()),
    f("num_fewshot", pa.int32()),
    f("max_gen_toks", pa.int32(), doc="generation budget per sample (generation tasks)"),
    f("wall_s", pa.float64(), doc="the task's evaluation wall time"),
    f("status", pa.string(), False, "ok | refused | failed"),
    f("reason", pa.string(), doc="one line: why refused or failed (verbatim cause)"),
    doc="One row per evaluation (model, variant, server config, task): its settings and outcome.",
)

QUANTIZATIONS = table(
    f("model", pa.string(), False, "the catalogue model whose checkpoint was quantized"),
    f("config", pa.string(), False, "the server config that serves it (its quantization field names the method)"),
    f("method", pa.string(), False, "the quantization method (pipeline.servers QUANTIZATIONS), e.g. int8_weight_only"),
    f("backend", pa.string(), False),
    f("prepared_by", pa.string(), doc="what wrote the checkpoint: neuronpipe (agents.serving.int8_weights) | nxdi"),
    f("source_path", pa.string(), doc="the checkpoint quantized (its directory on the box)"),
    f("path", pa.string(), doc="where the prepared checkpoint went (a directory on the box)"),
    f("source_bytes", pa.int64(), doc="bytes of the source checkpoint's weight files"),
    f("bytes", pa.int64(), doc="bytes of the prepared checkpoint's weight files (NULL: not prepared)"),
    f("quantized_modules", pa.int64(), doc="linear layers quantized (NULL where the preparer does not say)"),
    f("wall_s", pa.float64(), doc="wall seconds of the preparation (load, quantize, write)"),
    f("reused", pa.bool_(), False, "the prepared checkpoint was already on the box: nothing was prepared, wall_s NULL"),
    f("succeeded", pa.bool_(), False),
    f("error", pa.string(), doc="the preparation's verbatim error (its last lines)"),
    f("ts", TS),
    doc="One row per quantized checkpoint a serving lane prepared before the boot that serves it.",
)

SERVING_TABLES = {
    "requests": REQUESTS,
    "sweep_points": SWEEP_POINTS,
    "sustained_windows": SUSTAINED_WINDOWS,
    "quality": QUALITY,
    "limit_probes": LIMIT_PROBES,
    "accuracy_samples": ACCURACY_SAMPLES,
    "accuracy_tasks": ACCURACY_TASKS,
    "quantizations": QUANTIZATIONS,
}
