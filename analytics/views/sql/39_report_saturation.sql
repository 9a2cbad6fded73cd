-- Saturation evidence: was the accelerator busy while a sweep point ran? Views defined here:
--   point_saturation  one row per sweep point (closed-loop grid, capacity search and sustained points alike): the
--                     accelerator's utilisation samples (telemetry.metric = 'accel_util_pct') that the point's lane
--                     attempt took on its box inside the point's span, as the sample count, the busy fraction, the
--                     mean and the p90 utilisation; NULL with accel_util_reason where there is nothing to measure.
-- A sample is one telemetry tick (one ts): its utilisation is the mean over the cores it reported with a value
-- (neuron-monitor reports the NeuronCores in use; nvidia-smi each GPU). A tick is busy when that mean is above
-- accel_busy_threshold_pct (0: any core did any work in the sampling period). A tick whose every core is NULL is
-- no sample (an absent sensor is never 0). The span is sweep_points.window_start .. window_end (first measured
-- dispatch .. last completion); a point without them: its measured requests' first sent_at .. last completion.
CREATE OR REPLACE VIEW point_saturation AS
WITH req_span AS (  -- the span from the point's measured requests, for a point that declared no window
    SELECT run_id, lane, attempt, point_id,
           min(sent_at) AS first_sent_at,
           max(sent_at + to_microseconds(CAST(round(coalesce(t_done_ns - t_sent_ns, 0) / 1e3) AS BIGINT)))
               AS last_done_at
    FROM requests WHERE NOT warmup AND sent_at IS NOT NULL
    GROUP BY run_id, lane, attempt, point_id
),
spans AS (
    SELECT p.run_id, p.lane, p.attempt, p.point_id, p.model, p.server_config,
           CASE WHEN p.window_start IS NOT NULL AND p.window_end IS NOT NULL THEN p.window_start
                ELSE r.first_sent_at END AS span_start,
           CASE WHEN p.window_start IS NOT NULL AND p.window_end IS NOT NULL THEN p.window_end
                ELSE r.last_done_at END AS span_end,
           CASE WHEN p.window_start IS NOT NULL AND p.window_end IS NOT NULL THEN 'sweep_points'
                WHEN r.first_sent_at IS NOT NULL THEN 'requests' END AS span_source
    FROM sweep_points p
    LEFT JOIN req_span r USING (run_id, lane, attempt, point_id)
),
ticks AS (  -- one row per telemetry tick of a lane attempt: the mean over the cores with a value
    SELECT run_id, lane, attempt, ts,
           avg(value)             AS util_pct,
           count(value)           AS cores,
           min(note)              AS note
    FROM telemetry WHERE metric = 'accel_util_pct'
    GROUP BY run_id, lane, attempt, ts
),
sensor AS (  -- per lane attempt: did the accelerator sensor ever give a value (else its note says why not)
    SELECT run_id, lane, attempt,
           count(*) FILTER (WHERE cores > 0)  AS valued_ticks,
           min(note) FILTER (WHERE cores = 0) AS null_note
    FROM ticks GROUP BY run_id, lane, attempt
),
period AS (  -- per lane attempt: the median gap between ticks with a value (the sampling period)
    SELECT run_id, lane, attempt, median(gap_s) AS sample_period_s
    FROM (SELECT run_id, lane, attempt,
                 epoch(ts) - epoch(lag(ts) OVER (PARTITION BY run_id, lane, attempt ORDER BY ts)) AS gap_s
          FROM ticks WHERE cores > 0)
    WHERE gap_s IS NOT NULL
    GROUP BY run_id, lane, attempt
),
in_span AS (
    SELECT s.run_id, s.lane, s.attempt, s.point_id,
           count(t.util_pct)                                    AS samples,
           count(t.ts)                                          AS ticks,
           max(t.cores)                                         AS cores,
           count(*) FILTER (WHERE t.util_pct > 0.0)             AS busy,
           avg(t.util_pct)                                      AS mean_util,
           quantile_cont(t.util_pct, 0.9)                       AS p90_util,
           min(t.note) FILTER (WHERE t.util_pct IS NULL)        AS null_note
    FROM spans s
    JOIN ticks t ON t.run_id = s.run_id AND t.lane = s.lane AND t.attempt = s.attempt
     AND t.ts >= s.span_start AND t.ts <= s.span_end
    GROUP BY s.run_id, s.lane, s.attempt, s.point_id
)
SELECT s.run_id, s.lane, s.attempt, s.point_id, s.model, s.server_config,
       s.span_start AS accel_span_start, s.span_end AS accel_span_end,
       epoch(s.span_end) - epoch(s.span_start) AS accel_span_s, s.span_source AS accel_span_source,
       coalesce(i.samples, 0) AS accel_samples,
       i.cores AS accel_cores,
       0.0 AS accel_busy_threshold_pct,
       CASE WHEN i.samples > 0 THEN i.busy / i.samples END AS accel_busy_fraction,
       CASE WHEN i.samples > 0 THEN 100.0 * i.busy / i.samples END AS accel_busy_pct,
       CASE WHEN i.samples > 0 THEN i.mean_util END AS accel_util_mean_pct,
       CASE WHEN i.samples > 0 THEN i.p90_util END AS accel_util_p90_pct,
       pd.sample_period_s AS accel_sample_period_s,
       CASE WHEN coalesce(i.samples, 0) > 0 THEN NULL
            WHEN coalesce(n.valued_ticks, 0) = 0 THEN 'no sensor'
            WHEN s.span_source IS NULL THEN 'no span'
            ELSE 'no samples in span' END AS accel_util_reason,
       CASE WHEN coalesce(i.samples, 0) > 0 THEN NULL
            WHEN coalesce(n.valued_ticks, 0) = 0
            THEN coalesce(n.null_note, 'no accel_util_pct sample in this lane attempt: no accelerator sensor on '
                                       'this backend')
            WHEN s.span_source IS NULL THEN 'the point has no window and no measured request with a send time'
            WHEN i.ticks > 0 THEN printf('%d sample(s) in the span, none with a value: %s', i.ticks,
                                         coalesce(i.null_note, 'no note'))
            ELSE printf('span %.3f s', epoch(s.span_end) - epoch(s.span_start))
                 || coalesce(printf(', sampling period %.3f s', pd.sample_period_s), '')
                 || ': no sample fell inside it' END AS accel_util_note
FROM spans s
LEFT JOIN in_span i USING (run_id, lane, attempt, point_id)
LEFT JOIN sensor n USING (run_id, lane, attempt)
LEFT JOIN period pd USING (run_id, lane, attempt);
