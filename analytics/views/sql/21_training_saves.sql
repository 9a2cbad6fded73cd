-- Checkpoint cost (owned by the training lanes). CREATE OR REPLACE VIEW statements only.
--
-- report_train_saves  one row per (run, lane, model) that saved mid-run: how many saves, their median and total
--                     seconds, bytes per save, the kinds written, and the share of the training loop's wall time
--                     the saves took (summed save_s / train_runs.train_loop_s; NULL when the loop's time is not
--                     recorded)
CREATE OR REPLACE VIEW report_train_saves AS
WITH s AS (
    SELECT run_id, lane, model,
           count(*)                                   AS saves,
           median(save_s)                             AS median_save_s,
           max(save_s)                                AS max_save_s,
           sum(save_s)                                AS total_save_s,
           avg(bytes) / 1e6                           AS mb_per_save,
           count(bytes)                               AS saves_with_bytes,
           string_agg(DISTINCT kind, ', ' ORDER BY kind) AS kinds,
           min(step)                                  AS first_save_step,
           max(step)                                  AS last_save_step
    FROM train_saves
    GROUP BY run_id, lane, model
),
r AS (
    SELECT run_id, lane, model, max(train_loop_s) AS train_loop_s
    FROM train_runs
    GROUP BY run_id, lane, model
)
SELECT s.run_id, s.lane, s.model, s.saves, s.first_save_step, s.last_save_step, s.median_save_s, s.max_save_s,
       s.total_save_s, s.mb_per_save, s.saves_with_bytes, s.kinds, r.train_loop_s,
       s.total_save_s / nullif(r.train_loop_s, 0) AS save_share
FROM s
LEFT JOIN r USING (run_id, lane, model);
