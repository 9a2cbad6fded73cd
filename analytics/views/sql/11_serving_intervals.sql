-- docs/reference/metrics.md, "Serving" as SQL, the single implementation (the serving family, 2 of 4: what the 95% intervals
-- are computed from). Owned by the load generator (agents/loadgen). CREATE OR REPLACE VIEW statements only.
-- Reads request_slo (10_serving_requests.sql) and the table requests; the load order is analytics.views.VIEW_FILES.
--
-- t_crit_95                two-sided 95% Student-t quantiles by df (the one t table of the intervals below)
-- point_rate_batches       one row per batch of a point's span: the batch rates the rate intervals come from

-- Two-sided 95% Student-t quantiles t(0.975, df). A df between rows takes the next smaller row (conservative:
-- a wider interval); read it with `ASOF LEFT JOIN t_crit_95 t ON x.df >= t.df` (df < 1: no row, NULL).
CREATE OR REPLACE VIEW t_crit_95 AS
SELECT CAST(df AS BIGINT) AS df, CAST(t AS DOUBLE) AS t
FROM (VALUES (1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571), (6, 2.447), (7, 2.365), (8, 2.306),
             (9, 2.262), (10, 2.228), (11, 2.201), (12, 2.179), (13, 2.160), (14, 2.145), (15, 2.131),
             (16, 2.120), (17, 2.110), (18, 2.101), (19, 2.093), (20, 2.086), (21, 2.080), (22, 2.074),
             (23, 2.069), (24, 2.064), (25, 2.060), (26, 2.056), (27, 2.052), (28, 2.048), (29, 2.045),
             (30, 2.042), (40, 2.021), (60, 2.000), (120, 1.980), (100000, 1.960)) v(df, t);

-- Batch means for the rate intervals: the point's span [first dispatch after warm-up, last completion] (the
-- duration of serving_points) cut into B equal batches; B = 10 from 20 completed requests, else
-- floor(completed / 2) (3..9), none under 6 completed. Completions (and their prompt tokens) count in the batch
-- of t_done_ns; output tokens in the batch their chunk arrived in (t_sent_ns + chunk_times_s[i] * 1e9), each
-- chunk weighted by chunk_tokens scaled so a request's chunks carry its output_tokens (a request without
-- counted chunks puts them at t_done_ns). The mean of the B batch rates is then the point's rate exactly.
CREATE OR REPLACE VIEW point_rate_batches AS
WITH spans AS (
    SELECT run_id, lane, point_id, min(t_sent_ns) AS t0_ns, max(t_done_ns) AS t1_ns,
           count(*) FILTER (WHERE success) AS point_completed, any_value(slo_json) AS slo_json
    FROM request_slo GROUP BY ALL
),
spec AS (
    SELECT *, CAST(CASE WHEN point_completed >= 20 THEN 10
                        WHEN point_completed >= 6 THEN point_completed // 2 END AS BIGINT) AS batches
    FROM spans
    WHERE t1_ns > t0_ns
),
done AS (
    SELECT q.run_id, q.lane, q.point_id,
           least(greatest(CAST(floor(CAST(q.t_done_ns - p.t0_ns AS DOUBLE) * p.batches / (p.t1_ns - p.t0_ns))
                               AS BIGINT), 0), p.batches - 1) + 1 AS batch,
           count(*) AS completed, count(*) FILTER (WHERE q.good) AS good_completed,
           coalesce(sum(q.prompt_tokens), 0) AS prompt_tokens
    FROM request_slo q JOIN spec p USING (run_id, lane, point_id)
    WHERE q.success AND p.batches IS NOT NULL
    GROUP BY ALL
),
streams AS (
    SELECT r.run_id, r.lane, r.point_id, r.t_sent_ns, r.t_done_ns, r.output_tokens,
           coalesce(list_sum(r.chunk_tokens), 0) > 0 AS counted,
           r.chunk_times_s, r.chunk_tokens, list_sum(r.chunk_tokens) AS chunk_total
    FROM requests r SEMI JOIN spec p ON r.run_id = p.run_id AND r.lane = p.lane AND r.point_id = p.point_id
                                        AND p.batches IS NOT NULL
    WHERE NOT r.warmup AND r.success AND r.output_tokens > 0
),
arrivals AS (
    SELECT run_id, lane, point_id, t_sent_ns + unnest(chunk_times_s) * 1e9 AS t_ns,
           unnest(chunk_tokens) * output_tokens / chunk_total AS tokens
    FROM streams WHERE counted
    UNION ALL
    SELECT run_id, lane, point_id, CAST(t_done_ns AS DOUBLE) AS t_ns, CAST(output_tokens AS DOUBLE) AS tokens
    FROM streams WHERE NOT counted
),
tokens AS (
    SELECT a.run_id, a.lane, a.point_id,
           least(greatest(CAST(floor((a.t_ns - p.t0_ns) * p.batches / (p.t1_ns - p.t0_ns)) AS BIGINT), 0),
                 p.batches - 1) + 1 AS batch,
           sum(a.tokens) AS output_tokens
    FROM arrivals a JOIN spec p USING (run_id, lane, point_id)
    GROUP BY ALL
),
grid AS (
    SELECT run_id, lane, point_id, slo_json, batches, (t1_ns - t0_ns) / 1e9 / batches AS batch_s,
           unnest(range(1, batches + 1)) AS batch
    FROM spec WHERE batches IS NOT NULL
)
SELECT g.run_id, g.lane, g.point_id, CAST(g.batch AS INTEGER) AS batch, CAST(g.batches AS INTEGER) AS batches,
       g.batch_s,
       CAST(coalesce(d.completed, 0) AS BIGINT) AS completed,
       CAST(coalesce(d.good_completed, 0) AS BIGINT) AS good_completed,
       coalesce(k.output_tokens, 0.0) AS output_tokens,
       coalesce(k.output_tokens, 0.0) + coalesce(d.prompt_tokens, 0) AS total_tokens,
       coalesce(d.completed, 0) / g.batch_s AS request_rate,
       coalesce(k.output_tokens, 0.0) / g.batch_s AS output_rate,
       (coalesce(k.output_tokens, 0.0) + coalesce(d.prompt_tokens, 0)) / g.batch_s AS total_token_rate,
       CASE WHEN g.slo_json IS NOT NULL THEN coalesce(d.good_completed, 0) / g.batch_s END AS good_rate
FROM grid g
LEFT JOIN done d USING (run_id, lane, point_id, batch)
LEFT JOIN tokens k USING (run_id, lane, point_id, batch);
