-- Report-side views. Views defined here:
--   report_lane_attempts  every committed attempt of every lane, with `effective` = the attempt readers see and
--                         `imported_from` = the source an imported attempt came from (NULL: run by this pipeline).
--   report_exclusions     every failure and exclusion, one row each: (run_id, lane, attempt, kind, subject, reason).
--     kinds: lane_failed, lane_skipped (not-applicable skips; resume skips are not exclusions),
--            compile_failed (a failed boot outside a limits search: a search's failed probes bracket its limit and
--            stand in report_limits), point_without_telemetry, point_invalid (12_serving_points' serving_points.valid),
--            hash_mismatch, precompile_loss_recorded,
--            numerics_excluded (an encoder's outputs NaN or diverged from the CPU fp32 reference: never timed),
--            export_refused / compile_failed (an encoder's placement refused by its exporter or compiler, verbatim;
--            an export_refused whose torch_neuronx.trace fallback was placed says so after the exporter's words).
CREATE OR REPLACE VIEW report_lane_attempts AS
WITH latest AS (
    SELECT run_id, lane, max(attempt) FILTER (WHERE supersedes) AS effective_attempt
    FROM lane_runs GROUP BY run_id, lane
)
SELECT l.run_id, l.lane, l.attempt, l.status, l.skip_reason, l.supersedes,
       l.attempt = latest.effective_attempt AS effective,
       l.started_at, l.ended_at,
       coalesce(l.wall_s, epoch(l.ended_at) - epoch(l.started_at)) AS wall_s,
       l.error_type, l.error_message, l.backend, l.host, l.box_role, l.instance_type, l.profile,
       l.forced, l.telemetry_samples,
       json_extract_string(l.config_json, '$.imported.source') AS imported_from  -- NULL: run by this pipeline
FROM lane_runs l
JOIN latest USING (run_id, lane);

CREATE OR REPLACE VIEW report_exclusions AS
SELECT run_id, lane, attempt, 'lane_failed' AS kind, lane AS subject,
       coalesce(error_type, 'error') || ': ' || coalesce(error_message, '(no message)')
         || CASE WHEN effective THEN '' ELSE ' [superseded by a later attempt]' END AS reason
FROM report_lane_attempts WHERE status = 'failed'
UNION ALL
SELECT run_id, lane, attempt, 'lane_skipped', lane, coalesce(skip_reason, '(no reason given)')
FROM report_lane_attempts WHERE status = 'skipped' AND supersedes
UNION ALL
SELECT run_id, lane, attempt, 'compile_failed',
       what || ' ' || coalesce(model, '?') || ' ' || coalesce(config, '') || ' (' || cache || ')',
       coalesce(error, '(no message)')
FROM compiles c WHERE NOT succeeded
  -- a limits search's probe that failed brackets the limit: the search's result (report_limits), not an exclusion
  AND NOT EXISTS (SELECT 1 FROM limit_probes p WHERE p.run_id = c.run_id AND p.lane = c.lane)
UNION ALL
SELECT run_id, lane, attempt, 'point_without_telemetry', point_id,
       CASE WHEN EXISTS (SELECT 1 FROM reference_runs r
                         WHERE r.run_id = t.run_id AND r.lane = t.lane AND r.point_id = t.point_id)
            THEN 'imported reference (neuronpipe import vllm-bench): measured elsewhere with no telemetry of ours, '
                 || 'so kept out of the serving tables; it stands in the Decision table, labelled as a reference'
            WHEN telemetry_rows > 0
            THEN 'no telemetry sample with a value inside the point''s window (' || telemetry_rows
                 || ' samples, all NULL): dropped from headline tables'
            ELSE 'no telemetry sample inside the point''s window: dropped from headline tables' END
FROM report_point_telemetry t WHERE telemetry_samples = 0
UNION ALL
SELECT s.run_id, s.lane, a.attempt, 'point_invalid', s.point_id, coalesce(s.invalid_reason, 'flagged invalid')
FROM serving_points s
LEFT JOIN report_lane_attempts a ON a.run_id = s.run_id AND a.lane = s.lane AND a.effective
WHERE NOT s.valid
UNION ALL
SELECT run_id, lane, attempt, 'hash_mismatch', coalesce(model, '?') || ':' || path,
       kind || coalesce(' at ' || stage, '') || ': sha256 ' || coalesce(sha256, 'NULL')
         || ' != expected ' || coalesce(expected_sha256, 'NULL')
FROM artifacts WHERE roundtrip_verified = false
UNION ALL
SELECT run_id, lane, attempt, 'precompile_loss_recorded', model,
       count(*) || ' loss values from a precompile run (its numerics are garbage by design)'
FROM train_steps WHERE lane = 'precompile' AND loss IS NOT NULL
GROUP BY run_id, lane, attempt, model
UNION ALL
SELECT run_id, lane, attempt, 'numerics_excluded',
       model || ' on ' || coalesce(backend, '?') || ' (' || workload || ', ' || shape || ' ' || shape_unit
         || ', batch ' || batch_size || ')',
       verdict || ' against ' || coalesce(reference, 'the reference') || ': ' || coalesce(reason, '(no evidence)')
FROM encode_numerics WHERE verdict <> 'pass'
UNION ALL
SELECT run_id, lane, attempt, status,
       model || ' on ' || coalesce(backend, '?') || ' (' || workload || ', ' || coalesce(shape || ' ' || shape_unit, '?')
         || coalesce(', batch ' || batch_size, '') || ')',
       coalesce(reason, '(no message)')
FROM encode_models WHERE status <> 'ok'
UNION ALL
SELECT run_id, lane, attempt, 'export_refused',
       model || ' on ' || coalesce(backend, '?') || ' (' || workload || ', ' || coalesce(shape || ' ' || shape_unit, '?')
         || coalesce(', batch ' || batch_size, '') || ')',
       reason || ' (placed by ' || coalesce(exporter, '?') || ' instead)'
FROM encode_models WHERE status = 'ok' AND reason IS NOT NULL;

-- rule 15, one validity rule: a point is kept in every table (serving, Decision, capacity) when it has a
-- telemetry sample with a value inside its window (rule 7) and is not flagged invalid (serving_points.valid);
-- an imported reference (reference_runs) has no telemetry of ours and stands in the Decision labelled as one.
-- excluded_reason: NULL when kept, else the reason report_exclusions lists for it.
CREATE OR REPLACE VIEW report_point_validity AS
SELECT t.run_id, t.lane, t.point_id, t.telemetry_samples, s.valid,
       t.telemetry_samples > 0 AND s.valid IS NOT FALSE AS headline,
       CASE WHEN t.telemetry_samples = 0 THEN 'no telemetry sample inside the point''s window'
            WHEN s.valid IS FALSE THEN 'invalid: ' || coalesce(s.invalid_reason, 'flagged invalid') END
           AS excluded_reason
FROM report_point_telemetry t
LEFT JOIN serving_points s USING (run_id, lane, point_id);
