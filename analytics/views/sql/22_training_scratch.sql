-- From-scratch training (owned by the from_scratch lane). CREATE OR REPLACE VIEW statements only.
--
-- scratch_epoch_metrics  one row per (run, lane, model, dataset, source, device, epoch): test accuracy
--                        (correct / test_samples) with its Wilson 95 % interval, mean train loss, the epoch's
--                        steady step time and samples/s (batch_size / steady_step_s)
-- report_scratch         one row per (run, lane, model, dataset, source, device): the last epoch's accuracy with its
--                        interval, the best epoch's, chance (1 / num_classes), first step apart from the steady median
--                        (first_step_excess_s: the first step's seconds above the steady median, XLA's compile on
--                        neuron), samples/s; reference rows carry the accuracy range their source states
CREATE OR REPLACE VIEW scratch_epoch_metrics AS
WITH e AS (
    SELECT e.run_id, e.lane, e.model, e.dataset, e.source, e.device, e.epoch, e.train_loss, e.correct,
           e.test_samples, e.epoch_s, e.train_steps, e.steady_step_s, r.batch_size,
           CAST(e.correct AS DOUBLE) AS c, CAST(e.test_samples AS DOUBLE) AS n
    FROM scratch_epochs e
    LEFT JOIN scratch_runs r USING (run_id, lane, model, dataset, source, device)
),
w AS (
    SELECT e.*,
           CASE WHEN n > 0 THEN (c + 1.959963984540054 ^ 2 / 2) / (n + 1.959963984540054 ^ 2) END AS wc,
           CASE WHEN n > 0 THEN 1.959963984540054 * sqrt(c * (n - c) / n + 1.959963984540054 ^ 2 / 4)
                                / (n + 1.959963984540054 ^ 2) END AS wh
    FROM e
)
SELECT run_id, lane, model, dataset, source, device, epoch, train_loss, correct, test_samples,
       CASE WHEN n > 0 THEN c / n END                 AS accuracy,
       -- greatest/least: rounding only (the Wilson bounds lie in [0, 1]); NULL without a scored image
       CASE WHEN n > 0 THEN greatest(0.0, wc - wh) END AS accuracy_ci_low,
       CASE WHEN n > 0 THEN least(1.0, wc + wh) END    AS accuracy_ci_high,
       epoch_s, train_steps, steady_step_s,
       batch_size / nullif(steady_step_s, 0)          AS samples_per_s
FROM w;

CREATE OR REPLACE VIEW report_scratch AS
WITH last AS (
    SELECT * FROM scratch_epoch_metrics
    QUALIFY row_number() OVER (PARTITION BY run_id, lane, model, dataset, source, device ORDER BY epoch DESC) = 1
),
best AS (
    SELECT run_id, lane, model, dataset, source, device,
           max(accuracy) AS best_accuracy, arg_max(epoch, accuracy) AS best_epoch, count(*) AS epochs_recorded
    FROM scratch_epoch_metrics
    GROUP BY run_id, lane, model, dataset, source, device
)
SELECT r.run_id, r.lane, r.model, r.dataset, r.source, r.source_note, r.backend, r.device, r.image_shape,
       r.num_classes, r.train_samples, r.test_samples, r.params, r.epochs, r.batch_size, r.learning_rate, r.steps,
       r.warmup_steps, b.epochs_recorded,
       l.accuracy, l.accuracy_ci_low, l.accuracy_ci_high, l.train_loss AS final_train_loss,
       b.best_accuracy, b.best_epoch,
       1.0 / nullif(r.num_classes, 0)                            AS chance_accuracy,
       r.reference_acc_low, r.reference_acc_high,
       r.first_step_s, r.steady_step_s, r.steady_steps,
       -- NULL when either is unrecorded (greatest() skips a NULL argument)
       CASE WHEN r.first_step_s IS NOT NULL AND r.steady_step_s IS NOT NULL
            THEN greatest(r.first_step_s - r.steady_step_s, 0) END AS first_step_excess_s,
       r.batch_size / nullif(r.steady_step_s, 0)                 AS samples_per_s,
       r.train_wall_s, r.dataset_sha256
FROM scratch_runs r
LEFT JOIN last l USING (run_id, lane, model, dataset, source, device)
LEFT JOIN best b USING (run_id, lane, model, dataset, source, device);
