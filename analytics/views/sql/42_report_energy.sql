-- Energy per output token (docs/reference/metrics.md "Energy"). CREATE OR REPLACE VIEW statements only. Views defined
-- here:
--   point_energy  one row per sweep point (closed-loop grid, capacity search and sustained points alike): the energy
--                 the box's accelerators drew over the point's span, from the power samples its lane attempt took
--                 (telemetry.metric = 'power_w': nvidia-smi's power.draw per GPU), the time-weighted mean power, and
--                 the energy per output token; NULL with energy_reason and energy_note where nothing was measured
--                 (neuron-monitor reports no power on trn1/inf2; a CPU run has no power sensor) — never 0.
-- A power sample is one telemetry tick (one ts): the sum over the devices it listed, and only a tick where every
-- device it listed has a value (a GPU reporting [N/A] would otherwise count as 0 W). The energy is the trapezoidal
-- integral of the samples inside the span, each edge (span start .. first sample, last sample .. span end) held at
-- its nearest sample; it needs energy_min_samples (2) samples in the span. The span is 39_report_saturation's
-- (point_saturation.accel_span_*: window_start .. window_end, else the measured requests' first send .. last
-- completion), the output tokens 12_serving_points' total_output_tokens (output_throughput's numerator: successful
-- measured requests), so energy_per_output_token_j ≈ power_mean_w / output_throughput.
CREATE OR REPLACE VIEW point_energy AS
WITH ticks AS (  -- one row per power tick of a lane attempt
    SELECT run_id, lane, attempt, ts,
           sum(value)    AS power_w,
           count(*)      AS devices,
           count(value)  AS valued,
           min(source)   AS source,
           min(note)     AS note
    FROM telemetry WHERE metric = 'power_w'
    GROUP BY run_id, lane, attempt, ts
),
sensor AS (  -- per lane attempt: did any tick give every device's power (else the sensor's note says why not)
    SELECT run_id, lane, attempt,
           count(*) FILTER (WHERE valued = devices) AS complete_ticks,
           min(note) FILTER (WHERE valued < devices) AS null_note,
           min(source) AS source
    FROM ticks GROUP BY run_id, lane, attempt
),
spans AS (
    SELECT run_id, lane, attempt, point_id, model, server_config,
           accel_span_start AS span_start, accel_span_end AS span_end, accel_span_source AS span_source
    FROM point_saturation
),
in_span AS (  -- every tick inside a point's span; the complete ones carry the integral's terms
    SELECT s.run_id, s.lane, s.attempt, s.point_id, t.ts, t.power_w, t.devices, t.valued = t.devices AS complete,
           t.note, epoch(t.ts) AS t_s
    FROM spans s
    JOIN ticks t ON t.run_id = s.run_id AND t.lane = s.lane AND t.attempt = s.attempt
     AND t.ts >= s.span_start AND t.ts <= s.span_end
),
samples AS (
    SELECT *, lead(t_s) OVER w AS next_t_s, lead(power_w) OVER w AS next_power_w
    FROM in_span WHERE complete
    WINDOW w AS (PARTITION BY run_id, lane, attempt, point_id ORDER BY ts)
),
integral AS (
    SELECT run_id, lane, attempt, point_id,
           count(*)                                                            AS samples,
           max(devices)                                                        AS devices,
           sum(coalesce((power_w + next_power_w) / 2 * (next_t_s - t_s), 0))  AS inner_j,
           arg_min(power_w, ts) AS first_w, min(t_s) AS first_t_s,
           arg_max(power_w, ts) AS last_w,  max(t_s) AS last_t_s
    FROM samples GROUP BY run_id, lane, attempt, point_id
),
incomplete AS (
    SELECT run_id, lane, attempt, point_id, count(*) AS ticks, min(note) AS note
    FROM in_span WHERE NOT complete GROUP BY run_id, lane, attempt, point_id
),
measured AS (
    SELECT s.*, epoch(s.span_end) - epoch(s.span_start) AS span_s,
           coalesce(g.samples, 0) AS samples, g.devices,
           CASE WHEN g.samples >= 2
                THEN g.first_w * (g.first_t_s - epoch(s.span_start)) + g.inner_j
                     + g.last_w * (epoch(s.span_end) - g.last_t_s) END AS energy_j,
           coalesce(x.ticks, 0) AS incomplete_ticks, x.note AS incomplete_note,
           coalesce(n.complete_ticks, 0) AS complete_ticks, n.null_note, n.source,
           p.total_output_tokens
    FROM spans s
    LEFT JOIN integral g USING (run_id, lane, attempt, point_id)
    LEFT JOIN incomplete x USING (run_id, lane, attempt, point_id)
    LEFT JOIN sensor n USING (run_id, lane, attempt)
    LEFT JOIN serving_points p USING (run_id, lane, point_id)
)
SELECT run_id, lane, attempt, point_id, model, server_config,
       span_s                                                 AS energy_span_s,
       samples                                                AS power_samples,
       devices                                                AS power_devices,
       source                                                 AS power_source,
       2                                                      AS energy_min_samples,
       energy_j,
       energy_j / NULLIF(span_s, 0)                           AS power_mean_w,
       total_output_tokens                                    AS energy_output_tokens,
       energy_j / NULLIF(total_output_tokens, 0)              AS energy_per_output_token_j,
       CASE WHEN energy_j IS NOT NULL AND coalesce(total_output_tokens, 0) > 0 THEN NULL
            WHEN complete_ticks = 0 THEN 'no sensor'
            WHEN span_source IS NULL THEN 'no span'
            WHEN energy_j IS NULL THEN 'too few samples'
            ELSE 'no output tokens' END                       AS energy_reason,
       CASE WHEN energy_j IS NOT NULL AND coalesce(total_output_tokens, 0) > 0 THEN NULL
            WHEN complete_ticks = 0
            THEN coalesce(null_note, 'no power sensor: this lane attempt sampled no power_w (a CPU run has none)')
            WHEN span_source IS NULL THEN 'the point has no window and no measured request with a send time'
            WHEN energy_j IS NULL
            THEN printf('%d power sample(s) inside the %.3f s span, the integral needs at least 2', samples, span_s)
                 || CASE WHEN incomplete_ticks > 0
                         THEN printf(' (%d more without a value on every device: %s)', incomplete_ticks,
                                     coalesce(incomplete_note, 'no note')) ELSE '' END
            ELSE printf('energy measured (%.1f J) but the point produced no output tokens: no J/token', energy_j)
       END                                                    AS energy_note
FROM measured;
