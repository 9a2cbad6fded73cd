-- docs/reference/metrics.md, "Serving" as SQL (the serving family, 5 of 5: workloads). CREATE OR REPLACE VIEW statements only.
-- Reads request_metrics (10_serving_requests.sql) and sweep_points. A workload point (sweep_points.workload set)
-- is sliced by what its requests were built to be (requests.input_len: the drawn target; prefix_group; session_id,
-- turn_index, session_turns):
--
-- workload_points          one row per workload point: its arrival, requests, success, the client's send lag
--                          (p50 / p99 of t_sent - t_scheduled, the schedule's lag for a trace or a ramp), the
--                          achieved rate against the schedule's, sessions and turns, and the prefix-cache hit rate
--                          from the server's own counters (NULL with prefix_cache_note where it exports none)
-- workload_length_buckets  one row per (point, input-length bucket): powers of two [2^k, 2^(k+1)) of the drawn
--                          input length; requests, p50 / p99 TTFT, p50 TPOT, p50 E2EL
-- workload_turns           one row per (point, turn index) of a multi-turn workload: requests, mean input tokens
--                          (the conversation so far), p50 / p99 TTFT, p50 TPOT
-- workload_sessions        one row per session: turns drawn, sent and succeeded, its wall time (first send to last
--                          byte) and mean TTFT

CREATE OR REPLACE VIEW workload_points AS
WITH r AS (
    SELECT run_id, lane, point_id,
           count(*) AS requests,
           count(*) FILTER (WHERE success) AS completed,
           quantile_cont(client_queue_ms, 0.5) AS p50_send_lag_ms,
           quantile_cont(client_queue_ms, 0.99) AS p99_send_lag_ms,
           (max(t_sent_ns) - min(t_sent_ns)) / 1e9 AS send_span_s,
           (max(t_scheduled_ns) - min(t_scheduled_ns)) / 1e9 AS schedule_span_s,
           count(DISTINCT session_id) FILTER (WHERE session_id IS NOT NULL) AS sessions,
           count(DISTINCT prefix_group) FILTER (WHERE prefix_group IS NOT NULL) AS prefix_groups,
           max(turn_index) + 1 AS max_turns
    FROM request_metrics
    GROUP BY run_id, lane, point_id
)
SELECT s.run_id, s.lane, s.point_id, s.model, s.server_config, s.workload, s.arrival, s.mode,
       s.input_len AS nominal_input_len, s.output_len AS nominal_output_len, s.max_concurrency, s.request_rate,
       r.requests, r.completed, r.requests - r.completed AS failed,
       r.p50_send_lag_ms, r.p99_send_lag_ms, s.client_lag_bound_ms,
       s.client_lag_bound_ms IS NULL OR r.p99_send_lag_ms <= s.client_lag_bound_ms AS send_lag_ok,
       CASE WHEN r.send_span_s > 0 THEN (r.requests - 1) / r.send_span_s END AS achieved_rate,
       CASE WHEN r.schedule_span_s > 0 THEN (r.requests - 1) / r.schedule_span_s END AS scheduled_rate,
       r.sessions, r.max_turns, r.prefix_groups,
       s.prefix_cache_queries, s.prefix_cache_hits,
       s.prefix_cache_hits / NULLIF(s.prefix_cache_queries, 0)::DOUBLE AS prefix_cache_hit_rate,
       s.prefix_cache_note, s.workload_json, s.repeat_index
FROM sweep_points s JOIN r USING (run_id, lane, point_id)
WHERE s.workload IS NOT NULL;

CREATE OR REPLACE VIEW workload_length_buckets AS
SELECT m.run_id, m.lane, m.point_id, s.workload, s.server_config,
       CAST(pow(2, floor(log2(m.input_len))) AS BIGINT) AS bucket_lo,
       CAST(pow(2, floor(log2(m.input_len)) + 1) AS BIGINT) AS bucket_hi,
       count(*) AS requests, count(*) FILTER (WHERE m.success) AS completed,
       quantile_cont(m.ttft_ms, 0.5) FILTER (WHERE m.success) AS p50_ttft_ms,
       quantile_cont(m.ttft_ms, 0.99) FILTER (WHERE m.success) AS p99_ttft_ms,
       quantile_cont(m.tpot_ms, 0.5) FILTER (WHERE m.success) AS p50_tpot_ms,
       quantile_cont(m.e2el_ms, 0.5) FILTER (WHERE m.success) AS p50_e2el_ms
FROM request_metrics m JOIN sweep_points s USING (run_id, lane, point_id)
WHERE s.workload IS NOT NULL AND m.input_len >= 1
GROUP BY ALL;

CREATE OR REPLACE VIEW workload_turns AS
SELECT m.run_id, m.lane, m.point_id, s.workload, s.server_config, m.turn_index,
       count(*) AS requests, count(*) FILTER (WHERE m.success) AS completed,
       avg(m.input_len) AS mean_input_len,
       quantile_cont(m.ttft_ms, 0.5) FILTER (WHERE m.success) AS p50_ttft_ms,
       quantile_cont(m.ttft_ms, 0.99) FILTER (WHERE m.success) AS p99_ttft_ms,
       quantile_cont(m.tpot_ms, 0.5) FILTER (WHERE m.success) AS p50_tpot_ms
FROM request_metrics m JOIN sweep_points s USING (run_id, lane, point_id)
WHERE s.workload IS NOT NULL AND m.turn_index IS NOT NULL
GROUP BY ALL;

CREATE OR REPLACE VIEW workload_sessions AS
SELECT run_id, lane, point_id, session_id,
       max(session_turns) AS turns_drawn, count(*) AS turns_sent, count(*) FILTER (WHERE success) AS turns_ok,
       (max(t_done_ns) - min(t_sent_ns)) / 1e9 AS wall_s,
       avg(ttft_ms) FILTER (WHERE success) AS mean_ttft_ms
FROM request_metrics
WHERE session_id IS NOT NULL
GROUP BY run_id, lane, point_id, session_id;
