-- Report-side views (issue 6). Views defined here:
--   report_compile   one row per (run, lane, what, model, config): cold vs warm compile wall time side by side.
-- Compile time is a result (RULES.md 3): cold and warm are both reported, before any throughput.
CREATE OR REPLACE VIEW report_compile AS
SELECT
    run_id, lane, what, model, config, backend,
    count(*) FILTER (WHERE cache = 'cold' AND succeeded)               AS n_cold,
    median(wall_s) FILTER (WHERE cache = 'cold' AND succeeded)         AS cold_wall_s,
    count(*) FILTER (WHERE cache = 'warm' AND succeeded)               AS n_warm,
    median(wall_s) FILTER (WHERE cache = 'warm' AND succeeded)         AS warm_wall_s,
    count(*) FILTER (WHERE cache = 'none' AND succeeded)               AS n_uncached,
    median(wall_s) FILTER (WHERE cache = 'none' AND succeeded)         AS uncached_wall_s,
    median(wall_s) FILTER (WHERE cache = 'warm' AND succeeded)
        / nullif(median(wall_s) FILTER (WHERE cache = 'cold' AND succeeded), 0) AS warm_over_cold,
    sum(new_artifacts) FILTER (WHERE cache = 'cold')                   AS cold_new_artifacts,
    sum(new_artifacts) FILTER (WHERE cache = 'warm')                   AS warm_new_artifacts,
    min(cache_bytes_before)                                            AS cache_bytes_before,
    max(cache_bytes_after)                                             AS cache_bytes_after,
    count(*) FILTER (WHERE NOT succeeded)                              AS n_failed
FROM compiles
GROUP BY run_id, lane, what, model, config, backend;
