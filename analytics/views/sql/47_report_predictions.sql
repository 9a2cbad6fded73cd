-- Predicted vs observed (docs/reference/predictions.md; docs/reference/metrics.md "Predictions"). CREATE OR REPLACE
-- VIEW statements only. Reads the predictions table and 32_report_training's, 34_report_exclusions' and
-- 12_serving_points' views. Views defined here:
--   report_predictions       one row per registered prediction: what the run recorded for its target (observed:
--                            works | excluded | fails, NULL when nothing), the figure's observed value and whether it
--                            fell in the range, and the verdict: held | missed | not run
--   report_prediction_rates  per run: predictions, held, missed, not run, hit_rate = held / (held + missed), and
--                            whether they were registered before the run's first lane started
--
-- The target's result lanes: lane@cell for a cell, else the lane and every lane@<box or cell>; each one's effective
-- attempt (report_lane_attempts). Outcome of the lane: fails if any failed, else excluded if any was skipped (not
-- applicable here, or a need did not succeed), else works. With a server config, within a lane that worked: works
-- when at least one of the config's serving points is a headline point (rule 15), fails when its boot or compile
-- failed (compiles), excluded when it has points but none headline, NULL (not run) when it has none.
-- A figure is the median over the target's rows: headline serving points (at the concurrency when given), training
-- runs, or the result lanes' wall times. An imported prediction keeps the verdict its source recorded.
CREATE OR REPLACE VIEW report_predictions AS
WITH p AS (
    SELECT * FROM predictions
),
attempts AS (
    SELECT p.run_id, p.prediction, a.lane AS result_lane, a.status, a.wall_s
    FROM p JOIN report_lane_attempts a
      ON a.run_id = p.run_id AND a.effective
     AND (a.lane = p.target_lane || coalesce('@' || p.cell, '')
          OR (p.cell IS NULL AND starts_with(a.lane, p.target_lane || '@')))
),
lane_outcome AS (
    SELECT run_id, prediction,
           CASE WHEN bool_or(status = 'failed') THEN 'fails'
                WHEN bool_or(status = 'skipped') THEN 'excluded'
                ELSE 'works' END AS lane_observed,
           string_agg(result_lane || ' ' || status, ', ' ORDER BY result_lane) AS lane_detail,
           median(wall_s) AS wall_s
    FROM attempts GROUP BY run_id, prediction
),
points AS (
    SELECT p.run_id, p.prediction, s.max_concurrency, s.output_throughput, s.p50_ttft_ms, s.p50_tpot_ms,
           coalesce(v.headline, false) AS headline
    FROM p JOIN attempts a USING (run_id, prediction)
    JOIN serving_points s ON s.run_id = a.run_id AND s.lane = a.result_lane
    LEFT JOIN report_point_validity v ON v.run_id = s.run_id AND v.lane = s.lane AND v.point_id = s.point_id
    WHERE p.server_config IS NULL OR s.server_config = p.server_config
),
config_outcome AS (
    SELECT p.run_id, p.prediction,
           (SELECT count(*) FROM points x WHERE x.run_id = p.run_id AND x.prediction = p.prediction) AS points,
           (SELECT count(*) FROM points x WHERE x.run_id = p.run_id AND x.prediction = p.prediction AND x.headline)
               AS headline_points,
           EXISTS (SELECT 1 FROM compiles c JOIN attempts a ON c.run_id = a.run_id AND c.lane = a.result_lane
                   WHERE a.run_id = p.run_id AND a.prediction = p.prediction AND c.config = p.server_config
                     AND NOT c.succeeded) AS boot_failed
    FROM p WHERE p.server_config IS NOT NULL
),
training AS (
    SELECT a.run_id, a.prediction, median(t.final_loss) AS final_loss, median(t.tokens_per_s) AS train_tok_s
    FROM attempts a JOIN report_training t ON t.run_id = a.run_id AND t.lane = a.result_lane
    GROUP BY a.run_id, a.prediction
),
serving AS (
    SELECT x.run_id, x.prediction,
           median(x.output_throughput) AS output_tok_s, median(x.p50_ttft_ms) AS p50_ttft_ms,
           median(x.p50_tpot_ms) AS p50_tpot_ms
    FROM points x JOIN p USING (run_id, prediction)
    WHERE x.headline AND (p.concurrency IS NULL OR x.max_concurrency = p.concurrency)
    GROUP BY x.run_id, x.prediction
),
observed AS (
    SELECT p.*,
           CASE WHEN p.source = 'imported' THEN NULL
                WHEN l.lane_observed IS NULL THEN NULL
                WHEN p.server_config IS NULL OR l.lane_observed <> 'works' THEN l.lane_observed
                WHEN c.headline_points > 0 THEN 'works'
                WHEN c.boot_failed THEN 'fails'
                WHEN c.points > 0 THEN 'excluded' END AS observed,
           CASE WHEN p.source = 'imported' THEN p.recorded_observed
                WHEN p.server_config IS NULL THEN l.lane_detail
                ELSE l.lane_detail || '; ' || p.server_config || ': ' || coalesce(c.headline_points, 0)
                     || ' headline point(s) of ' || coalesce(c.points, 0)
                     || CASE WHEN c.boot_failed THEN ', a failed boot' ELSE '' END END AS observed_detail,
           CASE p.metric WHEN 'output_tok_s' THEN s.output_tok_s WHEN 'p50_ttft_ms' THEN s.p50_ttft_ms
                         WHEN 'p50_tpot_ms' THEN s.p50_tpot_ms WHEN 'final_loss' THEN t.final_loss
                         WHEN 'train_tok_s' THEN t.train_tok_s WHEN 'wall_s' THEN l.wall_s END AS observed_value
    FROM p
    LEFT JOIN lane_outcome l USING (run_id, prediction)
    LEFT JOIN config_outcome c USING (run_id, prediction)
    LEFT JOIN training t USING (run_id, prediction)
    LEFT JOIN serving s USING (run_id, prediction)
)
SELECT run_id, prediction, target, target_lane, server_config, cell, expected, observed, observed_detail,
       metric, concurrency, low, high, observed_value,
       CASE WHEN metric IS NULL OR observed_value IS NULL THEN NULL
            ELSE observed_value >= coalesce(low, observed_value) AND observed_value <= coalesce(high, observed_value)
       END AS in_range,
       CASE WHEN source = 'imported' THEN recorded_verdict
            WHEN observed IS NULL THEN 'not run'
            WHEN observed <> expected THEN 'missed'
            WHEN metric IS NULL THEN 'held'
            WHEN observed_value IS NULL THEN 'not run'
            WHEN observed_value >= coalesce(low, observed_value) AND observed_value <= coalesce(high, observed_value)
            THEN 'held'
            ELSE 'missed' END AS verdict,
       note, registered_at, digest, source
FROM observed;

CREATE OR REPLACE VIEW report_prediction_rates AS
WITH first_lane AS (
    SELECT run_id, min(started_at) AS first_lane_started_at FROM lane_runs GROUP BY run_id
)
SELECT r.run_id,
       count(*) AS predictions,
       count(*) FILTER (WHERE verdict = 'held') AS held,
       count(*) FILTER (WHERE verdict = 'missed') AS missed,
       count(*) FILTER (WHERE verdict = 'not run') AS not_run,
       count(*) FILTER (WHERE verdict = 'held')
         / nullif(count(*) FILTER (WHERE verdict IN ('held', 'missed')), 0) AS hit_rate,
       min(r.registered_at) AS registered_at,
       any_value(f.first_lane_started_at) AS first_lane_started_at,
       min(r.registered_at) < any_value(f.first_lane_started_at) AS registered_before_first_lane,
       any_value(r.source) AS source
FROM report_predictions r
LEFT JOIN first_lane f USING (run_id)
GROUP BY r.run_id;
