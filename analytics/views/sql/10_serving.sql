-- METRICS.md "Serving" and "Sustained" as SQL: the single implementation.
-- Owned by the load generator (agents/loadgen). CREATE OR REPLACE VIEW statements only.
--
-- request_metrics          one row per measured (non-warm-up) request: TTFT, TPOT, E2EL, queue, length check
-- request_itls             one row per gap between consecutive content chunks (ITL, ITL per token)
-- request_reads            one row per network read that carried content (how the tokens arrived)
-- point_peaks              vLLM's per-second peaks: max_output_tokens_per_s, max_concurrent_requests
-- t_crit_95                two-sided 95% Student-t quantiles by df (the one t table of the intervals below)
-- request_slo              one row per measured request: its point's SLOs and whether it met them (good)
-- point_rate_batches       one row per batch of a point's span: the batch rates the rate intervals come from
-- serving_points           one row per sweep point: vLLM-named aggregates, throughput, goodput, validity,
--                          and a 95% confidence interval on each (docs/metrics.md "Confidence intervals")
-- sustained_window_metrics one row per fixed window of a sustained point
-- sustained_summary        retention vs first / peak K windows with 95% CI, drift slopes with 95% CI

-- Two-sided 95% Student-t quantiles t(0.975, df). A df between rows takes the next smaller row (conservative:
-- a wider interval); read it with `ASOF LEFT JOIN t_crit_95 t ON x.df >= t.df` (df < 1: no row, NULL).
CREATE OR REPLACE VIEW t_crit_95 AS
SELECT CAST(df AS BIGINT) AS df, CAST(t AS DOUBLE) AS t
FROM (VALUES (1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571), (6, 2.447), (7, 2.365), (8, 2.306),
             (9, 2.262), (10, 2.228), (11, 2.201), (12, 2.179), (13, 2.160), (14, 2.145), (15, 2.131),
             (16, 2.120), (17, 2.110), (18, 2.101), (19, 2.093), (20, 2.086), (21, 2.080), (22, 2.074),
             (23, 2.069), (24, 2.064), (25, 2.060), (26, 2.056), (27, 2.052), (28, 2.048), (29, 2.045),
             (30, 2.042), (40, 2.021), (60, 2.000), (120, 1.980), (100000, 1.960)) v(df, t);

CREATE OR REPLACE VIEW request_metrics AS
SELECT
    run_id, lane, attempt, point_id, request_id, request_index, success, error_type, error,
    t_scheduled_ns, t_sent_ns, t_done_ns, sent_at,
    client_queue_s * 1000.0 AS client_queue_ms,
    ttft_s * 1000.0 AS ttft_ms,
    e2el_s * 1000.0 AS e2el_ms,
    -- TPOT = (E2EL - TTFT) / (output_tokens - 1), only where output_tokens > 1
    CASE WHEN output_tokens > 1 THEN (e2el_s - ttft_s) * 1000.0 / (output_tokens - 1) END AS tpot_ms,
    prompt_tokens, output_tokens, input_len, output_len, tokens_source,
    len(chunk_times_s) AS chunks,
    (input_len IS NOT NULL AND prompt_tokens IS DISTINCT FROM input_len)
        OR (output_len IS NOT NULL AND output_tokens IS DISTINCT FROM output_len) AS length_mismatch
FROM requests
WHERE NOT warmup;

CREATE OR REPLACE VIEW request_itls AS
WITH gaps AS (
    SELECT run_id, lane, point_id, request_id, chunk_times_s, chunk_tokens,
           unnest(range(1, len(chunk_times_s))) AS i
    FROM requests
    WHERE NOT warmup AND success AND len(chunk_times_s) > 1
)
SELECT
    run_id, lane, point_id, request_id, i AS gap_index,
    (chunk_times_s[i + 1] - chunk_times_s[i]) * 1000.0 AS itl_ms,
    chunk_tokens[i + 1] AS tokens,
    -- ITL per token: the gap divided by the tokens the later chunk carried (NULL for an empty chunk)
    (chunk_times_s[i + 1] - chunk_times_s[i]) * 1000.0 / NULLIF(chunk_tokens[i + 1], 0) AS itl_per_token_ms
FROM gaps;

-- Chunks the client received in one network read share one receive stamp (the transport stamps each read
-- once), so a read is a distinct chunk time. read_index 1 holds the first token; later reads are decode.
CREATE OR REPLACE VIEW request_reads AS
WITH chunks AS (
    SELECT run_id, lane, point_id, request_id,
           unnest(chunk_times_s) AS read_s, unnest(chunk_tokens) AS tokens,
           unnest(range(1, len(chunk_times_s) + 1)) AS chunk_index
    FROM requests
    WHERE NOT warmup AND success AND len(chunk_times_s) > 0
)
SELECT run_id, lane, point_id, request_id, read_s, sum(tokens) AS tokens, count(*) AS chunks,
       -- decode tokens: those after the first chunk (a first read holding the whole answer is all burst)
       coalesce(sum(tokens) FILTER (WHERE chunk_index > 1), 0) AS decode_tokens,
       row_number() OVER (PARTITION BY run_id, lane, point_id, request_id ORDER BY read_s) AS read_index
FROM chunks
GROUP BY run_id, lane, point_id, request_id, read_s;

-- vLLM's peaks (vllm bench serve, calculate_metrics): one-second buckets from the first successful request's
-- start; a bucket counts the content chunks received in it (vLLM counts chunks as tokens) and the successful
-- requests active during it; each peak is the largest bucket.
CREATE OR REPLACE VIEW point_peaks AS
WITH ok AS (
    SELECT run_id, lane, point_id, request_id, t_sent_ns, e2el_s, chunk_times_s
    FROM requests WHERE NOT warmup AND success
),
origin AS (
    SELECT run_id, lane, point_id, min(t_sent_ns) AS t0_ns FROM ok GROUP BY ALL
),
chunk_buckets AS (
    SELECT c.run_id, c.lane, c.point_id, CAST(floor((c.t_sent_ns + c.t_rel_s * 1e9 - o.t0_ns) / 1e9) AS BIGINT) AS sec,
           count(*) AS chunks
    FROM (SELECT run_id, lane, point_id, t_sent_ns, unnest(chunk_times_s) AS t_rel_s FROM ok) c
    JOIN origin o USING (run_id, lane, point_id)
    GROUP BY ALL
),
active AS (
    SELECT run_id, lane, point_id,
           unnest(range(CAST(floor((k.t_sent_ns - o.t0_ns) / 1e9) AS BIGINT),
                        CAST(floor((k.t_sent_ns + k.e2el_s * 1e9 - o.t0_ns) / 1e9) AS BIGINT) + 1)) AS sec
    FROM ok k JOIN origin o USING (run_id, lane, point_id)
),
active_buckets AS (
    SELECT run_id, lane, point_id, sec, count(*) AS requests FROM active GROUP BY ALL
)
SELECT o.run_id, o.lane, o.point_id,
       CAST(coalesce((SELECT max(chunks) FROM chunk_buckets b
                      WHERE b.run_id = o.run_id AND b.lane = o.lane AND b.point_id = o.point_id), 0) AS DOUBLE)
           AS max_output_tokens_per_s,
       CAST(coalesce((SELECT max(requests) FROM active_buckets a
                      WHERE a.run_id = o.run_id AND a.lane = o.lane AND a.point_id = o.point_id), 0) AS BIGINT)
           AS max_concurrent_requests
FROM origin o;

CREATE OR REPLACE VIEW request_slo AS
SELECT m.*, s.slo_json,
    -- a request is good when it meets every declared SLO; TPOT counts as 0 where output_tokens <= 1
    m.success
    AND (json_extract(s.slo_json, '$.ttft_ms') IS NULL
         OR m.ttft_ms <= CAST(json_extract(s.slo_json, '$.ttft_ms') AS DOUBLE))
    AND (json_extract(s.slo_json, '$.tpot_ms') IS NULL
         OR coalesce(m.tpot_ms, 0.0) <= CAST(json_extract(s.slo_json, '$.tpot_ms') AS DOUBLE))
    AND (json_extract(s.slo_json, '$.e2el_ms') IS NULL
         OR m.e2el_ms <= CAST(json_extract(s.slo_json, '$.e2el_ms') AS DOUBLE)) AS good
FROM request_metrics m
LEFT JOIN sweep_points s USING (run_id, lane, point_id);

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

CREATE OR REPLACE VIEW serving_points AS
WITH per_request AS (
    SELECT * FROM request_slo
),
req AS (
    SELECT
    run_id, lane, point_id,
    count(*) AS sent,
    count(*) FILTER (WHERE success) AS completed,
    count(*) FILTER (WHERE NOT success) AS failed,
    count(*) FILTER (WHERE good) AS good_completed,
    min(t_sent_ns) AS first_sent_ns,
    max(t_sent_ns) AS last_sent_ns,
    min(t_scheduled_ns) AS first_scheduled_ns,
    max(t_scheduled_ns) AS last_scheduled_ns,
    max(t_done_ns) AS last_done_ns,
    sum(prompt_tokens) FILTER (WHERE success) AS total_input_tokens,
    sum(output_tokens) FILTER (WHERE success) AS total_output_tokens,
    avg(ttft_ms) FILTER (WHERE success) AS mean_ttft_ms,
    stddev_pop(ttft_ms) FILTER (WHERE success) AS std_ttft_ms,
    -- one sort per metric: the median is the linear-interpolated p50
    quantile_cont(ttft_ms, [0.5, 0.9, 0.95, 0.99]) FILTER (WHERE success) AS q_ttft,
    -- sorted values for the confidence intervals (order statistics)
    list(ttft_ms ORDER BY ttft_ms) FILTER (WHERE success AND ttft_ms IS NOT NULL) AS s_ttft,
    avg(tpot_ms) FILTER (WHERE success) AS mean_tpot_ms,
    stddev_pop(tpot_ms) FILTER (WHERE success) AS std_tpot_ms,
    -- one sort per metric: the median is the linear-interpolated p50
    quantile_cont(tpot_ms, [0.5, 0.9, 0.95, 0.99]) FILTER (WHERE success) AS q_tpot,
    list(tpot_ms ORDER BY tpot_ms) FILTER (WHERE success AND tpot_ms IS NOT NULL) AS s_tpot,
    avg(e2el_ms) FILTER (WHERE success) AS mean_e2el_ms,
    stddev_pop(e2el_ms) FILTER (WHERE success) AS std_e2el_ms,
    -- one sort per metric: the median is the linear-interpolated p50
    quantile_cont(e2el_ms, [0.5, 0.9, 0.95, 0.99]) FILTER (WHERE success) AS q_e2el,
    list(e2el_ms ORDER BY e2el_ms) FILTER (WHERE success AND e2el_ms IS NOT NULL) AS s_e2el,
    quantile_cont(client_queue_ms, 0.99) AS client_queue_p99_ms,
    -- vLLM's client_queue_time_* and e2el_including_client_queue_*: successful requests only
    avg(client_queue_ms) FILTER (WHERE success) AS mean_client_queue_time_ms,
    stddev_pop(client_queue_ms) FILTER (WHERE success) AS std_client_queue_time_ms,
    quantile_cont(client_queue_ms, [0.5, 0.9, 0.95, 0.99]) FILTER (WHERE success) AS q_cq,
    avg(e2el_ms + client_queue_ms) FILTER (WHERE success) AS mean_e2el_including_client_queue_ms,
    stddev_pop(e2el_ms + client_queue_ms) FILTER (WHERE success) AS std_e2el_including_client_queue_ms,
    quantile_cont(e2el_ms + client_queue_ms, [0.5, 0.9, 0.95, 0.99]) FILTER (WHERE success) AS q_e2elq,
    max(client_queue_ms) AS client_queue_max_ms,
    count(*) FILTER (WHERE success AND length_mismatch) AS length_mismatches,
    count(*) FILTER (WHERE success AND prompt_tokens IS DISTINCT FROM input_len AND input_len IS NOT NULL)
        AS input_len_mismatches,
    count(*) FILTER (WHERE success AND output_tokens IS DISTINCT FROM output_len AND output_len IS NOT NULL)
        AS output_len_mismatches,
    first(error_type ORDER BY request_index) FILTER (WHERE NOT success) AS first_error_type,
    first(error ORDER BY request_index) FILTER (WHERE NOT success) AS first_error
    FROM per_request
    GROUP BY run_id, lane, point_id
),
itl AS (
    SELECT run_id, lane, point_id,
    avg(itl_ms) AS mean_itl_ms,
    stddev_pop(itl_ms) AS std_itl_ms,
    quantile_cont(itl_ms, [0.5, 0.9, 0.95, 0.99]) AS q_itl,
    list(itl_ms ORDER BY itl_ms) FILTER (WHERE itl_ms IS NOT NULL) AS s_itl,
    avg(itl_per_token_ms) AS mean_itl_per_token_ms,
    stddev_pop(itl_per_token_ms) AS std_itl_per_token_ms,
    quantile_cont(itl_per_token_ms, [0.5, 0.9, 0.95, 0.99]) AS q_itl_pt,
    count(*) AS itl_gaps,
    -- a gap of exactly zero: two chunks received in one network read
    count(*) FILTER (WHERE itl_ms = 0) AS zero_itl_gaps
    FROM request_itls
    GROUP BY run_id, lane, point_id
),
bursts AS (
    SELECT run_id, lane, point_id,
    count(*) AS network_reads,
    sum(tokens) / count(*) AS tokens_per_read,
    max(tokens) AS max_burst_tokens,
    count(*) FILTER (WHERE decode_tokens > 0) AS decode_reads,
    sum(decode_tokens) / NULLIF(count(*) FILTER (WHERE decode_tokens > 0), 0) AS decode_tokens_per_read,
    max(decode_tokens) FILTER (WHERE decode_tokens > 0) AS max_decode_burst_tokens
    FROM request_reads
    GROUP BY run_id, lane, point_id
),
-- 95% intervals from each metric's sorted values (ITL: the pooled gaps). Quantile p: the order statistics
-- x(l), x(u) with l = floor(n·p − 1.96·sqrt(n·p·(1−p))), u = ceil(n·p + 1.96·sqrt(n·p·(1−p))) + 1 (normal
-- approximation to the binomial count of values below the quantile; x(u) lies above it exactly when at most
-- u − 1 values do, hence the + 1); a rank outside 1..n leaves that side NULL. Mean: Student t, df n − 1.
samples AS (
    SELECT run_id, lane, point_id, 1 AS ord, 'TTFT' AS metric, s_ttft AS s FROM req
    UNION ALL SELECT run_id, lane, point_id, 2, 'TPOT', s_tpot FROM req
    UNION ALL SELECT run_id, lane, point_id, 3, 'ITL', s_itl FROM itl
    UNION ALL SELECT run_id, lane, point_id, 4, 'E2EL', s_e2el FROM req
),
ranks AS (
    SELECT run_id, lane, point_id, ord, metric, s, n,
           list_transform([0.5, 0.9, 0.95, 0.99]::DOUBLE[],
                          lambda p: CAST(floor(n * p - 1.96 * sqrt(n * p * (1 - p))) AS BIGINT)) AS lo_rank,
           list_transform([0.5, 0.9, 0.95, 0.99]::DOUBLE[],
                          lambda p: CAST(ceil(n * p + 1.96 * sqrt(n * p * (1 - p))) AS BIGINT) + 1) AS hi_rank
    FROM (SELECT *, coalesce(len(s), 0) AS n FROM samples)
),
bounds AS (
    SELECT run_id, lane, point_id, ord, metric, n, n - 1 AS df, list_stddev_samp(s) / sqrt(n) AS se,
           list_transform(lo_rank, lambda r: CASE WHEN r BETWEEN 1 AND n THEN s[r] END) AS lo,
           list_transform(hi_rank, lambda r: CASE WHEN r BETWEEN 1 AND n THEN s[r] END) AS hi,
           CASE WHEN n > 0 THEN nullif(concat_ws(', ',
               array_to_string(list_filter(list_transform(range(1, 5), lambda i:
                   CASE WHEN lo_rank[i] < 1 AND hi_rank[i] > n THEN ['p50', 'p90', 'p95', 'p99'][i] || ' low+high'
                        WHEN lo_rank[i] < 1 THEN ['p50', 'p90', 'p95', 'p99'][i] || ' low'
                        WHEN hi_rank[i] > n THEN ['p50', 'p90', 'p95', 'p99'][i] || ' high' END),
                   lambda x: x IS NOT NULL), ', '),
               CASE WHEN n < 2 THEN 'mean (needs n >= 2)' END), '') END AS gaps
    FROM ranks
),
sample_ci AS (
    SELECT b.run_id, b.lane, b.point_id,
        any_value(b.lo) FILTER (WHERE b.metric = 'TTFT') AS lo_ttft, any_value(b.hi) FILTER (WHERE b.metric = 'TTFT') AS hi_ttft,
        any_value(b.lo) FILTER (WHERE b.metric = 'TPOT') AS lo_tpot, any_value(b.hi) FILTER (WHERE b.metric = 'TPOT') AS hi_tpot,
        any_value(b.lo) FILTER (WHERE b.metric = 'ITL') AS lo_itl, any_value(b.hi) FILTER (WHERE b.metric = 'ITL') AS hi_itl,
        any_value(b.lo) FILTER (WHERE b.metric = 'E2EL') AS lo_e2el, any_value(b.hi) FILTER (WHERE b.metric = 'E2EL') AS hi_e2el,
        any_value(t.t * b.se) FILTER (WHERE b.metric = 'TTFT') AS half_mean_ttft,
        any_value(t.t * b.se) FILTER (WHERE b.metric = 'TPOT') AS half_mean_tpot,
        any_value(t.t * b.se) FILTER (WHERE b.metric = 'ITL') AS half_mean_itl,
        any_value(t.t * b.se) FILTER (WHERE b.metric = 'E2EL') AS half_mean_e2el,
        nullif(concat_ws('; ', list(printf('%s n=%d: %s', b.metric, b.n, b.gaps) ORDER BY b.ord)
                                   FILTER (WHERE b.gaps IS NOT NULL)), '') AS sample_gaps
    FROM bounds b ASOF LEFT JOIN t_crit_95 t ON b.df >= t.df
    GROUP BY b.run_id, b.lane, b.point_id
),
-- rates: Student t (df B − 1) on the batch rates of point_rate_batches, centred on the point's rate
rate_ci AS (
    SELECT b.*, t.t FROM (
        SELECT run_id, lane, point_id, any_value(batches) AS batches, any_value(batches) - 1 AS df,
               -- identical rates in every batch (few whole requests per batch) give no spread to estimate
               -- from: no interval (NULL, said in ci_note), never a zero-width one
               NULLIF(stddev_samp(request_rate), 0) / sqrt(count(*)) AS se_request,
               NULLIF(stddev_samp(output_rate), 0) / sqrt(count(*)) AS se_output,
               NULLIF(stddev_samp(total_token_rate), 0) / sqrt(count(*)) AS se_total,
               NULLIF(stddev_samp(good_rate), 0) / sqrt(count(*)) AS se_good
        FROM point_rate_batches GROUP BY run_id, lane, point_id) b
    ASOF LEFT JOIN t_crit_95 t ON b.df >= t.df
),
itl_named AS (
    SELECT run_id, lane, point_id, mean_itl_ms, q_itl[1] AS median_itl_ms, std_itl_ms,
        q_itl[1] AS p50_itl_ms, q_itl[2] AS p90_itl_ms, q_itl[3] AS p95_itl_ms, q_itl[4] AS p99_itl_ms,
        mean_itl_per_token_ms, q_itl_pt[1] AS median_itl_per_token_ms, std_itl_per_token_ms,
        q_itl_pt[1] AS p50_itl_per_token_ms, q_itl_pt[2] AS p90_itl_per_token_ms,
        q_itl_pt[3] AS p95_itl_per_token_ms, q_itl_pt[4] AS p99_itl_per_token_ms,
        itl_gaps, zero_itl_gaps, zero_itl_gaps / NULLIF(itl_gaps, 0) AS zero_itl_gap_fraction
    FROM itl
),
joined AS (
    SELECT
        s.run_id, s.lane, s.point_id, s.model, s.server_config, s.server_kind, s.backend, s.endpoint, s.mode,
        s.input_len, s.output_len, s.max_concurrency, s.request_rate, s.burstiness, s.num_prompts,
        s.window_start, s.window_end, s.grid_json, s.slo_json, s.client_lag_bound_ms,
        coalesce(s.rate_tolerance, 0.1) AS rate_tolerance,
        coalesce(s.burst_bound, 2.0) AS burst_bound,
        r.* EXCLUDE (run_id, lane, point_id, q_ttft, q_tpot, q_e2el, q_cq, q_e2elq, s_ttft, s_tpot, s_e2el),
        r.q_cq[1] AS median_client_queue_time_ms, r.q_cq[1] AS p50_client_queue_time_ms,
        r.q_cq[2] AS p90_client_queue_time_ms, r.q_cq[3] AS p95_client_queue_time_ms,
        r.q_cq[4] AS p99_client_queue_time_ms,
        r.q_e2elq[1] AS median_e2el_including_client_queue_ms, r.q_e2elq[1] AS p50_e2el_including_client_queue_ms,
        r.q_e2elq[2] AS p90_e2el_including_client_queue_ms, r.q_e2elq[3] AS p95_e2el_including_client_queue_ms,
        r.q_e2elq[4] AS p99_e2el_including_client_queue_ms,
        r.q_ttft[1] AS median_ttft_ms, r.q_ttft[1] AS p50_ttft_ms, r.q_ttft[2] AS p90_ttft_ms,
        r.q_ttft[3] AS p95_ttft_ms, r.q_ttft[4] AS p99_ttft_ms,
        r.q_tpot[1] AS median_tpot_ms, r.q_tpot[1] AS p50_tpot_ms, r.q_tpot[2] AS p90_tpot_ms,
        r.q_tpot[3] AS p95_tpot_ms, r.q_tpot[4] AS p99_tpot_ms,
        r.q_e2el[1] AS median_e2el_ms, r.q_e2el[1] AS p50_e2el_ms, r.q_e2el[2] AS p90_e2el_ms,
        r.q_e2el[3] AS p95_e2el_ms, r.q_e2el[4] AS p99_e2el_ms,
        i.* EXCLUDE (run_id, lane, point_id),
        b.* EXCLUDE (run_id, lane, point_id),
        c.* EXCLUDE (run_id, lane, point_id),
        rc.batches AS rate_batches, rc.t AS rate_t,
        rc.se_request, rc.se_output, rc.se_total, rc.se_good,
        coalesce(pk.max_output_tokens_per_s, 0.0) AS max_output_tokens_per_s,
        coalesce(pk.max_concurrent_requests, 0) AS max_concurrent_requests,
        -- duration: first dispatch after warm-up -> last completion
        (r.last_done_ns - r.first_sent_ns) / 1e9 AS duration
    FROM sweep_points s
    JOIN req r USING (run_id, lane, point_id)
    LEFT JOIN itl_named i USING (run_id, lane, point_id)
    LEFT JOIN bursts b USING (run_id, lane, point_id)
    LEFT JOIN point_peaks pk USING (run_id, lane, point_id)
    LEFT JOIN sample_ci c USING (run_id, lane, point_id)
    LEFT JOIN rate_ci rc USING (run_id, lane, point_id)
)
SELECT
    j.* EXCLUDE (rate_tolerance, lo_ttft, hi_ttft, lo_tpot, hi_tpot, lo_itl, hi_itl, lo_e2el, hi_e2el,
                 half_mean_ttft, half_mean_tpot, half_mean_itl, half_mean_e2el, sample_gaps,
                 rate_batches, rate_t, se_request, se_output, se_total, se_good),
    completed / NULLIF(duration, 0) AS request_throughput,
    total_output_tokens / NULLIF(duration, 0) AS output_throughput,
    (coalesce(total_input_tokens, 0) + coalesce(total_output_tokens, 0)) / NULLIF(duration, 0)
        AS total_token_throughput,
    CASE WHEN slo_json IS NOT NULL THEN good_completed / NULLIF(duration, 0) END AS request_goodput,
    CASE WHEN slo_json IS NOT NULL THEN good_completed / NULLIF(duration, 0) END AS goodput,
    -- validity: offered (declared) vs scheduled (the precomputed schedule) vs achieved (actual dispatch)
    request_rate AS offered_rate,
    CASE WHEN sent > 1 THEN (sent - 1) / NULLIF((last_scheduled_ns - first_scheduled_ns) / 1e9, 0) END
        AS scheduled_rate,
    CASE WHEN sent > 1 THEN (sent - 1) / NULLIF((last_sent_ns - first_sent_ns) / 1e9, 0) END AS achieved_rate,
    client_lag_bound_ms IS NULL OR client_queue_p99_ms <= client_lag_bound_ms AS client_lag_ok,
    request_rate IS NULL OR sent <= 1
        OR (sent - 1) / NULLIF((last_sent_ns - first_sent_ns) / 1e9, 0)
           >= (1 - rate_tolerance) * (sent - 1) / NULLIF((last_scheduled_ns - first_scheduled_ns) / 1e9, 0)
        AS rate_ok,
    length_mismatches = 0 AS lengths_ok,
    -- coalesced: decode tokens arrived in bursts beyond the bound, so TPOT and ITL measure how the stream was
    -- delivered (server flush, client reads), not how fast the server decoded; NULL when nothing was decoded
    decode_tokens_per_read > burst_bound AS coalesced,
    CASE WHEN decode_tokens_per_read > burst_bound THEN 'delivery rate'
         WHEN decode_tokens_per_read IS NOT NULL THEN 'decode speed' END AS tpot_itl_meaning,
    CASE WHEN decode_tokens_per_read > burst_bound
         THEN printf('stream coalesced: %.1f decode tokens per network read (bound %.1f), %d of %d ITL gaps zero, '
                     'largest burst %d tokens: TPOT/ITL are delivery rate, not decode speed',
                     decode_tokens_per_read, burst_bound, zero_itl_gaps, itl_gaps, max_decode_burst_tokens) END
        AS burst_note,
    (client_lag_bound_ms IS NULL OR client_queue_p99_ms <= client_lag_bound_ms)
    AND (request_rate IS NULL OR sent <= 1
        OR (sent - 1) / NULLIF((last_sent_ns - first_sent_ns) / 1e9, 0)
           >= (1 - rate_tolerance) * (sent - 1) / NULLIF((last_scheduled_ns - first_scheduled_ns) / 1e9, 0))
    AND length_mismatches = 0 AND completed > 0 AS valid,
    NULLIF(concat_ws('; ',
        CASE WHEN completed = 0 THEN printf('no request succeeded (%d failed; first: %s)', failed,
                                            coalesce(first_error_type, '?')) END,
        CASE WHEN NOT (client_lag_bound_ms IS NULL OR client_queue_p99_ms <= client_lag_bound_ms)
             THEN printf('client queue p99 %.3f ms exceeds the bound %.3f ms', client_queue_p99_ms,
                         client_lag_bound_ms) END,
        CASE WHEN length_mismatches > 0
             THEN printf('%d successful requests missed the requested lengths (input %d, output %d)',
                         length_mismatches, input_len_mismatches, output_len_mismatches) END,
        CASE WHEN NOT (request_rate IS NULL OR sent <= 1
             OR (sent - 1) / NULLIF((last_sent_ns - first_sent_ns) / 1e9, 0)
                >= (1 - rate_tolerance) * (sent - 1) / NULLIF((last_scheduled_ns - first_scheduled_ns) / 1e9, 0))
             THEN 'achieved dispatch rate fell short of the schedule' END), '') AS invalid_reason,
    -- 95% confidence intervals (docs/metrics.md "Confidence intervals"); NULL where not defined for this n
    lo_ttft[1] AS p50_ttft_ms_ci_low, hi_ttft[1] AS p50_ttft_ms_ci_high,
    lo_ttft[2] AS p90_ttft_ms_ci_low, hi_ttft[2] AS p90_ttft_ms_ci_high,
    lo_ttft[3] AS p95_ttft_ms_ci_low, hi_ttft[3] AS p95_ttft_ms_ci_high,
    lo_ttft[4] AS p99_ttft_ms_ci_low, hi_ttft[4] AS p99_ttft_ms_ci_high,
    lo_tpot[1] AS p50_tpot_ms_ci_low, hi_tpot[1] AS p50_tpot_ms_ci_high,
    lo_tpot[2] AS p90_tpot_ms_ci_low, hi_tpot[2] AS p90_tpot_ms_ci_high,
    lo_tpot[3] AS p95_tpot_ms_ci_low, hi_tpot[3] AS p95_tpot_ms_ci_high,
    lo_tpot[4] AS p99_tpot_ms_ci_low, hi_tpot[4] AS p99_tpot_ms_ci_high,
    lo_itl[1] AS p50_itl_ms_ci_low, hi_itl[1] AS p50_itl_ms_ci_high,
    lo_itl[2] AS p90_itl_ms_ci_low, hi_itl[2] AS p90_itl_ms_ci_high,
    lo_itl[3] AS p95_itl_ms_ci_low, hi_itl[3] AS p95_itl_ms_ci_high,
    lo_itl[4] AS p99_itl_ms_ci_low, hi_itl[4] AS p99_itl_ms_ci_high,
    lo_e2el[1] AS p50_e2el_ms_ci_low, hi_e2el[1] AS p50_e2el_ms_ci_high,
    lo_e2el[2] AS p90_e2el_ms_ci_low, hi_e2el[2] AS p90_e2el_ms_ci_high,
    lo_e2el[3] AS p95_e2el_ms_ci_low, hi_e2el[3] AS p95_e2el_ms_ci_high,
    lo_e2el[4] AS p99_e2el_ms_ci_low, hi_e2el[4] AS p99_e2el_ms_ci_high,
    mean_ttft_ms - half_mean_ttft AS mean_ttft_ms_ci_low, mean_ttft_ms + half_mean_ttft AS mean_ttft_ms_ci_high,
    mean_tpot_ms - half_mean_tpot AS mean_tpot_ms_ci_low, mean_tpot_ms + half_mean_tpot AS mean_tpot_ms_ci_high,
    mean_itl_ms - half_mean_itl AS mean_itl_ms_ci_low, mean_itl_ms + half_mean_itl AS mean_itl_ms_ci_high,
    mean_e2el_ms - half_mean_e2el AS mean_e2el_ms_ci_low, mean_e2el_ms + half_mean_e2el AS mean_e2el_ms_ci_high,
    -- rates: batch means (point_rate_batches); a rate is never negative, so the low side stops at 0
    -- (0.0 * se: greatest() skips NULLs, and a missing interval must stay NULL, not 0)
    greatest(completed / NULLIF(duration, 0) - rate_t * se_request, 0.0 * se_request) AS request_throughput_ci_low,
    completed / NULLIF(duration, 0) + rate_t * se_request AS request_throughput_ci_high,
    greatest(total_output_tokens / NULLIF(duration, 0) - rate_t * se_output, 0.0 * se_output) AS output_throughput_ci_low,
    total_output_tokens / NULLIF(duration, 0) + rate_t * se_output AS output_throughput_ci_high,
    greatest((coalesce(total_input_tokens, 0) + coalesce(total_output_tokens, 0)) / NULLIF(duration, 0)
             - rate_t * se_total, 0.0 * se_total) AS total_token_throughput_ci_low,
    (coalesce(total_input_tokens, 0) + coalesce(total_output_tokens, 0)) / NULLIF(duration, 0) + rate_t * se_total
        AS total_token_throughput_ci_high,
    CASE WHEN slo_json IS NOT NULL
         THEN greatest(good_completed / NULLIF(duration, 0) - rate_t * se_good, 0.0 * se_good) END AS goodput_ci_low,
    CASE WHEN slo_json IS NOT NULL THEN good_completed / NULLIF(duration, 0) + rate_t * se_good END
        AS goodput_ci_high,
    NULLIF(concat_ws('; ', sample_gaps,
        CASE WHEN rate_batches IS NULL
             THEN CASE WHEN completed < 6 THEN printf('rates: %d completed, batch means need >= 6', completed)
                       ELSE 'rates: zero-length span' END
             WHEN se_request IS NULL OR se_output IS NULL OR se_total IS NULL
                  OR (slo_json IS NOT NULL AND se_good IS NULL)
             THEN 'rates: ' || concat_ws(', ', CASE WHEN se_request IS NULL THEN 'request' END,
                                         CASE WHEN se_output IS NULL THEN 'output' END,
                                         CASE WHEN se_total IS NULL THEN 'total token' END,
                                         CASE WHEN slo_json IS NOT NULL AND se_good IS NULL THEN 'goodput' END)
                  || printf(' rate identical in all %d batches: no spread, no interval', rate_batches) END), '')
        AS ci_note
FROM joined j;

CREATE OR REPLACE VIEW sustained_window_metrics AS
WITH bounds AS (
    SELECT run_id, lane, point_id, min(t_sent_ns) AS t0_ns, max(t_done_ns) AS t_end_ns
    FROM requests WHERE NOT warmup GROUP BY run_id, lane, point_id
),
pts AS (
    SELECT s.run_id, s.lane, s.point_id, s.model, s.server_config, s.window_s,
           coalesce(s.warmup_windows, 0) AS warmup_windows, s.window_start AS start_wall, b.t0_ns,
           -- only full windows inside the run (the drain after the duration is not a window)
           CAST(floor(coalesce(s.duration_limit_s, (b.t_end_ns - b.t0_ns) / 1e9) / s.window_s) AS BIGINT)
               AS n_windows
    FROM sweep_points s JOIN bounds b USING (run_id, lane, point_id)
    WHERE s.mode = 'sustained' AND s.window_s > 0
),
windows AS (
    SELECT p.*, unnest(range(0, p.n_windows)) AS "window" FROM pts p
),
chunks AS (
    SELECT r.run_id, r.lane, r.point_id, r.t_sent_ns,
           unnest(r.chunk_times_s) AS t_rel_s, unnest(r.chunk_tokens) AS tokens
    FROM requests r SEMI JOIN pts p ON r.run_id = p.run_id AND r.lane = p.lane AND r.point_id = p.point_id
    WHERE NOT r.warmup AND r.success
),
chunk_windows AS (
    SELECT c.run_id, c.lane, c.point_id,
           CAST(floor((c.t_sent_ns + c.t_rel_s * 1e9 - p.t0_ns) / (p.window_s * 1e9)) AS BIGINT) AS "window",
           sum(c.tokens) AS output_tokens
    FROM chunks c JOIN pts p USING (run_id, lane, point_id)
    GROUP BY ALL
),
req_windows AS (
    SELECT r.run_id, r.lane, r.point_id,
           CAST(floor((r.t_sent_ns - p.t0_ns) / (p.window_s * 1e9)) AS BIGINT) AS "window",
           quantile_cont(r.ttft_s * 1000.0, 0.99) FILTER (WHERE r.success) AS p99_ttft_ms
    FROM requests r JOIN pts p USING (run_id, lane, point_id)
    WHERE NOT r.warmup
    GROUP BY ALL
),
done_windows AS (
    SELECT r.run_id, r.lane, r.point_id,
           CAST(floor((r.t_done_ns - p.t0_ns) / (p.window_s * 1e9)) AS BIGINT) AS "window",
           count(*) FILTER (WHERE r.success) AS completed,
           count(*) FILTER (WHERE NOT r.success) AS failed
    FROM requests r JOIN pts p USING (run_id, lane, point_id)
    WHERE NOT r.warmup
    GROUP BY ALL
)
SELECT
    w.run_id, w.lane, w.point_id, w.model, w.server_config,
    CAST(w."window" AS INTEGER) AS "window", w.window_s,
    w.start_wall + to_microseconds(CAST(round(w."window" * w.window_s * 1e6) AS BIGINT)) AS window_start,
    coalesce(c.output_tokens, 0) AS output_tokens,
    coalesce(c.output_tokens, 0) / w.window_s AS output_throughput,
    CAST(coalesce(d.completed, 0) AS INTEGER) AS completed,
    CAST(coalesce(d.failed, 0) AS INTEGER) AS failed,
    q.p99_ttft_ms,
    w."window" < w.warmup_windows AS warmup,
    (w."window" + 0.5) * w.window_s / 60.0 AS t_mid_min
FROM windows w
LEFT JOIN chunk_windows c USING (run_id, lane, point_id, "window")
LEFT JOIN req_windows q USING (run_id, lane, point_id, "window")
LEFT JOIN done_windows d USING (run_id, lane, point_id, "window");

CREATE OR REPLACE VIEW sustained_summary AS
WITH measured AS (
    SELECT w.*, coalesce(s.retention_k, 3) AS k,
           row_number() OVER (PARTITION BY w.run_id, w.lane, w.point_id ORDER BY w."window") AS pos,
           count(*) OVER (PARTITION BY w.run_id, w.lane, w.point_id) AS n
    FROM sustained_window_metrics w
    JOIN sweep_points s USING (run_id, lane, point_id)
    WHERE NOT w.warmup
),
first_k AS (
    SELECT run_id, lane, point_id, median(output_throughput) AS first_k_throughput,
           avg(output_throughput) AS first_mean, stddev_samp(output_throughput) AS first_sd
    FROM measured WHERE pos <= k GROUP BY ALL
),
last_k AS (
    SELECT run_id, lane, point_id, median(output_throughput) AS last_k_throughput,
           avg(output_throughput) AS last_mean, stddev_samp(output_throughput) AS last_sd
    FROM measured WHERE pos > n - k GROUP BY ALL
),
runs_k AS (  -- every K consecutive measured windows, by its first window
    SELECT a.run_id, a.lane, a.point_id, a.pos AS start_pos, median(b.output_throughput) AS med, count(*) AS cnt,
           any_value(a.k) AS k, avg(b.output_throughput) AS mean_k, stddev_samp(b.output_throughput) AS sd_k
    FROM measured a JOIN measured b
      ON a.run_id = b.run_id AND a.lane = b.lane AND a.point_id = b.point_id
     AND b.pos BETWEEN a.pos AND a.pos + a.k - 1
    GROUP BY a.run_id, a.lane, a.point_id, a.pos
),
peak_k AS (  -- the best K (the earliest among equals)
    SELECT run_id, lane, point_id, med AS peak_k_throughput, mean_k AS peak_mean, sd_k AS peak_sd
    FROM runs_k WHERE cnt = k
    QUALIFY row_number() OVER (PARTITION BY run_id, lane, point_id ORDER BY med DESC, start_pos) = 1
),
fit AS (
    SELECT run_id, lane, point_id,
           count(*) AS windows, any_value(k) AS retention_k,
           regr_slope(output_throughput, t_mid_min) AS throughput_slope_per_min,
           regr_sxx(output_throughput, t_mid_min) AS sxx_tp,
           regr_syy(output_throughput, t_mid_min) AS syy_tp,
           regr_sxy(output_throughput, t_mid_min) AS sxy_tp,
           regr_count(output_throughput, t_mid_min) AS n_tp,
           regr_slope(p99_ttft_ms, t_mid_min) AS p99_ttft_slope_ms_per_min,
           regr_sxx(p99_ttft_ms, t_mid_min) AS sxx_tt,
           regr_syy(p99_ttft_ms, t_mid_min) AS syy_tt,
           regr_sxy(p99_ttft_ms, t_mid_min) AS sxy_tt,
           regr_count(p99_ttft_ms, t_mid_min) AS n_tt
    FROM measured GROUP BY ALL
),
fit_se AS (
    SELECT f.*,
        CASE WHEN n_tp > 2 AND sxx_tp > 0
             THEN sqrt(greatest(syy_tp - throughput_slope_per_min * sxy_tp, 0) / (n_tp - 2) / sxx_tp) END AS se_tp,
        CASE WHEN n_tt > 2 AND sxx_tt > 0
             THEN sqrt(greatest(syy_tt - p99_ttft_slope_ms_per_min * sxy_tt, 0) / (n_tt - 2) / sxx_tt) END AS se_tt,
        (SELECT t FROM t_crit_95 WHERE df <= CAST(f.n_tp AS BIGINT) - 2 ORDER BY df DESC LIMIT 1) AS t_tp,
        (SELECT t FROM t_crit_95 WHERE df <= CAST(f.n_tt AS BIGINT) - 2 ORDER BY df DESC LIMIT 1) AS t_tt
    FROM fit f
),
-- retention intervals: log(retention) ± t·SE, SE² = s_a²/(K·mean_a²) + s_b²/(K·mean_b²) (delta method on the
-- means of the K windows of each group), t at the Welch–Satterthwaite df rounded down (next smaller table row)
ret AS (
    SELECT f.run_id, f.lane, f.point_id, f.windows, f.retention_k,
        -- the first and last K must not overlap, else retention is not defined
        CASE WHEN f.windows >= 2 * f.retention_k THEN lk.last_k_throughput / NULLIF(fk.first_k_throughput, 0) END
            AS retention_vs_first,
        CASE WHEN f.windows >= 2 * f.retention_k THEN lk.last_k_throughput / NULLIF(pk.peak_k_throughput, 0) END
            AS retention_vs_peak,
        pow(lk.last_sd, 2) / (f.retention_k * pow(lk.last_mean, 2)) AS v_last,
        pow(fk.first_sd, 2) / (f.retention_k * pow(fk.first_mean, 2)) AS v_first,
        pow(pk.peak_sd, 2) / (f.retention_k * pow(pk.peak_mean, 2)) AS v_peak
    FROM fit f
    LEFT JOIN first_k fk USING (run_id, lane, point_id)
    LEFT JOIN last_k lk USING (run_id, lane, point_id)
    LEFT JOIN peak_k pk USING (run_id, lane, point_id)
),
ret_df AS (
    SELECT run_id, lane, point_id, retention_vs_first, retention_vs_peak,
        sqrt(v_last + v_first) AS se_first, sqrt(v_last + v_peak) AS se_peak,
        -- Welch–Satterthwaite (equal group sizes K); zero spread in both groups: df K − 1 (the width is 0 anyway)
        CAST(floor(coalesce(pow(v_last + v_first, 2) / NULLIF((pow(v_last, 2) + pow(v_first, 2)) / (retention_k - 1), 0),
                            retention_k - 1)) AS BIGINT) AS df_first,
        CAST(floor(coalesce(pow(v_last + v_peak, 2) / NULLIF((pow(v_last, 2) + pow(v_peak, 2)) / (retention_k - 1), 0),
                            retention_k - 1)) AS BIGINT) AS df_peak
    FROM ret WHERE retention_k >= 2
),
ret_ci AS (
    SELECT d.run_id, d.lane, d.point_id,
        CASE WHEN d.retention_vs_first > 0 THEN exp(ln(d.retention_vs_first) - tf.t * d.se_first) END
            AS retention_vs_first_ci_low,
        CASE WHEN d.retention_vs_first > 0 THEN exp(ln(d.retention_vs_first) + tf.t * d.se_first) END
            AS retention_vs_first_ci_high,
        CASE WHEN d.retention_vs_peak > 0 THEN exp(ln(d.retention_vs_peak) - tp.t * d.se_peak) END
            AS retention_vs_peak_ci_low,
        CASE WHEN d.retention_vs_peak > 0 THEN exp(ln(d.retention_vs_peak) + tp.t * d.se_peak) END
            AS retention_vs_peak_ci_high
    FROM ret_df d
    ASOF LEFT JOIN t_crit_95 tf ON d.df_first >= tf.df
    ASOF LEFT JOIN t_crit_95 tp ON d.df_peak >= tp.df
)
SELECT
    f.run_id, f.lane, f.point_id, f.windows, f.retention_k,
    fk.first_k_throughput, lk.last_k_throughput, pk.peak_k_throughput,
    r.retention_vs_first, r.retention_vs_peak,
    f.throughput_slope_per_min,
    f.throughput_slope_per_min - f.t_tp * f.se_tp AS throughput_slope_ci_low,
    f.throughput_slope_per_min + f.t_tp * f.se_tp AS throughput_slope_ci_high,
    f.p99_ttft_slope_ms_per_min,
    f.p99_ttft_slope_ms_per_min - f.t_tt * f.se_tt AS p99_ttft_slope_ci_low,
    f.p99_ttft_slope_ms_per_min + f.t_tt * f.se_tt AS p99_ttft_slope_ci_high,
    rc.retention_vs_first_ci_low, rc.retention_vs_first_ci_high,
    rc.retention_vs_peak_ci_low, rc.retention_vs_peak_ci_high
FROM fit_se f
LEFT JOIN first_k fk USING (run_id, lane, point_id)
LEFT JOIN last_k lk USING (run_id, lane, point_id)
LEFT JOIN peak_k pk USING (run_id, lane, point_id)
LEFT JOIN ret r USING (run_id, lane, point_id)
LEFT JOIN ret_ci rc USING (run_id, lane, point_id);
