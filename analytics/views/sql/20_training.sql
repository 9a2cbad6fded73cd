-- Training-side derived views (owned by the training lanes). CREATE OR REPLACE VIEW statements only.
--
-- train_loss_trend   one row per (run, lane, model): loss over the first and last quarter of the steps and
--                    whether it fell (precompile never writes train_steps: rule 4)
-- weights_roundtrip  one row per (run, model, file): SHA-256 after the merge beside the copy on the serving
--                    side; "the model served is the model trained" holds per file when verified is true

CREATE OR REPLACE VIEW train_loss_trend AS
WITH s AS (
    SELECT run_id, lane, model, step, loss,
           count(*) OVER (PARTITION BY run_id, lane, model) AS n,
           row_number() OVER (PARTITION BY run_id, lane, model ORDER BY step) AS k
    FROM train_steps
    WHERE loss IS NOT NULL
)
SELECT run_id, lane, model,
       max(n) AS loss_steps,
       avg(loss) FILTER (WHERE k <= greatest(1, n // 4)) AS loss_first_quarter,
       avg(loss) FILTER (WHERE k > n - greatest(1, n // 4)) AS loss_last_quarter,
       avg(loss) FILTER (WHERE k > n - greatest(1, n // 4))
         < avg(loss) FILTER (WHERE k <= greatest(1, n // 4)) AS loss_fell
FROM s
GROUP BY run_id, lane, model;

CREATE OR REPLACE VIEW weights_roundtrip AS
SELECT m.run_id, m.model, m.path, m.bytes, m.sha256 AS sha256_after_merge,
       c.run_id AS copy_run_id, c.lane AS copy_lane, c.sha256 AS sha256_after_copy,
       c.roundtrip_verified AS verified
FROM artifacts m
LEFT JOIN artifacts c
  ON c.stage = 'after_copy' AND c.kind = 'merged' AND c.model = m.model AND c.path = m.path
 AND c.expected_sha256 = m.sha256
WHERE m.stage = 'after_merge' AND m.kind = 'merged' AND m.lane = 'merge';
