-- docs/reference/metrics.md, "Serving" as SQL, the single implementation (the serving family, 3 of 4: per sweep point).
-- Owned by the load generator (agents/loadgen). CREATE OR REPLACE VIEW statements only.
-- Reads 10_serving_requests.sql's and 11_serving_intervals.sql's views and the tables requests and sweep_points;
-- the load order is analytics.views.VIEW_FILES.
--
-- point_peaks              vLLM's per-second peaks: max_output_tokens_per_s, max_concurrent_requests
-- serving_points           one row per sweep point: vLLM-named aggregates, throughput, goodput, validity,
--                          and a 95% confidence interval on each (docs/reference/metrics.md "Confidence intervals")

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
        s.window_start, s.window_end, s.grid_json, s.slo_json, s.client_lag_bound_ms, s.repeat_index,
        s.server_config_fingerprint, s.workload,
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
    -- 95% confidence intervals (docs/reference/metrics.md "Confidence intervals"); NULL where not defined for this n
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
