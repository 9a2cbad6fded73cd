-- docs/reference/metrics.md, "Serving" as SQL, the single implementation (the serving family, 1 of 4: per request).
-- Owned by the load generator (agents/loadgen). CREATE OR REPLACE VIEW statements only.
-- Reads the tables requests and sweep_points; the load order is analytics.views.VIEW_FILES.
--
-- request_metrics          one row per measured (non-warm-up) request: TTFT, TPOT, E2EL, queue, length check
-- request_itls             one row per gap between consecutive content chunks (ITL, ITL per token)
-- request_reads            one row per network read that carried content (how the tokens arrived)
-- request_slo              one row per measured request: its point's SLOs and whether it met them (good)

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
        OR (output_len IS NOT NULL AND output_tokens IS DISTINCT FROM output_len) AS length_mismatch,
    request_model, prefix_group, session_id, turn_index, session_turns
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
