-- Report-side views. Cost is context, never a headline (rule 1). Views defined here:
--   report_lane_cost   every committed attempt: instance-hours (lane wall time) x the dated on-demand price.
--   report_cost_by_lane per (run, lane): all attempts summed (a failed attempt cost money too).
--   report_run_cost    per run: the sum, with how many attempts could not be priced and how many were imported.
--   report_point_cost  per sweep point (12_serving_points' serving_points): $ per million output tokens at its
--                      output_throughput on the instance the point ran on.
-- Lane wall time only: instance boot, SSM waits and idle time between lanes are not counted.
-- A local run (box_role 'local') has no instance cost: NULL with a note, never zero.
-- An imported attempt (report_lane_attempts.imported_from, e.g. neuronpipe import torchneuronx) is skipped: its wall
-- time was spent by another harness, not this pipeline; instance_hours and usd are NULL with a note, and the
-- per-lane and per-run sums count the pipeline's own attempts only (imported_attempts says how many were skipped).
CREATE OR REPLACE VIEW report_lane_cost AS
SELECT a.run_id, a.lane, a.attempt, a.effective, a.status, a.box_role, a.instance_type, a.backend,
       a.wall_s,
       CASE WHEN a.imported_from IS NULL THEN a.wall_s / 3600.0 END AS instance_hours,
       p.usd_per_hour, p.region AS price_region, p.price_date, p.source AS price_source,
       CASE WHEN coalesce(a.box_role, '') = 'local' OR a.instance_type IS NULL OR a.imported_from IS NOT NULL THEN NULL
            ELSE a.wall_s / 3600.0 * p.usd_per_hour END AS usd,
       CASE WHEN a.imported_from IS NOT NULL
                 THEN 'imported from ' || a.imported_from || ': its wall time is not this pipeline''s cost'
            WHEN coalesce(a.box_role, '') = 'local' THEN 'local run: no instance cost'
            WHEN a.instance_type IS NULL THEN 'instance type not recorded: cost unknown'
            WHEN p.usd_per_hour IS NULL THEN 'no price for ' || a.instance_type || ' in the price table'
            WHEN a.wall_s IS NULL THEN 'wall time not recorded'
            ELSE NULL END AS cost_note,
       a.imported_from
FROM report_lane_attempts a
LEFT JOIN instance_prices p ON p.instance_type = a.instance_type;

CREATE OR REPLACE VIEW report_cost_by_lane AS
SELECT run_id, lane, min(box_role) AS box_role, min(instance_type) AS instance_type,
       count(*) AS attempts, sum(instance_hours) AS instance_hours,
       CASE WHEN count(usd) = count(*) FILTER (WHERE imported_from IS NULL)
                 AND count(*) FILTER (WHERE imported_from IS NULL) > 0 THEN sum(usd) END AS usd,
       count(*) FILTER (WHERE imported_from IS NULL) - count(usd) AS unpriced_attempts,
       min(cost_note) AS cost_note,
       count(*) FILTER (WHERE imported_from IS NOT NULL) AS imported_attempts
FROM report_lane_cost
GROUP BY run_id, lane;

CREATE OR REPLACE VIEW report_run_cost AS
SELECT run_id, count(*) AS attempts, sum(instance_hours) AS instance_hours,
       CASE WHEN count(usd) = count(*) FILTER (WHERE imported_from IS NULL)
                 AND count(*) FILTER (WHERE imported_from IS NULL) > 0 THEN sum(usd) END AS usd,
       sum(usd) AS usd_priced_part,
       count(*) FILTER (WHERE imported_from IS NULL) - count(usd) AS unpriced_attempts,
       min(cost_note) AS cost_note,
       count(*) FILTER (WHERE imported_from IS NOT NULL) AS imported_attempts
FROM report_lane_cost
GROUP BY run_id;

CREATE OR REPLACE VIEW report_point_cost AS
SELECT s.run_id, s.lane, s.point_id, s.model, s.server_config, s.max_concurrency, s.request_rate,
       s.output_throughput, c.instance_type, c.usd_per_hour, c.price_date,
       c.usd_per_hour / nullif(s.output_throughput * 3600.0, 0) * 1e6 AS usd_per_million_output_tokens,
       coalesce(c.cost_note, CASE WHEN c.run_id IS NULL THEN 'no lane_runs row for this point' END) AS cost_note
FROM serving_points s
LEFT JOIN report_lane_cost c ON c.run_id = s.run_id AND c.lane = s.lane AND c.effective;
