-- Report-side views: the limits and train_limits lanes' bisections. Views defined here:
--   report_limits  one row per search: the bracket (low, high] (low: the largest value that booted and answered,
--                  or trained; high: the smallest above it that did not), the classified error at high, every
--                  probe in order ("1 ok, 64 oom, 32 oom, ..."; a probe's peak memory after it where a sensor
--                  measured one: "1024 ok 612 MiB"), the boots (probes) spent and why the search stopped; for a
--                  training search the peak memory and tokens/s at low. A search whose good bound failed has no
--                  low; one whose bad bound booted has no high.
CREATE OR REPLACE VIEW report_limits AS
WITH probes AS (SELECT * FROM limit_probes WHERE phase <> 'outcome'),
lows AS (
    SELECT run_id, lane, search_id, max(value) FILTER (WHERE succeeded) AS low
    FROM probes GROUP BY run_id, lane, search_id
),
highs AS (
    SELECT p.run_id, p.lane, p.search_id, min(p.value) AS high
    FROM probes p JOIN lows l USING (run_id, lane, search_id)
    WHERE NOT p.succeeded AND (l.low IS NULL OR p.value > l.low)
    GROUP BY p.run_id, p.lane, p.search_id
),
summary AS (
    SELECT run_id, lane, search_id, any_value(model) AS model, any_value(kind) AS kind,
           any_value(at_field) AS at_field, any_value(at_value) AS at_value, any_value(backend) AS backend,
           count(*) AS boots, sum(wall_s) AS boot_wall_s,
           string_agg(CAST(value AS VARCHAR) || ' ' || CASE WHEN succeeded THEN 'ok' ELSE coalesce(error_kind, 'failed') END
                      || coalesce(' ' || CAST(round(peak_mem_bytes / 1048576.0) AS BIGINT) || ' MiB', ''),
                      ', ' ORDER BY probe) AS probes,
           any_value(peak_mem_source) AS peak_mem_source
    FROM probes GROUP BY run_id, lane, search_id
)
SELECT s.run_id, s.lane, s.model, s.search_id, s.kind, s.at_field, s.at_value, s.backend,
       l.low, h.high,
       CASE WHEN l.low IS NULL THEN 'no bracket: the good bound failed'
            WHEN h.high IS NULL THEN '(' || l.low || ', ∞)'
            ELSE '(' || l.low || ', ' || h.high || ']' END AS bracket,
       f.error_kind AS error_kind_at_high, f.error AS error_at_high,
       s.boots, s.boot_wall_s, s.probes, o.stop_reason,
       g.peak_mem_bytes AS peak_mem_at_low_bytes, s.peak_mem_source, g.tokens_per_s AS tokens_per_s_at_low
FROM summary s
LEFT JOIN lows l USING (run_id, lane, search_id)
LEFT JOIN highs h USING (run_id, lane, search_id)
LEFT JOIN probes f ON f.run_id = s.run_id AND f.lane = s.lane AND f.search_id = s.search_id AND f.value = h.high
 AND NOT f.succeeded
LEFT JOIN probes g ON g.run_id = s.run_id AND g.lane = s.lane AND g.search_id = s.search_id AND g.value = l.low
 AND g.succeeded
LEFT JOIN (SELECT run_id, lane, search_id, max(stop_reason) AS stop_reason FROM limit_probes
           WHERE phase = 'outcome' GROUP BY ALL) o USING (run_id, lane, search_id);
