-- The roofline of every serving point (docs/reference/metrics.md "Roofline"; pipeline/roofline.py holds the same
-- formulas for the planner's predictions, and a test keeps the two equal). CREATE OR REPLACE VIEW statements only.
-- Runs after 44_hardware.sql (accelerator_facts, accelerator_peaks, instance_accelerators) and 70_aggregates.sql
-- (serving_points_all). Views defined here:
--   point_bounds     one row per serving point: the hardware its devices add up to (a catalogued accelerator's
--                    share for its tensor parallelism, or on the CPU the run's own host_cpu measurements), the
--                    lower bounds on TPOT and TTFT and the upper bound on output tokens/s at the point's batch,
--                    what binds each (memory | compute). A point without facts has NULL bounds and roofline_note
--                    says why. Facts only: cheap to join.
--   point_roofline   point_bounds beside the point's measurements (serving_points_all) and the achieved fraction
--                    of each bound ("% of the limit": bound / measured for a latency, measured / bound for a rate).
-- Batch B = the point's concurrency (closed loop) or its peak concurrent requests (open loop), at most the
-- config's max_num_seqs; the mean context L = input_len + output_len / 2. Decode step = max((W + B·L·kv) / BW,
-- 2·N·B / peak); TPOT bound = step; tokens/s bound = B / step; TTFT bound = max(2·N·I / peak, (W + I·kv) / BW).
CREATE OR REPLACE VIEW point_bounds AS
WITH pts AS (
    SELECT sp.run_id, sp.lane, sp.point_id, sp.model, sp.server_config, sp.backend, sp.mode,
           sp.input_len, sp.output_len, sp.workload,
           coalesce(sp.max_concurrency, pk.max_concurrent_requests) AS concurrency,
           CAST(json_extract(sp.served_json, '$.matmul_params') AS DOUBLE)          AS n_params,
           CAST(json_extract(sp.served_json, '$.weight_bytes_per_param') AS DOUBLE) AS weight_bytes_per_param,
           CAST(json_extract(sp.served_json, '$.kv_bytes_per_token') AS DOUBLE)     AS kv_bytes_per_token,
           CAST(json_extract(sp.served_json, '$.tensor_parallel') AS INTEGER)       AS tensor_parallel,
           json_extract_string(sp.served_json, '$.dtype')                           AS dtype,
           CAST(json_extract(sp.served_json, '$.max_num_seqs') AS INTEGER)          AS max_num_seqs,
           sp.served_json IS NOT NULL                                               AS has_facts
    FROM sweep_points sp
    LEFT JOIN point_peaks pk USING (run_id, lane, point_id)
),
lanes AS (
    SELECT run_id, lane, max(instance_type) AS instance_type, max(backend) AS lane_backend FROM lane_runs GROUP BY ALL
),
peak16 AS (
    -- a dtype without a figure of its own computes at the 16-bit peak (bf16, else fp16)
    SELECT accelerator, coalesce(max(flops) FILTER (WHERE dtype = 'bf16'), max(flops) FILTER (WHERE dtype = 'fp16'))
               AS flops
    FROM accelerator_peaks GROUP BY ALL
),
host AS (
    -- the CPU's ceiling, measured by the same run's host_cpu lane (best figure over thread counts)
    SELECT run_id,
           max(value) FILTER (WHERE bench = 'triad' AND unit = 'GB/s') * 1e9       AS bytes_per_s,
           max(value) FILTER (WHERE bench = 'matmul' AND unit = 'GFLOP/s') * 1e9   AS flops
    FROM host_bench GROUP BY ALL
),
placed AS (
    -- the backend the point ran on: its own, else its lane's
    SELECT p.* REPLACE (coalesce(p.backend, l.lane_backend) AS backend), l.instance_type
    FROM pts p LEFT JOIN lanes l USING (run_id, lane)
),
hw AS (
    SELECT p.*, ia.accelerator, af.cores AS accelerator_cores,
           CASE WHEN p.backend = 'cpu' THEN 'CPU (measured)'
                WHEN af.accelerator IS NULL THEN NULL
                WHEN af.cores > 1 THEN
                    printf('%g× %s (%d of its NeuronCores)', p.tensor_parallel / af.cores, af.accelerator,
                           p.tensor_parallel)
                ELSE printf('%d× %s', p.tensor_parallel, af.accelerator) END               AS hardware,
           CASE WHEN p.backend = 'cpu' THEN h.bytes_per_s
                ELSE af.memory_bytes_per_s * p.tensor_parallel / af.cores END              AS bytes_per_s,
           CASE WHEN p.backend = 'cpu' THEN h.flops
                ELSE coalesce(pk_d.flops, pk_16.flops) * p.tensor_parallel / af.cores END  AS flops,
           CASE WHEN p.backend = 'cpu' THEN 'this run''s host_cpu lane: best triad GB/s and matmul GFLOP/s'
                ELSE af.source || ' (as of ' || af.as_of || ')' END                       AS hardware_source,
           CASE
               WHEN NOT p.has_facts THEN 'no served-model facts recorded with this point'
               WHEN p.backend = 'cpu' AND h.bytes_per_s IS NULL
                   THEN 'no host_cpu triad in this run: the CPU has no measured ceiling'
               WHEN p.backend = 'cpu' AND h.flops IS NULL
                   THEN 'no host_cpu matmul in this run: the CPU has no measured ceiling'
               WHEN p.backend IS DISTINCT FROM 'cpu' AND p.instance_type IS NULL
                   THEN 'no instance type recorded for this lane'
               WHEN p.backend IS DISTINCT FROM 'cpu' AND af.accelerator IS NULL
                   THEN 'no hardware facts for instance type ' || p.instance_type
               WHEN p.concurrency IS NULL THEN 'no concurrency known for this point'
           END AS roofline_note
    FROM placed p
    LEFT JOIN host h USING (run_id)
    LEFT JOIN instance_accelerators ia ON ia.instance_type = p.instance_type
    LEFT JOIN accelerator_facts af ON af.accelerator = ia.accelerator
    LEFT JOIN accelerator_peaks pk_d ON pk_d.accelerator = af.accelerator AND pk_d.dtype = p.dtype
    LEFT JOIN peak16 pk_16 ON pk_16.accelerator = af.accelerator
),
shaped AS (
    SELECT *,
           greatest(1, least(concurrency, coalesce(max_num_seqs, concurrency))) AS batch,
           input_len + output_len / 2.0                                          AS mean_context,
           n_params * weight_bytes_per_param                                     AS weight_bytes
    FROM hw WHERE roofline_note IS NULL
),
bounded AS (
    SELECT run_id, lane, point_id, batch, mean_context,
           (weight_bytes + batch * mean_context * kv_bytes_per_token) / bytes_per_s AS decode_memory_s,
           2.0 * n_params * batch / flops                                          AS decode_compute_s,
           2.0 * n_params * input_len / flops                                      AS prefill_compute_s,
           (weight_bytes + input_len * kv_bytes_per_token) / bytes_per_s           AS prefill_memory_s
    FROM shaped
)
SELECT h.run_id, h.lane, h.point_id, h.model, h.server_config, h.backend, h.mode, h.input_len, h.output_len,
       h.workload, h.instance_type, h.hardware, h.hardware_source, h.bytes_per_s, h.flops, h.dtype,
       h.tensor_parallel, h.n_params AS matmul_params, h.weight_bytes_per_param, h.kv_bytes_per_token,
       b.batch, b.mean_context,
       greatest(b.decode_memory_s, b.decode_compute_s) * 1000.0                     AS tpot_bound_ms,
       greatest(b.prefill_compute_s, b.prefill_memory_s) * 1000.0                   AS ttft_bound_ms,
       b.batch / greatest(b.decode_memory_s, b.decode_compute_s)                    AS output_tokens_per_s_bound,
       CASE WHEN b.decode_memory_s >= b.decode_compute_s THEN 'memory' ELSE 'compute' END  AS decode_bound_by,
       CASE WHEN b.prefill_compute_s >= b.prefill_memory_s THEN 'compute' ELSE 'memory' END AS prefill_bound_by,
       CASE WHEN h.roofline_note IS NOT NULL THEN h.roofline_note
            WHEN h.backend = 'cpu' THEN 'CPU: a measured ceiling (DRAM triad); weights in cache can beat it'
            WHEN h.workload IS NOT NULL THEN 'workload point: bounds at its nominal lengths'
       END AS roofline_note
FROM hw h
LEFT JOIN bounded b USING (run_id, lane, point_id);

-- The bounds beside the measurements: % of the limit. A view that already holds a point's measured output tok/s
-- (the Decision, the capacity search, the serving tables) joins point_bounds and divides the same way, rather
-- than computing serving_points_all a second time through this view. A median of 0 ms (a point whose requests
-- produced one token each has no interval between tokens) has no fraction: NULL, not infinity.
CREATE OR REPLACE VIEW point_roofline AS
SELECT b.*, s.output_throughput, s.median_tpot_ms, s.median_ttft_ms,
       s.output_throughput / b.output_tokens_per_s_bound AS throughput_fraction,
       b.tpot_bound_ms / NULLIF(s.median_tpot_ms, 0)     AS tpot_fraction,
       b.ttft_bound_ms / NULLIF(s.median_ttft_ms, 0)     AS ttft_fraction
FROM point_bounds b
LEFT JOIN serving_points_all s USING (run_id, lane, point_id);
