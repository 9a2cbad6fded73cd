-- Cold start as a result: from "start the box" to the first token, per box boot. Views defined here:
--   box_boot_serving    every serving boot (compiles.what = 'serving_config') matched to the box boot it ran in: same
--                       run and box role (lane_runs.box_role, else the `@box` of a both-box lane's name), the same
--                       instance where both rows name one, started at or after the boot's anchor (cache_seeded_at,
--                       else the latest earlier mark), before the box's next boot (its kernel boot, else its earliest
--                       mark: a sandboxed box has no kernel boot of its own) and before the boot's row was written
--                       (box_boots.ts, the segment's end). serving_order 1 = the boot's first successful one.
--   cold_start          one row per box boot: the phases instance start (start_requested_at -> kernel_boot_at), OS
--                       setup (-> boot_done_at), agent registered (-> sync_started_at), harness synced, cache seeded,
--                       server healthy (-> the first successful serving boot's ts + wall_s) and first token (-> the
--                       first successful request on that box sent after it: sent_at + ttft_s), and the total from
--                       start_requested_at to that first token. A phase is NULL when either end is missing (locally
--                       there is no instance start: NULL, never 0); `missing` names the absent marks.
--   boot_compile_cache  one row per box boot: what the shared S3 compile cache moved (entries fetched vs already
--                       present, bytes, seconds; the push at the segment's end) and the cache labels of the serving
--                       boots that ran on it.
CREATE OR REPLACE VIEW box_boot_serving AS
WITH boots AS (
    SELECT b.run_id, b.lane, b.attempt, b.box_role, b.segment, b.instance_id, b.boot_id, b.kernel_boot_at,
           b.ts AS row_written_at,
           coalesce(b.cache_seeded_at, b.harness_synced_at, b.sync_started_at, b.boot_done_at, b.kernel_boot_at)
               AS anchor_at,
           (SELECT min(coalesce(n.kernel_boot_at, n.start_requested_at, n.boot_done_at, n.sync_started_at))
            FROM box_boots n
            WHERE n.run_id = b.run_id AND n.box_role IS NOT DISTINCT FROM b.box_role
              AND coalesce(n.kernel_boot_at, n.start_requested_at, n.boot_done_at, n.sync_started_at)
                  > coalesce(b.kernel_boot_at, b.start_requested_at, b.boot_done_at, b.sync_started_at))
               AS next_boot_at
    FROM box_boots b
),
serving AS (
    SELECT c.run_id, c.lane AS serving_lane, c.attempt AS serving_attempt, c.model, c.config, c.cache, c.cache_scope,
           c.cache_basis, c.succeeded, c.wall_s, c.ts AS boot_started_at,
           c.ts + to_microseconds(CAST(round(c.wall_s * 1e6) AS BIGINT)) AS healthy_at,
           coalesce(l.box_role, nullif(split_part(c.lane, '@', 2), '')) AS box_role, l.instance_id
    FROM compiles c
    LEFT JOIN lane_runs l ON l.run_id = c.run_id AND l.lane = c.lane AND l.attempt = c.attempt
    WHERE c.what = 'serving_config' AND c.ts IS NOT NULL
)
SELECT b.run_id, b.lane, b.attempt, b.boot_id, b.segment, b.box_role,
       s.serving_lane, s.serving_attempt, s.model, s.config, s.cache, s.cache_scope, s.cache_basis, s.succeeded,
       s.wall_s, s.boot_started_at, s.healthy_at, b.next_boot_at,
       CASE WHEN s.succeeded AND s.wall_s IS NOT NULL
            THEN row_number() OVER (PARTITION BY b.run_id, b.lane, b.attempt, b.boot_id,
                                                 s.succeeded AND s.wall_s IS NOT NULL
                                    ORDER BY s.boot_started_at, s.serving_lane, s.config, s.model) END
           AS serving_order
FROM boots b
JOIN serving s
  ON s.run_id = b.run_id AND s.box_role = b.box_role
 AND (s.instance_id IS NULL OR b.instance_id IS NULL OR s.instance_id = b.instance_id)
 AND s.boot_started_at >= b.anchor_at
 AND (b.next_boot_at IS NULL OR s.boot_started_at < b.next_boot_at)
 AND (b.row_written_at IS NULL OR s.boot_started_at <= b.row_written_at);

CREATE OR REPLACE VIEW cold_start AS
WITH first_serving AS (
    SELECT * FROM box_boot_serving WHERE serving_order = 1
),
box_requests AS (  -- successful requests with a first token, with the box their lane ran on
    SELECT r.run_id, r.lane, coalesce(l.box_role, nullif(split_part(r.lane, '@', 2), '')) AS box_role,
           l.instance_id, r.sent_at + to_microseconds(CAST(round(r.ttft_s * 1e6) AS BIGINT)) AS first_token_at
    FROM requests r
    LEFT JOIN lane_runs l ON l.run_id = r.run_id AND l.lane = r.lane AND l.attempt = r.attempt
    WHERE r.success AND r.ttft_s IS NOT NULL AND r.sent_at IS NOT NULL
),
first_token AS (
    SELECT f.run_id, f.lane, f.attempt, f.boot_id,
           arg_min(q.first_token_at, q.first_token_at) AS first_token_at,
           arg_min(q.lane, q.first_token_at)           AS first_token_lane
    FROM first_serving f
    JOIN box_boots b ON b.run_id = f.run_id AND b.lane = f.lane AND b.attempt = f.attempt
     AND b.boot_id IS NOT DISTINCT FROM f.boot_id
    JOIN box_requests q
      ON q.run_id = f.run_id AND q.box_role = f.box_role
     AND (q.instance_id IS NULL OR b.instance_id IS NULL OR q.instance_id = b.instance_id)
     AND q.first_token_at >= f.healthy_at
     AND (f.next_boot_at IS NULL OR q.first_token_at < f.next_boot_at)
     AND (b.ts IS NULL OR q.first_token_at <= b.ts)
    GROUP BY f.run_id, f.lane, f.attempt, f.boot_id
),
marks AS (
    SELECT b.run_id, b.lane, b.attempt, b.box_role, b.segment, b.instance_id, b.instance_type, b.boot_id,
           b.backend, b.start_requested_at, b.kernel_boot_at, b.boot_done_at, b.sync_started_at,
           b.harness_synced_at, b.cache_seeded_at,
           f.boot_started_at AS server_boot_at, f.healthy_at AS server_healthy_at, t.first_token_at,
           f.serving_lane, f.config AS serving_config, f.model AS serving_model, f.cache AS serving_cache,
           f.cache_basis AS serving_cache_basis, f.wall_s AS server_boot_s, t.first_token_lane
    FROM box_boots b
    LEFT JOIN first_serving f ON f.run_id = b.run_id AND f.lane = b.lane AND f.attempt = b.attempt
     AND f.boot_id IS NOT DISTINCT FROM b.boot_id
    LEFT JOIN first_token t ON t.run_id = b.run_id AND t.lane = b.lane AND t.attempt = b.attempt
     AND t.boot_id IS NOT DISTINCT FROM b.boot_id
)
SELECT m.*,
       (epoch_us(kernel_boot_at) - epoch_us(start_requested_at)) / 1e6     AS instance_start_s,
       (epoch_us(boot_done_at) - epoch_us(kernel_boot_at)) / 1e6           AS os_setup_s,
       (epoch_us(sync_started_at) - epoch_us(boot_done_at)) / 1e6          AS agent_registered_s,
       (epoch_us(harness_synced_at) - epoch_us(sync_started_at)) / 1e6     AS harness_sync_s,
       (epoch_us(cache_seeded_at) - epoch_us(harness_synced_at)) / 1e6     AS cache_seed_s,
       (epoch_us(server_healthy_at) - epoch_us(cache_seeded_at)) / 1e6     AS server_healthy_s,
       (epoch_us(first_token_at) - epoch_us(server_healthy_at)) / 1e6      AS first_token_s,
       (epoch_us(first_token_at) - epoch_us(start_requested_at)) / 1e6     AS total_s,
       (epoch_us(first_token_at) - epoch_us(start_requested_at)) / 6e7     AS total_min,
       nullif(concat_ws(', ',
           CASE WHEN start_requested_at IS NULL THEN 'start_requested_at' END,
           CASE WHEN kernel_boot_at IS NULL THEN 'kernel_boot_at' END,
           CASE WHEN boot_done_at IS NULL THEN 'boot_done_at' END,
           CASE WHEN sync_started_at IS NULL THEN 'sync_started_at' END,
           CASE WHEN harness_synced_at IS NULL THEN 'harness_synced_at' END,
           CASE WHEN cache_seeded_at IS NULL THEN 'cache_seeded_at' END,
           CASE WHEN server_healthy_at IS NULL THEN 'server healthy (no successful serving boot on this box boot)' END,
           CASE WHEN first_token_at IS NULL AND server_healthy_at IS NOT NULL
                THEN 'first token (no successful request on this box after the server was healthy)' END), '')
           AS missing
FROM marks m;

CREATE OR REPLACE VIEW boot_compile_cache AS
WITH labels AS (
    SELECT run_id, lane, attempt, boot_id, cache || '/' || coalesce(cache_basis, '?') AS label, count(*) AS n
    FROM box_boot_serving GROUP BY ALL
),
serving AS (
    SELECT s.run_id, s.lane, s.attempt, s.boot_id,
           count(*)                                                   AS serving_boots,
           count(*) FILTER (WHERE NOT s.succeeded)                    AS serving_boots_failed,
           count(*) FILTER (WHERE s.cache = 'cold')                   AS serving_cold,
           count(*) FILTER (WHERE s.cache = 'warm')                   AS serving_warm,
           count(*) FILTER (WHERE s.cache = 'none')                   AS serving_uncached,
           count(*) FILTER (WHERE s.cache_basis = 's3')               AS serving_from_s3,
           (SELECT string_agg(l.label || ' ×' || l.n, ', ' ORDER BY l.label) FROM labels l
            WHERE l.run_id = s.run_id AND l.lane = s.lane AND l.attempt = s.attempt
              AND l.boot_id IS NOT DISTINCT FROM s.boot_id)            AS serving_cache_labels
    FROM box_boot_serving s
    GROUP BY s.run_id, s.lane, s.attempt, s.boot_id
)
SELECT b.run_id, b.lane, b.attempt, b.box_role, b.segment, b.instance_id, b.boot_id, b.cache_uri,
       b.cache_namespace, b.seed_entries_fetched, b.seed_entries_present, b.seed_bytes_fetched, b.seed_s,
       b.push_entries, b.push_bytes, b.push_s,
       coalesce(s.serving_boots, 0) AS serving_boots, coalesce(s.serving_boots_failed, 0) AS serving_boots_failed,
       coalesce(s.serving_cold, 0) AS serving_cold, coalesce(s.serving_warm, 0) AS serving_warm,
       coalesce(s.serving_uncached, 0) AS serving_uncached, coalesce(s.serving_from_s3, 0) AS serving_from_s3,
       s.serving_cache_labels
FROM box_boots b
LEFT JOIN serving s ON s.run_id = b.run_id AND s.lane = b.lane AND s.attempt = b.attempt
 AND s.boot_id IS NOT DISTINCT FROM b.boot_id;
