-- Report-side views. Views defined here:
--   report_compile           one row per (run, lane, what, model, config): cold vs warm compile wall time side by
--                            side, over each lane's effective attempt; cache_scopes / cache_bases say which cache the
--                            labels speak of and whether observed or inferred; n_superseded_cold and
--                            superseded_cold_wall_s count the cold compiles of superseded attempts (the time was spent).
--   report_compile_attempts  every compile of every committed attempt (compiles_every_attempt), superseded ones
--                            included and marked `superseded`.
-- Compile time is a result (rule 3): cold and warm are both reported, before any throughput.
-- compiles_every_attempt is registered by analytics.views.register_tables; a connection built otherwise (the
-- load generator's, a mirror's DuckDB file) gets the visible rows instead.
CREATE VIEW IF NOT EXISTS compiles_every_attempt AS SELECT * FROM compiles;

CREATE OR REPLACE VIEW report_compile_attempts AS
WITH latest AS (
    SELECT run_id, lane, max(attempt) FILTER (WHERE supersedes) AS effective_attempt
    FROM lane_runs GROUP BY run_id, lane
)
SELECT c.run_id, c.lane, c.attempt, c.what, c.model, c.config, c.backend, c.cache, c.cache_scope, c.cache_basis,
       c.wall_s, c.new_artifacts, c.cache_bytes_before, c.cache_bytes_after, c.succeeded, c.error, c.ts,
       c.attempt IS DISTINCT FROM l.effective_attempt AS superseded
FROM compiles_every_attempt c
LEFT JOIN latest l USING (run_id, lane);

CREATE OR REPLACE VIEW report_compile AS
WITH effective AS (
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
        count(*) FILTER (WHERE NOT succeeded)                              AS n_failed,
        string_agg(DISTINCT cache_scope, ', ' ORDER BY cache_scope)        AS cache_scopes,
        string_agg(DISTINCT cache_basis, ', ' ORDER BY cache_basis)        AS cache_bases
    FROM compiles
    GROUP BY run_id, lane, what, model, config, backend
),
superseded AS (
    SELECT run_id, lane, what, model, config, backend,
           count(*) FILTER (WHERE cache = 'cold' AND succeeded)       AS n_superseded_cold,
           median(wall_s) FILTER (WHERE cache = 'cold' AND succeeded) AS superseded_cold_wall_s
    FROM report_compile_attempts WHERE superseded
    GROUP BY run_id, lane, what, model, config, backend
)
SELECT e.*, coalesce(s.n_superseded_cold, 0) AS n_superseded_cold, s.superseded_cold_wall_s
FROM effective e
LEFT JOIN superseded s ON s.run_id = e.run_id AND s.lane = e.lane AND s.what = e.what
 AND s.model IS NOT DISTINCT FROM e.model AND s.config IS NOT DISTINCT FROM e.config
 AND s.backend IS NOT DISTINCT FROM e.backend;
