-- Report-side views. Views defined here:
--   report_machines            one row per (run, host, box role, instance): the machines a run used.
--   report_telemetry_coverage  samples per (run, lane, source, metric); absent sensors (NULL values) with their note.
--   report_point_telemetry     samples with a value inside each sweep point's window (telemetry_samples; a point
--                              without one is excluded: NULL-only samples are no telemetry) and every row (telemetry_rows).
--   report_sustained           per sustained point (13_serving_sustained's sustained_window_metrics): windows, warm-up
--                              windows, tokens; retention and drift are 13_serving_sustained's sustained_summary.
--   report_quality             per (run, lane, model, variant): prompts, deterministic answers, logprob coverage.
--   report_quality_delta       base vs fine-tune on the same prompts: how many answers differ.
--   report_roundtrip           per (run, model): artifacts hashed, verified, mismatched, unverifiable, merged files
--                              with a verified copy (20_training's weights_roundtrip); verdict: holds | mismatch |
--                              unverified (nothing compared yet) | incomplete (a merged file has no verified copy).
CREATE OR REPLACE VIEW report_machines AS
SELECT run_id, host, box_role, instance_type, instance_id, backend,
       string_agg(DISTINCT lane, ', ' ORDER BY lane)   AS lanes,
       min(harness_sha)                                AS harness_sha,
       count(DISTINCT harness_sha)                     AS harness_shas,
       min(profile)                                    AS profile
FROM lane_runs
GROUP BY run_id, host, box_role, instance_type, instance_id, backend;

CREATE OR REPLACE VIEW report_telemetry_coverage AS
SELECT run_id, lane, source, metric,
       count(*)                          AS samples,
       count(value)                      AS samples_with_value,
       min(unit)                         AS unit,
       min(note) FILTER (WHERE value IS NULL) AS null_note
FROM telemetry
GROUP BY run_id, lane, source, metric;

CREATE OR REPLACE VIEW report_point_telemetry AS
SELECT p.run_id, p.lane, p.attempt, p.point_id, p.model, p.server_config,
       count(t.value) AS telemetry_samples,  -- a sample whose value is NULL (absent sensor, blank cell) is no telemetry
       count(t.ts)    AS telemetry_rows      -- every row in the window, NULL-valued ones included
FROM sweep_points p
LEFT JOIN telemetry t
  ON t.run_id = p.run_id AND t.lane = p.lane AND t.attempt = p.attempt
 AND (p.window_start IS NULL OR t.ts >= p.window_start)
 AND (p.window_end IS NULL OR t.ts <= p.window_end)
GROUP BY p.run_id, p.lane, p.attempt, p.point_id, p.model, p.server_config;

CREATE OR REPLACE VIEW report_sustained AS
SELECT run_id, lane, point_id, model, server_config,
       count(*) FILTER (WHERE NOT warmup)                        AS windows,
       count(*) FILTER (WHERE warmup)                            AS warmup_windows,
       min(window_s)                                             AS window_s,
       min(window_start)                                         AS first_window_start,
       max(window_start)                                         AS last_window_start,
       sum(output_tokens) FILTER (WHERE NOT warmup)              AS output_tokens,
       sum(completed) FILTER (WHERE NOT warmup)                  AS completed,
       sum(failed) FILTER (WHERE NOT warmup)                     AS failed
FROM sustained_window_metrics
GROUP BY run_id, lane, point_id, model, server_config;

CREATE OR REPLACE VIEW report_quality AS
SELECT run_id, lane, model, variant,
       count(*)                              AS prompts,
       count(*) FILTER (WHERE deterministic) AS deterministic,
       count(deterministic)                  AS determinism_checked,
       count(mean_logprob)                   AS with_logprob,
       avg(mean_logprob)                     AS mean_logprob,
       min(logprob_note)                     AS logprob_note,
       sum(output_tokens)                    AS output_tokens
FROM quality
GROUP BY run_id, lane, model, variant;

CREATE OR REPLACE VIEW report_quality_delta AS
SELECT b.run_id, b.model,
       count(*)                                            AS paired_prompts,
       count(*) FILTER (WHERE b.text_1 IS DISTINCT FROM f.text_1) AS answers_differ
FROM quality b
JOIN quality f ON f.run_id = b.run_id AND f.model IS NOT DISTINCT FROM b.model AND f.prompt_id = b.prompt_id
WHERE b.variant = 'base' AND f.variant = 'finetune'
GROUP BY b.run_id, b.model;

CREATE OR REPLACE VIEW report_roundtrip AS
WITH a AS (
    SELECT run_id, model,
           count(*)                                           AS artifacts,
           count(*) FILTER (WHERE roundtrip_verified)         AS verified,
           count(*) FILTER (WHERE NOT roundtrip_verified)     AS mismatched,
           count(*) FILTER (WHERE roundtrip_verified IS NULL) AS unverifiable
    FROM artifacts
    GROUP BY run_id, model
),
w AS (  -- 20_training's per-file view: every merged file beside its copy on the serving side
    SELECT run_id, model, count(*) AS merged_files, count(*) FILTER (WHERE verified) AS merged_files_verified
    FROM weights_roundtrip
    GROUP BY run_id, model
),
j AS (
    SELECT a.*, coalesce(w.merged_files, 0) AS merged_files, coalesce(w.merged_files_verified, 0) AS merged_files_verified
    FROM a LEFT JOIN w USING (run_id, model)
)
SELECT j.*,
       CASE WHEN mismatched > 0 THEN 'mismatch'
            WHEN verified = 0 THEN 'unverified'
            WHEN merged_files > merged_files_verified THEN 'incomplete'
            ELSE 'holds' END AS verdict,
       mismatched = 0 AND verified > 0 AND merged_files = merged_files_verified AS holds
FROM j;
