-- Report-side views. Views defined here:
--   report_training  train_runs (tokens/s, MFU with its formula and peaks, as the training lane stored them)
--                    beside loss facts from train_steps (first/last/min loss, logged steps).
--                  step clock: train_loop_s (the training loop's wall time) and step_clock (what step_s measures)
--                  from train_runs; (summed_step_s + summed_save_s) / train_loop_s = step_clock_coverage (mid-run
--                  checkpoint saves are timed apart from the steps: train_saves); step_clock_partial when the steps
--                  and saves cover less than 90 % of the loop (tokens/s and MFU rest on step_s: they may overstate).
-- Precompile runs record no loss (rule 4); report_exclusions flags any that did.
CREATE OR REPLACE VIEW report_training AS
WITH steps AS (
    SELECT run_id, lane, model,
           count(*)                                                AS logged_steps,
           count(loss)                                             AS loss_steps,
           arg_min(loss, step) FILTER (WHERE loss IS NOT NULL)     AS first_loss,
           arg_max(loss, step) FILTER (WHERE loss IS NOT NULL)     AS last_loss,
           min(loss)                                               AS min_loss,
           sum(tokens)                                             AS step_tokens,
           sum(step_s)                                             AS summed_step_s
    FROM train_steps
    GROUP BY run_id, lane, model
),
saves AS (
    SELECT run_id, lane, model, sum(save_s) AS summed_save_s FROM train_saves GROUP BY run_id, lane, model
)
SELECT r.run_id, r.lane, r.model, r.backend, r.device, r.num_devices,
       r.params_trainable, r.params_frozen, r.lora_r, r.lora_alpha,
       r.steps, r.epochs, r.tokens_total, r.tokens_per_s, r.first_step_s, r.median_step_s,
       r.flops_per_token, r.flops_formula, r.activation_recompute,
       r.mfu, r.peak_flops, r.peak_source, r.mfu_alt, r.peak_alt_flops, r.peak_alt_source, r.mfu_null_reason,
       r.peak_host_mem_mib, r.final_loss, r.dataset_sha256, r.dataset_records, r.max_seq_len,
       s.logged_steps, s.loss_steps, s.first_loss, s.last_loss, s.min_loss, s.step_tokens,
       r.train_loop_s, r.step_clock, s.summed_step_s, v.summed_save_s,
       (s.summed_step_s + coalesce(v.summed_save_s, 0)) / nullif(r.train_loop_s, 0) AS step_clock_coverage,
       coalesce((s.summed_step_s + coalesce(v.summed_save_s, 0)) / nullif(r.train_loop_s, 0) < 0.9, false)
         AS step_clock_partial
FROM train_runs r
LEFT JOIN steps s USING (run_id, lane, model)
LEFT JOIN saves v USING (run_id, lane, model);
