-- Report-side views: the server configs a run booted, for the Variants section. Views defined here:
--   report_server_configs  one row per (run, lane, model, config) that booted: what the config sets
--                          (compiles.config_json: base, fingerprint, lengths, tensor parallel, KV dtype, prefix
--                          caching, speculative, env, extra args), its boots (cold / warm / uncached, median wall
--                          time, failures) and the KV its grid declares at the grid's limit (grid_json of its
--                          points: bytes per token x max_model_len x the limit of resident sequences), and the
--                          quantized checkpoint its lane prepared before the boot (quantizations: method, wall
--                          seconds, weight bytes before and after; NULL for a config that serves no prepared one).
-- A config without config_json (measured before variants were recorded, or imported) has NULL there.
CREATE OR REPLACE VIEW report_server_configs AS
WITH boots AS (
    SELECT run_id, lane, model, config,
           max(config_json) FILTER (WHERE config_json IS NOT NULL)            AS config_json,
           max(config_fingerprint) FILTER (WHERE config_fingerprint IS NOT NULL) AS fingerprint,
           count(*)                                                           AS boots,
           count(*) FILTER (WHERE NOT succeeded)                              AS failed_boots,
           median(wall_s) FILTER (WHERE cache = 'cold' AND succeeded)         AS cold_boot_s,
           median(wall_s) FILTER (WHERE cache = 'warm' AND succeeded)         AS warm_boot_s,
           median(wall_s) FILTER (WHERE cache = 'none' AND succeeded)         AS uncached_boot_s,
           max(error) FILTER (WHERE NOT succeeded)                            AS boot_error
    FROM compiles WHERE what = 'serving_config'
    GROUP BY run_id, lane, model, config
),
grids AS (
    -- a multi-tenant variant's points are NAME.alone and NAME.t<i>: its grid is NAME's
    SELECT run_id, lane, model, regexp_replace(server_config, '\.(alone|t[0-9]+)$', '') AS config,
           max(CAST(json_extract(grid_json, '$.kv_bytes_per_token') AS BIGINT)) AS kv_bytes_per_token,
           max(CAST(json_extract(grid_json, '$.limit') AS BIGINT))              AS grid_limit,
           max(CAST(json_extract(grid_json, '$.max_model_len') AS BIGINT))      AS max_model_len,
           max(CAST(json_extract(grid_json, '$.free_kv_bytes') AS BIGINT))      AS free_kv_bytes,
           count(*)                                                             AS points
    FROM sweep_points WHERE grid_json IS NOT NULL
    GROUP BY ALL
),
prepared AS (  -- a boot that found the checkpoint already prepared (reused) adds no preparation time
    SELECT run_id, lane, model, config,
           max(method)                                              AS quantization,
           max(wall_s) FILTER (WHERE succeeded AND NOT reused)       AS quantize_s,
           max(source_bytes)                                         AS source_weight_bytes,
           max(bytes) FILTER (WHERE succeeded)                       AS quantized_weight_bytes,
           max(error) FILTER (WHERE NOT succeeded)                   AS quantize_error
    FROM quantizations
    GROUP BY ALL
)
SELECT b.run_id, b.lane, b.model, b.config,
       json_extract_string(b.config_json, '$.base') AS base,
       b.fingerprint, b.config_json, b.boots, b.failed_boots, b.cold_boot_s, b.warm_boot_s, b.uncached_boot_s,
       b.boot_error, g.points, g.kv_bytes_per_token, g.grid_limit, g.max_model_len,
       g.kv_bytes_per_token * g.max_model_len * g.grid_limit / 1073741824.0 AS kv_gib_at_limit,
       g.free_kv_bytes / 1073741824.0 AS free_kv_gib,
       q.quantization, q.quantize_s, q.source_weight_bytes, q.quantized_weight_bytes, q.quantize_error
FROM boots b
LEFT JOIN grids g USING (run_id, lane, model, config)
LEFT JOIN prepared q USING (run_id, lane, model, config);
