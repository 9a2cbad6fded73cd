-- A run against its baseline (docs/reference/history.md; docs/reference/metrics.md "Since the baseline").
-- CREATE OR REPLACE VIEW statements only. Reads the baseline_verdicts table (the control plane's judgement at
-- finalize: compare's per-row verdicts and the family-wise rule's findings, control_plane.history). Views defined here:
--   report_baseline          one row per headline the run shares with its baseline: both values, the change with
--                            its interval, compare's floor, the family-wise floor, the verdict and the finding
--   report_baseline_summary  per run: its baseline, the outcome, the run-level shift with its interval and floor,
--                            and the points found faster, slower, within noise, untested and local (moved on their
--                            own; a point counts once, whatever number of its rows moved)
CREATE OR REPLACE VIEW report_baseline AS
SELECT run_id, request_fingerprint, instance_type, baseline_spec, baseline_runs, point, family, metric, better,
       baseline_value, value, pct, ci_low_pct, ci_high_pct, unit, floor_pct, familywise_floor_pct, verdict, finding,
       point_finding, outcome, findings_tested, run_shift_pct, run_shift_ci_low_pct, run_shift_ci_high_pct,
       run_floor_pct, run_finding, note, judged_at
FROM baseline_verdicts;

CREATE OR REPLACE VIEW report_baseline_summary AS
WITH points AS (
    SELECT run_id, point, any_value(point_finding) AS point_finding
    FROM baseline_verdicts GROUP BY run_id, point
),
counts AS (
    SELECT run_id,
           count(*) FILTER (WHERE point_finding = 'faster') AS faster,
           count(*) FILTER (WHERE point_finding = 'slower') AS slower,
           count(*) FILTER (WHERE point_finding = 'within noise') AS within_noise,
           count(*) FILTER (WHERE point_finding = 'untested') AS untested,
           count(*) FILTER (WHERE point_finding LIKE 'local %') AS local
    FROM points GROUP BY run_id
)
SELECT b.run_id, any_value(b.request_fingerprint) AS request_fingerprint, any_value(b.instance_type) AS instance_type,
       any_value(b.baseline_spec) AS baseline_spec, any_value(b.baseline_runs) AS baseline_runs,
       any_value(b.outcome) AS outcome, any_value(b.findings_tested) AS findings_tested,
       any_value(c.faster) AS faster, any_value(c.slower) AS slower, any_value(c.within_noise) AS within_noise,
       any_value(c.untested) AS untested, any_value(c.local) AS local, any_value(b.run_shift_pct) AS run_shift_pct,
       any_value(b.run_shift_ci_low_pct) AS run_shift_ci_low_pct,
       any_value(b.run_shift_ci_high_pct) AS run_shift_ci_high_pct, any_value(b.run_floor_pct) AS run_floor_pct,
       any_value(b.run_finding) AS run_finding, count(*) AS rows_compared, max(b.judged_at) AS judged_at
FROM baseline_verdicts b JOIN counts c USING (run_id)
GROUP BY b.run_id;
