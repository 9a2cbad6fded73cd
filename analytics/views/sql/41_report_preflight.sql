-- The preflight gate: the box's environment checked before compute is spent. Views defined here:
--   preflight_summary  one row per (run, box role, lane attempt) of the preflight lane: checks run, passed, failed,
--                      skipped (a status other than pass | fail | skip counts under checks only), and the failed
--                      checks' names in order. The failed checks' verbatim reasons are preflight_checks rows.
CREATE OR REPLACE VIEW preflight_summary AS
SELECT run_id, lane, attempt,
       coalesce(box_role, nullif(split_part(lane, '@', 2), '')) AS box_role,
       count(*)                                                   AS checks,
       count(*) FILTER (WHERE status = 'pass')                    AS passed,
       count(*) FILTER (WHERE status = 'fail')                    AS failed,
       count(*) FILTER (WHERE status = 'skip')                    AS skipped,
       string_agg("check", ', ' ORDER BY "check") FILTER (WHERE status = 'fail') AS failed_checks,
       sum(duration_s)                                            AS duration_s,
       min(ts)                                                    AS first_ts,
       max(ts)                                                    AS last_ts
FROM preflight_checks
GROUP BY run_id, lane, attempt, coalesce(box_role, nullif(split_part(lane, '@', 2), ''));
