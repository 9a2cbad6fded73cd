-- The nki lane: custom kernels against their references. Views defined here:
--   kernel_timing_stats  one row per (run, lane, kernel, shape set, implementation) of kernel_timings: n timed calls,
--                        mean, p50 / p90 / p99 (linear-interpolated, as every percentile here) with their 95% intervals
--                        from order statistics (the serving points' method, 12_serving_points.sql: ranks
--                        l = floor(n·p − z·sqrt(n·p·(1−p))), u = ceil(n·p + z·sqrt(n·p·(1−p))) + 1, a rank outside
--                        1..n leaves that side NULL), and the median's 97.5% interval (z = 2.2414) the speed-up uses.
--   report_kernels       one row per (run, lane, kernel, shape set): each stage's verdict — simulate and device: pass
--                        (every element within |got − want| <= max_abs + max_rel·|want|), fail, error, not run —, the
--                        compile's outcome, wall and classified error, the kernel's and the reference's p50, and the
--                        speed-up = reference p50 / kernel p50 where both were timed, with an interval of at least 95%
--                        (the ratio of the two medians' independent 97.5% intervals, outer ends: low = reference low /
--                        kernel high, high = reference high / kernel low); verdict: fail (a stage's numbers outside
--                        the tolerance) > error (a stage raised) > pass (simulated, compiled and matched on the device)
--                        > simulated only (the simulator passed, the device stages did not run) > not run.
--   report_kernel_verdicts  one row per (run, lane, kernel): shape sets, and how many of them had each verdict.
CREATE OR REPLACE VIEW kernel_timing_stats AS
WITH calls AS (
    SELECT run_id, lane, kernel, shape_index, implementation, unnest(latencies_us) AS us
    FROM kernel_timings
),
q AS (
    SELECT run_id, lane, kernel, shape_index, implementation, count(*) AS n, avg(us) AS mean_us,
           quantile_cont(us, [0.5, 0.9, 0.99]) AS q, list(us ORDER BY us) AS s
    FROM calls GROUP BY run_id, lane, kernel, shape_index, implementation
),
ranks AS (
    SELECT *,
           list_transform([0.5, 0.9, 0.99]::DOUBLE[],
                          lambda p: CAST(floor(n * p - 1.96 * sqrt(n * p * (1 - p))) AS BIGINT)) AS lo_rank,
           list_transform([0.5, 0.9, 0.99]::DOUBLE[],
                          lambda p: CAST(ceil(n * p + 1.96 * sqrt(n * p * (1 - p))) AS BIGINT) + 1) AS hi_rank,
           CAST(floor(n * 0.5 - 2.2414 * sqrt(n * 0.25)) AS BIGINT) AS lo_rank_975,
           CAST(ceil(n * 0.5 + 2.2414 * sqrt(n * 0.25)) AS BIGINT) + 1 AS hi_rank_975
    FROM q
)
SELECT t.run_id, t.lane, t.kernel, t.kernel_function, t.shape_index, t.shape, t.dtypes, t.implementation, t.op,
       coalesce(r.n, 0) AS n, t.warmup, r.mean_us,
       r.q[1] AS p50_us, r.q[2] AS p90_us, r.q[3] AS p99_us,
       CASE WHEN r.lo_rank[1] BETWEEN 1 AND r.n THEN r.s[r.lo_rank[1]] END AS p50_low_us,
       CASE WHEN r.hi_rank[1] BETWEEN 1 AND r.n THEN r.s[r.hi_rank[1]] END AS p50_high_us,
       CASE WHEN r.lo_rank[2] BETWEEN 1 AND r.n THEN r.s[r.lo_rank[2]] END AS p90_low_us,
       CASE WHEN r.hi_rank[2] BETWEEN 1 AND r.n THEN r.s[r.hi_rank[2]] END AS p90_high_us,
       CASE WHEN r.lo_rank[3] BETWEEN 1 AND r.n THEN r.s[r.lo_rank[3]] END AS p99_low_us,
       CASE WHEN r.hi_rank[3] BETWEEN 1 AND r.n THEN r.s[r.hi_rank[3]] END AS p99_high_us,
       CASE WHEN r.lo_rank_975 BETWEEN 1 AND r.n THEN r.s[r.lo_rank_975] END AS p50_low_975_us,
       CASE WHEN r.hi_rank_975 BETWEEN 1 AND r.n THEN r.s[r.hi_rank_975] END AS p50_high_975_us,
       t.timing_method, t.not_run_reason, t.device, t.backend
FROM kernel_timings t
LEFT JOIN ranks r USING (run_id, lane, kernel, shape_index, implementation);

CREATE OR REPLACE VIEW report_kernels AS
WITH c AS (
    SELECT *,
           CASE WHEN outcome = 'ok' AND stage IN ('simulate', 'device') AND outside_tolerance = 0 THEN 'pass'
                WHEN outcome = 'ok' AND stage IN ('simulate', 'device') AND outside_tolerance > 0 THEN 'fail'
                WHEN outcome = 'ok' THEN 'pass'
                WHEN outcome = 'error' THEN 'error'
                WHEN outcome = 'not_run' THEN 'not run' END AS stage_verdict
    FROM kernel_checks
),
shapes AS (
    SELECT run_id, lane, kernel, shape_index,
           any_value(shape) AS shape, any_value(dtypes) AS dtypes, any_value(kernel_function) AS kernel_function,
           any_value(kernel_file) AS kernel_file, any_value(reference) AS reference,
           any_value(tol_max_abs) AS tol_max_abs, any_value(tol_max_rel) AS tol_max_rel,
           any_value(nki_version) AS nki_version, any_value(backend) AS backend,
           any_value(stage_verdict) FILTER (WHERE stage = 'simulate') AS simulate,
           any_value(max_abs_err) FILTER (WHERE stage = 'simulate') AS simulate_max_abs_err,
           any_value(max_rel_err) FILTER (WHERE stage = 'simulate') AS simulate_max_rel_err,
           any_value(outside_tolerance) FILTER (WHERE stage = 'simulate') AS simulate_outside_tolerance,
           any_value(elements) FILTER (WHERE stage = 'simulate') AS simulate_elements,
           any_value(wall_s) FILTER (WHERE stage = 'simulate') AS simulate_wall_s,
           any_value(stage_verdict) FILTER (WHERE stage = 'compile') AS compile,
           any_value(wall_s) FILTER (WHERE stage = 'compile') AS compile_wall_s,
           any_value(stage_verdict) FILTER (WHERE stage = 'device') AS device,
           any_value(max_abs_err) FILTER (WHERE stage = 'device') AS device_max_abs_err,
           any_value(max_rel_err) FILTER (WHERE stage = 'device') AS device_max_rel_err,
           bool_or(stage_verdict = 'fail') AS any_fail,
           bool_or(stage_verdict = 'error') AS any_error,
           -- the first stage that raised, in stage order: its class, code and verbatim error
           first(stage ORDER BY CASE stage WHEN 'simulate' THEN 1 WHEN 'compile' THEN 2 ELSE 3 END)
               FILTER (WHERE outcome = 'error') AS error_stage,
           first(error_class ORDER BY CASE stage WHEN 'simulate' THEN 1 WHEN 'compile' THEN 2 ELSE 3 END)
               FILTER (WHERE outcome = 'error') AS error_class,
           first(error_code ORDER BY CASE stage WHEN 'simulate' THEN 1 WHEN 'compile' THEN 2 ELSE 3 END)
               FILTER (WHERE outcome = 'error') AS error_code,
           first(error ORDER BY CASE stage WHEN 'simulate' THEN 1 WHEN 'compile' THEN 2 ELSE 3 END)
               FILTER (WHERE outcome = 'error') AS error,
           first(not_run_reason ORDER BY CASE stage WHEN 'simulate' THEN 1 WHEN 'compile' THEN 2 ELSE 3 END)
               FILTER (WHERE outcome = 'not_run') AS not_run_reason
    FROM c GROUP BY run_id, lane, kernel, shape_index
)
SELECT s.run_id, s.lane, s.kernel, s.kernel_function, s.kernel_file, s.shape_index, s.shape, s.dtypes, s.reference,
       s.tol_max_abs, s.tol_max_rel, s.nki_version, s.backend,
       s.simulate, s.simulate_max_abs_err, s.simulate_max_rel_err, s.simulate_outside_tolerance, s.simulate_elements,
       s.simulate_wall_s, s.compile, s.compile_wall_s, s.device, s.device_max_abs_err, s.device_max_rel_err,
       s.error_stage, s.error_class, s.error_code, s.error, s.not_run_reason,
       k.n AS kernel_n, k.p50_us AS kernel_p50_us, k.p50_low_us AS kernel_p50_low_us,
       k.p50_high_us AS kernel_p50_high_us, k.p99_us AS kernel_p99_us,
       r.op AS reference_op, r.n AS reference_n, r.p50_us AS reference_p50_us, r.p50_low_us AS reference_p50_low_us,
       r.p50_high_us AS reference_p50_high_us, r.p99_us AS reference_p99_us,
       r.p50_us / NULLIF(k.p50_us, 0) AS speedup,
       r.p50_low_975_us / NULLIF(k.p50_high_975_us, 0) AS speedup_low,
       r.p50_high_975_us / NULLIF(k.p50_low_975_us, 0) AS speedup_high,
       coalesce(k.not_run_reason, r.not_run_reason) AS timing_not_run_reason,
       CASE WHEN s.any_fail THEN 'fail'
            WHEN s.any_error THEN 'error'
            WHEN s.simulate = 'pass' AND s.compile = 'pass' AND s.device = 'pass' THEN 'pass'
            WHEN s.simulate = 'pass' AND coalesce(s.compile, 'not run') = 'not run' THEN 'simulated only'
            ELSE 'not run' END AS verdict
FROM shapes s
LEFT JOIN kernel_timing_stats k
       ON k.run_id = s.run_id AND k.lane = s.lane AND k.kernel = s.kernel AND k.shape_index = s.shape_index
      AND k.implementation = 'kernel'
LEFT JOIN kernel_timing_stats r
       ON r.run_id = s.run_id AND r.lane = s.lane AND r.kernel = s.kernel AND r.shape_index = s.shape_index
      AND r.implementation = 'reference';

CREATE OR REPLACE VIEW report_kernel_verdicts AS
SELECT run_id, lane, kernel, any_value(kernel_file) AS kernel_file, count(*) AS shape_sets,
       count(*) FILTER (WHERE verdict = 'pass') AS passed,
       count(*) FILTER (WHERE verdict = 'simulated only') AS simulated_only,
       count(*) FILTER (WHERE verdict = 'fail') AS failed,
       count(*) FILTER (WHERE verdict = 'error') AS errors,
       count(*) FILTER (WHERE verdict = 'not run') AS not_run,
       CASE WHEN count(*) FILTER (WHERE verdict = 'fail') > 0 THEN 'fail'
            WHEN count(*) FILTER (WHERE verdict = 'error') > 0 THEN 'error'
            WHEN count(*) FILTER (WHERE verdict = 'pass') = count(*) THEN 'pass'
            WHEN count(*) FILTER (WHERE verdict IN ('pass', 'simulated only')) = count(*) THEN 'simulated only'
            ELSE 'not run' END AS verdict
FROM report_kernels
GROUP BY run_id, lane, kernel;
