-- A metric across runs of one request (docs/reference/history.md; docs/reference/metrics.md "Trend").
-- CREATE OR REPLACE VIEW statements only. Reads the provenance table (the request fingerprint the control plane
-- commits at each run's finalize), lane_runs and 12_serving_points' serving_points. Views defined here:
--   report_trend_runs        per run with a fingerprint: the fingerprint, its instance type (coalesce of the lanes'
--                            instance_type and priced_as) and when its last lane ended: the series' order
--   report_trend             one row per (request fingerprint, instance type, series, run): a headline serving
--                            point's value in that run (the geometric mean over its repeats, as compare's unit) and
--                            its 95 % interval (the widest of its repeats' intervals), valid points only (rule 15)
-- The change points and the noise band over each series are analytics.report.trend's (the E-divisive method of
-- analytics.changepoints is a permutation test, not SQL).
CREATE OR REPLACE VIEW report_trend_runs AS
WITH fp AS (
    SELECT run_id, any_value(value) AS request_fingerprint
    FROM provenance WHERE category = 'request' AND name = 'fingerprint' AND value IS NOT NULL
    GROUP BY run_id
)
SELECT fp.run_id, fp.request_fingerprint,
       coalesce(any_value(l.instance_type) FILTER (WHERE l.instance_type IS NOT NULL),
                any_value(l.priced_as) FILTER (WHERE l.priced_as IS NOT NULL)) AS instance_type,
       max(l.ended_at) AS ended_at
FROM fp LEFT JOIN lane_runs l USING (run_id)
GROUP BY fp.run_id, fp.request_fingerprint;

CREATE OR REPLACE VIEW report_trend AS
WITH p AS (
    SELECT run_id, lane, model, server_config, input_len, output_len, max_concurrency, request_rate, workload,
           output_throughput, output_throughput_ci_low, output_throughput_ci_high,
           p50_ttft_ms, p50_ttft_ms_ci_low, p50_ttft_ms_ci_high, p99_ttft_ms, p99_ttft_ms_ci_low, p99_ttft_ms_ci_high,
           p50_tpot_ms, p50_tpot_ms_ci_low, p50_tpot_ms_ci_high, p99_tpot_ms, p99_tpot_ms_ci_low, p99_tpot_ms_ci_high
    FROM serving_points WHERE valid
),
long AS (
    SELECT run_id, lane, model, server_config, input_len, output_len, max_concurrency, request_rate, workload,
           'output_throughput' AS metric, 'higher' AS better, output_throughput AS value,
           output_throughput_ci_low AS ci_low, output_throughput_ci_high AS ci_high FROM p
    UNION ALL SELECT run_id, lane, model, server_config, input_len, output_len, max_concurrency, request_rate, workload,
           'p50_ttft_ms', 'lower', p50_ttft_ms, p50_ttft_ms_ci_low, p50_ttft_ms_ci_high FROM p
    UNION ALL SELECT run_id, lane, model, server_config, input_len, output_len, max_concurrency, request_rate, workload,
           'p99_ttft_ms', 'lower', p99_ttft_ms, p99_ttft_ms_ci_low, p99_ttft_ms_ci_high FROM p
    UNION ALL SELECT run_id, lane, model, server_config, input_len, output_len, max_concurrency, request_rate, workload,
           'p50_tpot_ms', 'lower', p50_tpot_ms, p50_tpot_ms_ci_low, p50_tpot_ms_ci_high FROM p
    UNION ALL SELECT run_id, lane, model, server_config, input_len, output_len, max_concurrency, request_rate, workload,
           'p99_tpot_ms', 'lower', p99_tpot_ms, p99_tpot_ms_ci_low, p99_tpot_ms_ci_high FROM p
)
SELECT r.request_fingerprint, r.instance_type,
       l.lane || ' ' || l.model || ' ' || l.server_config || ' in=' || l.input_len || ' out=' || l.output_len
           || ' conc=' || l.max_concurrency || coalesce(' rate=' || l.request_rate, '')
           || coalesce(' workload=' || l.workload, '') || ' · ' || l.metric AS series,
       l.metric, any_value(l.better) AS better, l.run_id, any_value(r.ended_at) AS ended_at,
       CASE WHEN bool_and(l.value > 0) THEN exp(avg(ln(l.value))) ELSE avg(l.value) END AS value,
       min(l.ci_low) AS ci_low, max(l.ci_high) AS ci_high, count(*) AS repeats
FROM long l JOIN report_trend_runs r USING (run_id)
WHERE l.value IS NOT NULL
GROUP BY ALL;
