"""The load generator: OpenAI-compatible streaming load, measured the way docs/reference/metrics.md defines it.

API for lanes (import from the submodules; this package imports nothing heavy):

* ``agents.loadgen.point``: ``SweepPoint(base_url, model, input_len, output_len, num_prompts,
  concurrency=... | request_rate=..., burstiness, max_concurrency, endpoint="completions"|"chat",
  server_kind="vllm"|"transformers"|"synthetic"|"openai", slo={"ttft_ms":..,"tpot_ms":..,"e2el_ms":..},
  grid=KvGrid, server_config, backend, prompt_source="random"|"instructions"|"sharegpt", warmup_requests, seed)``;
  ``run_point(point, tokenizer=None, progress=None) -> PointResult`` with ``.requests`` (rows for the
  ``requests`` table), ``.sweep_point`` (the ``sweep_points`` row; ``window_start``/``window_end`` in UTC
  for telemetry joins) and ``.metrics`` (the ``serving_points`` view row: vLLM names such as
  ``median_ttft_ms``, ``p99_itl_ms``, ``output_throughput``, plus ``valid`` / ``invalid_reason``).
  In a lane: ``ctx.write("requests", r.requests); ctx.write("sweep_points", [r.sweep_point])``.
* ``agents.loadgen.sustained.run_sustained(point, duration_s, window_s=60, warmup_windows=1,
  retention_k=3) -> SustainedResult`` (``.point``, ``.windows`` rows for ``sustained_windows``,
  ``.summary`` with ``retention_vs_first``, ``retention_vs_peak``, drift slopes and 95% CIs).
* ``agents.loadgen.grid.derive_grid(model_config, device_mem_bytes, weight_bytes, max_model_len,
  max_num_seqs, dtype_bytes=2) -> KvGrid`` (values, bound, limit, reduced, reason, arithmetic).
* ``agents.loadgen.adapters``: the server-kind registry (``get_adapter``, ``detect_server_kind``).
* ``agents.loadgen.prompts.load_tokenizer(path|None, server_kind)``: the served tokenizer; default the
  bundled tiny one (``agents.training.tiny_models.ensure_tokenizer``), the whitespace one for the
  synthetic server.
* ``agents.loadgen.metrics``: loads rows into DuckDB and reads the serving family's
  views (``analytics/views/sql/1*_serving_*.sql``, ``analytics.views.SERVING_FILES``) (the only implementation of the
  metrics).
* ``agents.loadgen.vllm_json.save_vllm_json(result, path)``: ``vllm bench serve --save-result`` fields.
* ``agents.loadgen.synthetic_server``: deterministic streaming server with faults, a batching model and a
  ground-truth log (``python -m agents.loadgen.synthetic_server --port 0``).

The measured path (``transport``, ``client``) is a raw asyncio protocol on uvloop with pre-encoded requests;
JSON is parsed after the point (``records``).
"""
