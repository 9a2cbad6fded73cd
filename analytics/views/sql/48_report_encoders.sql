-- The encode lane: encoder models per workload, shape and batch size. Views defined here:
--   encode_call_stats      one row per (run, lane, workload, model, backend, shape, batch size) of encode_calls: n
--                          timed calls, latency per call p50 / p90 / p99 (linear-interpolated) with their 95%
--                          intervals from order statistics (12_serving_points.sql's method: ranks
--                          l = floor(n·p − 1.96·sqrt(n·p·(1−p))), u = ceil(n·p + 1.96·sqrt(n·p·(1−p))) + 1, a rank
--                          outside 1..n leaves that side NULL), items/s = real items / summed call seconds, and the
--                          real-time factor (speech) = summed call seconds / seconds of audio in them.
--   report_encoders        one row per (run, lane, workload, model, backend, shape, batch size): the placement
--                          (exporter path, status, compile and load seconds, cache), the numerics gate (cosine, max
--                          abs error, NaN count, thresholds, verdict) and the timing of encode_call_stats. headline:
--                          placed (status ok) and the numerics verdict pass — only those rows carry timing.
--   report_encode_decision one row per (instance, workload, model, shape): the highest batch size whose p99 latency
--                          per call is within the workload's SLO (encode_models.slo_p99_ms), its items/s, and the
--                          price per thousand items at that batch = usd_per_hour / (items/s · 3600) · 1000, priced as
--                          the Decision prices (the lane's instance type; a local run's priced_as; instance_prices).
--                          meets_slo false: no batch size met it (the batch columns are the smallest's, unpriced).
CREATE OR REPLACE VIEW encode_call_stats AS
WITH q AS (
    SELECT run_id, lane, workload, model, backend, shape, batch_size, count(*) AS n,
           quantile_cont(latency_ms, [0.5, 0.9, 0.99]) AS q, list(latency_ms ORDER BY latency_ms) AS s,
           sum(items) AS items, sum(latency_ms) / 1000.0 AS busy_s, sum(audio_s) AS audio_s
    FROM encode_calls GROUP BY ALL
),
ranks AS (
    SELECT *,
           list_transform([0.5, 0.9, 0.99]::DOUBLE[],
                          lambda p: CAST(floor(n * p - 1.96 * sqrt(n * p * (1 - p))) AS BIGINT)) AS lo_rank,
           list_transform([0.5, 0.9, 0.99]::DOUBLE[],
                          lambda p: CAST(ceil(n * p + 1.96 * sqrt(n * p * (1 - p))) AS BIGINT) + 1) AS hi_rank
    FROM q
)
SELECT run_id, lane, workload, model, backend, shape, batch_size, n, items,
       q[1] AS p50_ms, q[2] AS p90_ms, q[3] AS p99_ms,
       CASE WHEN lo_rank[1] BETWEEN 1 AND n THEN s[lo_rank[1]] END AS p50_low_ms,
       CASE WHEN hi_rank[1] BETWEEN 1 AND n THEN s[hi_rank[1]] END AS p50_high_ms,
       CASE WHEN lo_rank[2] BETWEEN 1 AND n THEN s[lo_rank[2]] END AS p90_low_ms,
       CASE WHEN hi_rank[2] BETWEEN 1 AND n THEN s[hi_rank[2]] END AS p90_high_ms,
       CASE WHEN lo_rank[3] BETWEEN 1 AND n THEN s[lo_rank[3]] END AS p99_low_ms,
       CASE WHEN hi_rank[3] BETWEEN 1 AND n THEN s[hi_rank[3]] END AS p99_high_ms,
       items / NULLIF(busy_s, 0) AS items_per_s,
       busy_s / NULLIF(audio_s, 0) AS rtf
FROM ranks;

CREATE OR REPLACE VIEW report_encoders AS
WITH eff AS (
    SELECT run_id, lane, attempt FROM report_lane_attempts WHERE effective
),
m AS (SELECT m.* FROM encode_models m JOIN eff USING (run_id, lane, attempt)),
x AS (SELECT x.* FROM encode_numerics x JOIN eff USING (run_id, lane, attempt))
SELECT m.run_id, m.lane, m.workload, m.modality, m.model, m.family, m.backend, m.shape, m.shape_unit,
       m.batch_size, m.exporter, m.status, m.reason AS placement_reason, m.graphs, m.compile_s, m.load_s, m.cache,
       m.input_shape, m.slo_p99_ms,
       x.reference, x.min_cosine, x.max_abs_err, x.nan_count, x.gate_min_cosine, x.gate_max_abs_err,
       x.verdict AS numerics_verdict, x.reason AS numerics_reason,
       m.status = 'ok' AND x.verdict = 'pass' AS headline,
       s.n, s.items, s.p50_ms, s.p50_low_ms, s.p50_high_ms, s.p90_ms, s.p90_low_ms, s.p90_high_ms,
       s.p99_ms, s.p99_low_ms, s.p99_high_ms, s.items_per_s, s.rtf
FROM m
LEFT JOIN x USING (run_id, lane, workload, model, backend, shape, batch_size)
LEFT JOIN encode_call_stats s
       ON s.run_id = m.run_id AND s.lane = m.lane AND s.workload = m.workload AND s.model = m.model
      AND s.backend IS NOT DISTINCT FROM m.backend AND s.shape IS NOT DISTINCT FROM m.shape
      AND s.batch_size IS NOT DISTINCT FROM m.batch_size
      AND m.status = 'ok' AND x.verdict = 'pass';

CREATE OR REPLACE VIEW report_encode_decision AS
WITH runs AS (
    SELECT l.run_id, l.lane, l.box_role, l.instance_type, l.priced_as
    FROM lane_runs l JOIN report_lane_attempts a USING (run_id, lane, attempt)
    WHERE a.effective
),
e AS (
    SELECT r.*,
           CASE WHEN coalesce(lr.box_role, '') = 'local' THEN lr.priced_as ELSE lr.instance_type END
               AS priced_instance_type,
           CASE WHEN coalesce(lr.box_role, '') = 'local' THEN coalesce(lr.priced_as, 'local (not priced)')
                ELSE coalesce(lr.instance_type, 'instance type not recorded') END AS instance,
           r.p99_ms <= r.slo_p99_ms AS meets
    FROM report_encoders r LEFT JOIN runs lr USING (run_id, lane)
    WHERE r.headline AND r.slo_p99_ms IS NOT NULL AND r.n > 0
),
best AS (
    SELECT run_id, lane, instance, priced_instance_type, workload, modality, model, backend, shape, shape_unit,
           any_value(slo_p99_ms) AS slo_p99_ms,
           bool_or(meets) AS meets_slo,
           coalesce(max(batch_size) FILTER (WHERE meets), min(batch_size)) AS batch_size,
           count(*) AS batch_sizes_measured
    FROM e GROUP BY ALL
)
SELECT b.run_id, b.lane, b.instance, b.priced_instance_type AS instance_type, b.workload, b.modality, b.model,
       b.backend, b.shape, b.shape_unit, b.slo_p99_ms, b.meets_slo, b.batch_size, b.batch_sizes_measured,
       e.p99_ms, e.p99_low_ms, e.p99_high_ms, e.items_per_s, e.rtf,
       ip.usd_per_hour, ip.price_date, ip.source AS price_source,
       CASE WHEN b.meets_slo THEN ip.usd_per_hour / NULLIF(e.items_per_s * 3600.0, 0) * 1000.0 END
           AS usd_per_1k_items,
       CASE WHEN NOT b.meets_slo THEN 'no batch size met p99 <= ' || b.slo_p99_ms || ' ms'
            WHEN b.priced_instance_type IS NULL THEN 'not priced: the instance type is not recorded (a local run: '
                 || 'run --local --price-as TYPE)'
            WHEN ip.usd_per_hour IS NULL THEN 'no price for instance type ' || b.priced_instance_type END AS note
FROM best b
JOIN e ON e.run_id = b.run_id AND e.lane = b.lane AND e.workload = b.workload AND e.model = b.model
      AND e.backend IS NOT DISTINCT FROM b.backend AND e.shape IS NOT DISTINCT FROM b.shape
      AND e.batch_size = b.batch_size
LEFT JOIN instance_prices ip ON ip.instance_type = b.priced_instance_type;
