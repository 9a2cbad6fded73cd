-- Aggregate-only results beside request-derived ones (owned by analytics/importers).
-- CREATE OR REPLACE VIEW statements only. Views defined here:
--   serving_points_all       every serving point: request-derived (12_serving_points' serving_points, metric_basis
--                            'requests') and aggregate-only (serving_aggregates rows whose point has no request
--                            rows, metric_basis 'aggregate': no validity gate, no goodput, no p95 — NULL — and the
--                            source's definitions in definitions_json)
--   sustained_iterations     retention from sustained_windows when a sustained point has no request rows, under
--                            both rules, each named: 'tail3_mean_over_first' (the torchneuronx predecessor's:
--                            mean of the last 3 iterations / the first) and 'median_last_k_over_first_k' (ours,
--                            K = sweep_points.retention_k, default 3)
--   train_step_clock         per training run: summed step_s (and mid-run save_s) against the training loop's wall time (from the lane's
--                            config_json train_loop_wall_s), the step-clock label, and a flag below 90 % coverage

CREATE OR REPLACE VIEW serving_points_all AS
SELECT run_id, lane, point_id, model, server_config, mode, input_len, output_len, max_concurrency, num_prompts,
       'requests' AS metric_basis,
       sent, completed, failed, duration, total_input_tokens, total_output_tokens,
       request_throughput, output_throughput, total_token_throughput,
       mean_ttft_ms, median_ttft_ms, std_ttft_ms, p50_ttft_ms, p90_ttft_ms, p95_ttft_ms, p99_ttft_ms,
       mean_tpot_ms, median_tpot_ms, std_tpot_ms, p50_tpot_ms, p90_tpot_ms, p95_tpot_ms, p99_tpot_ms,
       mean_itl_ms, median_itl_ms, std_itl_ms, p50_itl_ms, p90_itl_ms, p95_itl_ms, p99_itl_ms,
       mean_e2el_ms, median_e2el_ms, std_e2el_ms, p50_e2el_ms, p90_e2el_ms, p95_e2el_ms, p99_e2el_ms,
       goodput, valid, invalid_reason, first_error,
       p50_ttft_ms_ci_low, p50_ttft_ms_ci_high, p99_ttft_ms_ci_low, p99_ttft_ms_ci_high,
       p50_tpot_ms_ci_low, p50_tpot_ms_ci_high, p99_tpot_ms_ci_low, p99_tpot_ms_ci_high,
       output_throughput_ci_low, output_throughput_ci_high, request_throughput_ci_low, request_throughput_ci_high,
       goodput_ci_low, goodput_ci_high, ci_note,
       CAST(NULL AS VARCHAR) AS definitions_json, CAST(NULL AS VARCHAR) AS source_uri
FROM serving_points
UNION ALL BY NAME
SELECT a.run_id, a.lane, a.point_id, a.model, a.server_config, a.mode, a.input_len, a.output_len,
       a.max_concurrency, a.num_prompts,
       'aggregate' AS metric_basis,
       a.completed + a.failed AS sent, a.completed, a.failed, a.duration, a.total_input_tokens,
       a.total_output_tokens, a.request_throughput, a.output_throughput, a.total_token_throughput,
       a.mean_ttft_ms, a.median_ttft_ms, a.std_ttft_ms, a.p50_ttft_ms, a.p90_ttft_ms,
       CAST(NULL AS DOUBLE) AS p95_ttft_ms, a.p99_ttft_ms,
       a.mean_tpot_ms, a.median_tpot_ms, a.std_tpot_ms, a.p50_tpot_ms, a.p90_tpot_ms,
       CAST(NULL AS DOUBLE) AS p95_tpot_ms, a.p99_tpot_ms,
       a.mean_itl_ms, a.median_itl_ms, a.std_itl_ms, a.p50_itl_ms, a.p90_itl_ms,
       CAST(NULL AS DOUBLE) AS p95_itl_ms, a.p99_itl_ms,
       a.mean_e2el_ms, a.median_e2el_ms, a.std_e2el_ms, a.p50_e2el_ms, a.p90_e2el_ms,
       CAST(NULL AS DOUBLE) AS p95_e2el_ms, a.p99_e2el_ms,
       CAST(NULL AS DOUBLE) AS goodput, CAST(NULL AS BOOLEAN) AS valid,
       'aggregate only: no per-request rows, so no validity gate, no goodput and no p95' AS invalid_reason,
       CAST(NULL AS VARCHAR) AS first_error,
       CAST(NULL AS DOUBLE) AS p50_ttft_ms_ci_low, CAST(NULL AS DOUBLE) AS p50_ttft_ms_ci_high,
       CAST(NULL AS DOUBLE) AS p99_ttft_ms_ci_low, CAST(NULL AS DOUBLE) AS p99_ttft_ms_ci_high,
       CAST(NULL AS DOUBLE) AS p50_tpot_ms_ci_low, CAST(NULL AS DOUBLE) AS p50_tpot_ms_ci_high,
       CAST(NULL AS DOUBLE) AS p99_tpot_ms_ci_low, CAST(NULL AS DOUBLE) AS p99_tpot_ms_ci_high,
       CAST(NULL AS DOUBLE) AS output_throughput_ci_low, CAST(NULL AS DOUBLE) AS output_throughput_ci_high,
       CAST(NULL AS DOUBLE) AS request_throughput_ci_low, CAST(NULL AS DOUBLE) AS request_throughput_ci_high,
       CAST(NULL AS DOUBLE) AS goodput_ci_low, CAST(NULL AS DOUBLE) AS goodput_ci_high,
       'aggregate only: the source kept no per-request values, so no interval' AS ci_note,
       a.definitions_json, a.source_uri
FROM serving_aggregates a
WHERE NOT EXISTS (SELECT 1 FROM requests r
                  WHERE r.run_id = a.run_id AND r.lane = a.lane AND r.point_id = a.point_id);

CREATE OR REPLACE VIEW sustained_iterations AS
WITH pts AS (
    SELECT w.run_id, w.lane, w.point_id, any_value(w.model) AS model, any_value(w.server_config) AS server_config,
           count(*) AS iterations
    FROM sustained_windows w
    WHERE NOT coalesce(w.warmup, false)
      AND NOT EXISTS (SELECT 1 FROM requests r
                      WHERE r.run_id = w.run_id AND r.lane = w.lane AND r.point_id = w.point_id)
    GROUP BY ALL
),
ranked AS (
    SELECT w.*, coalesce(s.retention_k, 3) AS k,
           row_number() OVER (PARTITION BY w.run_id, w.lane, w.point_id ORDER BY w."window") AS pos,
           count(*) OVER (PARTITION BY w.run_id, w.lane, w.point_id) AS n
    FROM sustained_windows w
    SEMI JOIN pts p ON p.run_id = w.run_id AND p.lane = w.lane AND p.point_id = w.point_id
    LEFT JOIN sweep_points s ON s.run_id = w.run_id AND s.lane = w.lane AND s.point_id = w.point_id
    WHERE NOT coalesce(w.warmup, false)
),
agg AS (
    SELECT run_id, lane, point_id, any_value(k) AS k,
           arg_min(output_throughput, pos) AS first_throughput,
           max(output_throughput) AS peak_throughput,
           arg_max(output_throughput, pos) AS last_throughput,
           avg(output_throughput) FILTER (WHERE pos > n - 3) AS tail3_mean_throughput,
           median(output_throughput) FILTER (WHERE pos <= k) AS first_k_throughput,
           median(output_throughput) FILTER (WHERE pos > n - k) AS last_k_throughput,
           sum(completed) AS completed, sum(failed) AS failed
    FROM ranked GROUP BY ALL
)
SELECT p.run_id, p.lane, p.point_id, p.model, p.server_config, p.iterations, a.completed, a.failed,
       a.first_throughput, a.peak_throughput, a.last_throughput,
       'tail3_mean_over_first' AS rule,
       a.tail3_mean_throughput / NULLIF(a.first_throughput, 0) AS retention,
       a.tail3_mean_throughput / NULLIF(a.peak_throughput, 0) AS retention_vs_peak
FROM pts p JOIN agg a USING (run_id, lane, point_id)
UNION ALL
SELECT p.run_id, p.lane, p.point_id, p.model, p.server_config, p.iterations, a.completed, a.failed,
       a.first_throughput, a.peak_throughput, a.last_throughput,
       'median_last_k_over_first_k' AS rule,
       a.last_k_throughput / NULLIF(a.first_k_throughput, 0) AS retention,
       a.last_k_throughput / NULLIF(a.peak_throughput, 0) AS retention_vs_peak
FROM pts p JOIN agg a USING (run_id, lane, point_id);

CREATE OR REPLACE VIEW train_step_clock AS
WITH steps AS (
    SELECT run_id, lane, model, count(*) AS steps, sum(step_s) AS summed_step_s, median(step_s) AS median_step_s
    FROM train_steps GROUP BY ALL
),
runs AS (
    SELECT run_id, lane, config_json FROM lane_runs
    QUALIFY row_number() OVER (PARTITION BY run_id, lane ORDER BY ended_at DESC, attempt DESC) = 1
),
saves AS (  -- mid-run checkpoint saves are timed apart from the steps (train_saves): the loop holds both
    SELECT run_id, lane, model, sum(save_s) AS summed_save_s FROM train_saves GROUP BY ALL
),
j AS (  -- train_runs' columns first; an import made before they existed kept them in config_json
    SELECT s.run_id, s.lane, s.model, s.steps, s.summed_step_s + coalesce(v.summed_save_s, 0) AS clocked_s,
           s.summed_step_s, s.median_step_s,
           coalesce(t.train_loop_s,
                    TRY_CAST(json_extract(r.config_json, '$.train_loop_wall_s') ->> s.model AS DOUBLE)) AS train_loop_wall_s,
           coalesce(t.step_clock, json_extract_string(r.config_json, '$.step_clock')) AS step_clock
    FROM steps s LEFT JOIN runs r USING (run_id, lane)
    LEFT JOIN train_runs t ON t.run_id = s.run_id AND t.lane = s.lane AND t.model = s.model
    LEFT JOIN saves v ON v.run_id = s.run_id AND v.lane = s.lane AND v.model = s.model
)
SELECT run_id, lane, model, steps, summed_step_s, median_step_s, train_loop_wall_s, step_clock,
       clocked_s / NULLIF(train_loop_wall_s, 0) AS step_clock_coverage,
       coalesce(clocked_s / NULLIF(train_loop_wall_s, 0) < 0.9, false) AS step_clock_partial
FROM j;
