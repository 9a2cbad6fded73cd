-- The rag lane: retrieval quality beside per-stage latency (docs/reference/metrics.md "RAG"). CREATE OR REPLACE
-- statements only. Views defined here:
--   report_rag_ingest       one row per ingest: chunks, the chunking stated, seconds, chunks/s = chunks / seconds.
--   report_rag_index        one row per index built: store, index type, its parameters, vectors, dim, build s.
--   report_rag_quality      per (run, lane, store, embedder, reranker, arm): probes, hits@k (probes whose expected
--                           fact is within the first k) with its Wilson 95 % interval, and MRR = mean over the probes
--                           of 1 / rank (0 where the fact was not retrieved among the candidates; NULL where a
--                           hit's rank was not recorded).
--   rag_reranker_tests      per (run, lane, store, embedder, reranker): the paired 2x2 table of hit@k without (A,
--                           cosine) and with (B, reranked) the reranker on the same probes, hits@k B - A with
--                           Newcombe's paired hybrid-score interval (method 10) and the exact McNemar p — the
--                           accuracy lane's paired test (43_report_accuracy.sql), on probes instead of documents;
--                           the verdict (Holm over the runs' tests, then better / worse / within noise) is
--                           analytics/report/accuracy.py's rule, applied in analytics/report/rag.py.
--   report_rag_stages       per (run, lane, store, embedder, reranker, generator, concurrency, stage): n, mean and
--                           p50 / p90 / p95 / p99 in ms (linear-interpolated) with their 95 % order-statistic intervals (the
--                           serving points' ranks: l = floor(n·p − 1.96·sqrt(n·p·(1−p))), u = ceil(n·p +
--                           1.96·sqrt(n·p·(1−p))) + 1, a rank outside 1..n leaves that side NULL).
--   report_rag_load         per load level (concurrency) of whole queries (rows of stage end_to_end): queries ok and
--                           failed, throughput = ok queries / the level's wall seconds, the end to end at the SLO's
--                           percentile and its upper bound, and whether it meets the SLO (slo_met: the percentile
--                           within the bound, no query failed).
--   report_rag_decision     per (run, lane, instance, store, embedder, reranker, generator): the highest concurrency
--                           meeting the SLO, its throughput, and $ per thousand queries there = usd_per_hour /
--                           (throughput x 3600) x 1000, priced as the Decision prices a lane (an AWS lane's instance
--                           type, a local run's lane_runs.priced_as; no price: NULL with the reason).
--   report_rag_coresidency  the rag_coresidency rows: placement, outcome, the runtime's verbatim error.
-- Only each lane's effective attempt is in the tables (analytics.views.register_tables).
CREATE OR REPLACE VIEW report_rag_ingest AS
SELECT run_id, lane, store, embedder, backend, corpus, documents, chunks, chunking, embed_s, store_s, seconds,
       chunks / NULLIF(seconds, 0) AS chunks_per_s, batch_size, ts
FROM rag_ingest;

CREATE OR REPLACE VIEW report_rag_index AS
SELECT run_id, lane, store, embedder, backend, index_type, index_params, store_version, vectors, dim, build_s, ts
FROM rag_index;

CREATE OR REPLACE VIEW report_rag_quality AS
WITH s AS (
    SELECT run_id, lane, store, embedder, any_value(backend) AS backend,
           CASE WHEN arm = 'reranked' THEN reranker END AS reranker, arm, any_value(k) AS k,
           count(*) AS probes, count(*) FILTER (WHERE hit) AS hits,
           CASE WHEN count(*) FILTER (WHERE hit AND rank IS NULL) = 0
                THEN avg(CASE WHEN rank IS NULL THEN 0.0 ELSE 1.0 / rank END) END AS mrr
    FROM rag_probes GROUP BY ALL
)
SELECT s.*, hits / probes AS hit_rate,
       greatest(0.0, (hits + 1.959963984540054 ^ 2 / 2) / (probes + 1.959963984540054 ^ 2)
           - 1.959963984540054 * sqrt(hits * (probes - hits) / probes + 1.959963984540054 ^ 2 / 4)
             / (probes + 1.959963984540054 ^ 2)) AS hit_rate_ci_low,
       least(1.0, (hits + 1.959963984540054 ^ 2 / 2) / (probes + 1.959963984540054 ^ 2)
           + 1.959963984540054 * sqrt(hits * (probes - hits) / probes + 1.959963984540054 ^ 2 / 4)
             / (probes + 1.959963984540054 ^ 2)) AS hit_rate_ci_high
FROM s;

CREATE OR REPLACE VIEW rag_reranker_tests AS
WITH pairs AS (
    SELECT a.run_id, a.lane, a.store, a.embedder, b.reranker, a.k, a.probe_id, a.hit AS hit_a, b.hit AS hit_b,
           a.rank AS rank_a, b.rank AS rank_b
    FROM rag_probes a
    JOIN rag_probes b ON b.run_id = a.run_id AND b.lane = a.lane AND b.store = a.store
                     AND b.embedder IS NOT DISTINCT FROM a.embedder AND b.probe_id = a.probe_id
                     AND b.arm = 'reranked'
    WHERE a.arm = 'cosine'
),
t AS (
    SELECT run_id, lane, store, embedder, reranker, any_value(k) AS k, count(*) AS n,
           count(*) FILTER (WHERE hit_a AND hit_b) AS n11, count(*) FILTER (WHERE hit_a AND NOT hit_b) AS b,
           count(*) FILTER (WHERE NOT hit_a AND hit_b) AS c, count(*) FILTER (WHERE NOT hit_a AND NOT hit_b) AS n00,
           CASE WHEN count(*) FILTER (WHERE hit_a AND rank_a IS NULL) = 0
                THEN avg(CASE WHEN rank_a IS NULL THEN 0.0 ELSE 1.0 / rank_a END) END AS mrr_a,
           CASE WHEN count(*) FILTER (WHERE hit_b AND rank_b IS NULL) = 0
                THEN avg(CASE WHEN rank_b IS NULL THEN 0.0 ELSE 1.0 / rank_b END) END AS mrr_b
    FROM pairs GROUP BY ALL
),
p AS (  -- the paired accuracies and each side's Wilson bounds, as 43_report_accuracy.sql computes them
    SELECT t.*, (n11 + b) / n AS acc_a, (n11 + c) / n AS acc_b,
           ((n11 + b) + 1.959963984540054 ^ 2 / 2) / (n + 1.959963984540054 ^ 2) AS ca,
           1.959963984540054 * sqrt((n11 + b) * (c + n00) / n + 1.959963984540054 ^ 2 / 4)
               / (n + 1.959963984540054 ^ 2) AS ha,
           ((n11 + c) + 1.959963984540054 ^ 2 / 2) / (n + 1.959963984540054 ^ 2) AS cb,
           1.959963984540054 * sqrt((n11 + c) * (b + n00) / n + 1.959963984540054 ^ 2 / 4)
               / (n + 1.959963984540054 ^ 2) AS hb,
           CASE WHEN CAST(n11 + b AS DOUBLE) * (c + n00) * (n11 + c) * (b + n00) = 0 THEN 0.0
                WHEN n11 * n00 - b * c > n / 2
                THEN (n11 * n00 - b * c - n / 2) / sqrt(CAST(n11 + b AS DOUBLE) * (c + n00) * (n11 + c) * (b + n00))
                WHEN n11 * n00 - b * c >= 0 THEN 0.0
                ELSE (n11 * n00 - b * c) / sqrt(CAST(n11 + b AS DOUBLE) * (c + n00) * (n11 + c) * (b + n00))
           END AS phi
    FROM t WHERE n > 0
),
q AS (
    SELECT p.*, greatest(0.0, ca - ha) AS la, least(1.0, ca + ha) AS ua, greatest(0.0, cb - hb) AS lb,
           least(1.0, cb + hb) AS ub
    FROM p
)
SELECT run_id, lane, store, embedder, reranker, k, n, n11, b, c, n00,
       acc_a AS hit_rate_a, acc_b AS hit_rate_b, mrr_a, mrr_b,
       acc_b - acc_a AS delta,
       acc_b - acc_a - sqrt(greatest(0.0, (acc_b - lb) ^ 2 - 2 * phi * (acc_b - lb) * (ua - acc_a)
                                           + (ua - acc_a) ^ 2)) AS delta_ci_low,
       acc_b - acc_a + sqrt(greatest(0.0, (ub - acc_b) ^ 2 - 2 * phi * (ub - acc_b) * (acc_a - la)
                                           + (acc_a - la) ^ 2)) AS delta_ci_high,
       CASE WHEN b + c = 0 THEN 1.0
            ELSE least(1.0, 2 * list_sum(list_transform(range(0, least(b, c) + 1), lambda k:
                     exp(lgamma(b + c + 1) - lgamma(k + 1) - lgamma(b + c - k + 1) - (b + c) * ln(2)))))
       END AS mcnemar_p
FROM q;

CREATE OR REPLACE VIEW report_rag_stages AS
WITH r AS (
    SELECT run_id, lane, store, embedder, reranker, generator, concurrency, stage, 1000.0 * latency_s AS ms
    FROM rag_requests WHERE ok AND latency_s IS NOT NULL
),
q AS (
    SELECT run_id, lane, store, embedder, reranker, generator, concurrency, stage, count(*) AS n, avg(ms) AS mean_ms,
           quantile_cont(ms, [0.5, 0.9, 0.95, 0.99]) AS q, list(ms ORDER BY ms) AS s
    FROM r GROUP BY ALL
),
ranks AS (
    SELECT *,
           list_transform([0.5, 0.9, 0.95, 0.99]::DOUBLE[],
                          lambda p: CAST(floor(n * p - 1.96 * sqrt(n * p * (1 - p))) AS BIGINT)) AS lo,
           list_transform([0.5, 0.9, 0.95, 0.99]::DOUBLE[],
                          lambda p: CAST(ceil(n * p + 1.96 * sqrt(n * p * (1 - p))) AS BIGINT) + 1) AS hi
    FROM q
)
SELECT run_id, lane, store, embedder, reranker, generator, concurrency, stage, n, mean_ms,
       q[1] AS p50_ms, q[2] AS p90_ms, q[3] AS p95_ms, q[4] AS p99_ms,
       CASE WHEN lo[1] BETWEEN 1 AND n THEN s[lo[1]] END AS p50_ms_ci_low,
       CASE WHEN hi[1] BETWEEN 1 AND n THEN s[hi[1]] END AS p50_ms_ci_high,
       CASE WHEN lo[2] BETWEEN 1 AND n THEN s[lo[2]] END AS p90_ms_ci_low,
       CASE WHEN hi[2] BETWEEN 1 AND n THEN s[hi[2]] END AS p90_ms_ci_high,
       CASE WHEN lo[3] BETWEEN 1 AND n THEN s[lo[3]] END AS p95_ms_ci_low,
       CASE WHEN hi[3] BETWEEN 1 AND n THEN s[hi[3]] END AS p95_ms_ci_high,
       CASE WHEN lo[4] BETWEEN 1 AND n THEN s[lo[4]] END AS p99_ms_ci_low,
       CASE WHEN hi[4] BETWEEN 1 AND n THEN s[hi[4]] END AS p99_ms_ci_high
FROM ranks;

CREATE OR REPLACE VIEW report_rag_load AS
WITH lv AS (
    SELECT run_id, lane, store, embedder, reranker, generator, concurrency,
           count(*) FILTER (WHERE stage = 'end_to_end' AND ok) AS ok_queries,
           count(*) FILTER (WHERE stage = 'end_to_end' AND NOT ok) AS failed_queries,
           any_value(level_wall_s) AS level_wall_s, any_value(slo_end_to_end_ms) AS slo_end_to_end_ms,
           coalesce(any_value(slo_percentile), 99.0) AS slo_percentile,
           any_value(error) FILTER (WHERE error IS NOT NULL) AS first_error
    FROM rag_requests GROUP BY ALL
    HAVING count(*) FILTER (WHERE stage = 'end_to_end') > 0  -- a level of whole queries (not stage timings alone)
)
SELECT lv.* EXCLUDE (pv, pv_high), ok_queries / NULLIF(level_wall_s, 0) AS queries_per_s,
       pv AS slo_value_ms, pv_high AS slo_value_ms_ci_high,
       CASE WHEN slo_end_to_end_ms IS NOT NULL
            THEN failed_queries = 0 AND coalesce(pv <= slo_end_to_end_ms, false) END AS slo_met
FROM (
    SELECT lv.*,
           CASE lv.slo_percentile WHEN 50 THEN s.p50_ms WHEN 90 THEN s.p90_ms WHEN 95 THEN s.p95_ms
                                  WHEN 99 THEN s.p99_ms END AS pv,
           CASE lv.slo_percentile WHEN 50 THEN s.p50_ms_ci_high WHEN 90 THEN s.p90_ms_ci_high
                                  WHEN 95 THEN s.p95_ms_ci_high WHEN 99 THEN s.p99_ms_ci_high END AS pv_high
    FROM lv
    LEFT JOIN report_rag_stages s
      ON s.run_id = lv.run_id AND s.lane = lv.lane AND s.store = lv.store
     AND s.embedder IS NOT DISTINCT FROM lv.embedder AND s.reranker IS NOT DISTINCT FROM lv.reranker
     AND s.generator IS NOT DISTINCT FROM lv.generator AND s.concurrency = lv.concurrency
     AND s.stage = 'end_to_end'
) lv;

CREATE OR REPLACE VIEW report_rag_decision AS
WITH runs AS (
    SELECT l.run_id, l.lane, l.box_role, l.instance_type, l.priced_as
    FROM lane_runs l JOIN report_lane_attempts a USING (run_id, lane, attempt)
    WHERE a.effective
),
g AS (
    SELECT run_id, lane, store, embedder, reranker, generator,
           any_value(slo_end_to_end_ms) AS slo_end_to_end_ms, any_value(slo_percentile) AS slo_percentile,
           max(concurrency) AS highest_concurrency_measured,
           max(concurrency) FILTER (WHERE slo_met) AS concurrency_at_slo,
           arg_max(queries_per_s, concurrency) FILTER (WHERE slo_met) AS queries_per_s_at_slo,
           arg_max(slo_value_ms, concurrency) FILTER (WHERE slo_met) AS slo_value_ms_at_slo,
           arg_min(slo_value_ms, concurrency) AS lowest_level_value_ms
    FROM report_rag_load GROUP BY ALL
),
j AS (
    SELECT g.*,
           CASE WHEN coalesce(r.box_role, '') = 'local' THEN coalesce(r.priced_as, 'local (not priced)')
                ELSE coalesce(r.instance_type, 'instance type not recorded') END AS instance,
           CASE WHEN coalesce(r.box_role, '') = 'local' THEN r.priced_as ELSE r.instance_type END AS priced_instance_type
    FROM g LEFT JOIN runs r USING (run_id, lane)
)
SELECT j.*, pr.usd_per_hour, pr.price_date,
       pr.usd_per_hour / (queries_per_s_at_slo * 3600.0) * 1000.0 AS usd_per_1k_queries,
       CASE WHEN slo_end_to_end_ms IS NULL THEN 'no SLO recorded for these queries'
            WHEN concurrency_at_slo IS NULL
            THEN printf('no level meets p%g end to end <= %g ms (the lowest level: %s ms)', slo_percentile,
                        slo_end_to_end_ms, coalesce(printf('%.1f', lowest_level_value_ms), 'NULL'))
            WHEN pr.usd_per_hour IS NULL THEN 'no price for ' || coalesce(priced_instance_type, 'this host')
       END AS note
FROM j LEFT JOIN instance_prices pr ON pr.instance_type = j.priced_instance_type;

CREATE OR REPLACE VIEW report_rag_coresidency AS
SELECT run_id, lane, backend, embedder, generator, embedder_devices, generator_devices, outcome, queries, error, ts
FROM rag_coresidency;
