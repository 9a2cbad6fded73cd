-- Lifecycle cost per useful token (docs/reference/metrics.md "Lifecycle $/M"). CREATE OR REPLACE VIEW statements
-- only. Runs after 73_report_pricing.sql (report_decision_pricing) and reads 31_report_compile.sql (report_compile),
-- 35_report_cost.sql (report_cost_by_lane), 30_prices.sql (decision_choice, lifecycle_anchors, report_pricing).
-- View defined here:
--   report_decision_lifecycle  every row of report_decision_pricing under the chosen pricing model
--                              (decision_choice.pricing_model) beside its serving-only $/M: the deployment's one-off
--                              seconds (the first deploy's cold compile, each redeploy's warm boot, the fine-tune and
--                              merge when the horizon asks for one) with where each came from, the lifecycle $ and
--                              the lifecycle $/M output tokens with its interval.
-- Horizon (decision_choice): serving_hours H, redeploys R, finetune F, utilization u (share of H at the capacity).
--   lifecycle $ = price x (H + (cold compile s + R x warm boot s) / 3600) + F x (fine-tune s + merge s) / 3600 x
--                 the fine-tune box's price (the run's sft lane's type, else trn1.2xlarge), all under the model
--   useful tokens = H x u x capacity tok/s x 3600 (the rest of H is paid idle)
--   lifecycle $/M = lifecycle $ / useful tokens x 1e6; its interval from the capacity's interval (the high capacity
--   gives the low bound); serving-only $/M is the model's $/M at capacity (report_decision_pricing).
-- Seconds come from the run's own rows where measured ('measured': report_compile's serving boots of this lane and
-- config, cold else uncached; report_cost_by_lane's sft and merge wall time) and from lifecycle_anchors otherwise
-- (their source says 'anchor' or 'estimate'); a CPU type has no anchor: NULL with a note.

CREATE OR REPLACE VIEW report_decision_lifecycle AS
WITH ch AS (SELECT * FROM decision_choice),
p AS (
    SELECT d.*, ic.family AS type_family,
           CASE WHEN starts_with(coalesce(ic.family, ''), 'neuron') THEN 'neuron' ELSE ic.family END AS boot_family
    FROM report_decision_pricing d
    JOIN ch ON d.pricing_model = ch.pricing_model
    LEFT JOIN instance_catalogue ic ON ic.instance_type = d.instance_type
),
boots AS (  -- the lane's serving boots of this config
    SELECT run_id, lane, config, model,
           coalesce(cold_wall_s, uncached_wall_s) AS cold_s, coalesce(warm_wall_s, uncached_wall_s) AS warm_s
    FROM report_compile WHERE what = 'serving_config'
),
ft AS (
    SELECT run_id,
           max(instance_hours) FILTER (WHERE lane = 'sft') * 3600.0 AS sft_s,
           max(instance_hours) FILTER (WHERE lane = 'merge') * 3600.0 AS merge_s,
           max(instance_type) FILTER (WHERE lane = 'sft') AS sft_instance_type
    FROM report_cost_by_lane GROUP BY run_id
),
j AS (
    SELECT p.*, ch.serving_hours, ch.redeploys, ch.finetune, ch.utilization,
           b.cold_s AS measured_cold_s, b.warm_s AS measured_warm_s,
           ac.seconds AS anchor_cold_s, ac.source AS anchor_cold_source,
           aw.seconds AS anchor_warm_s, aw.source AS anchor_warm_source,
           ft.sft_s, ft.merge_s,
           af.seconds AS anchor_sft_s, af.source AS anchor_sft_source,
           am.seconds AS anchor_merge_s, am.source AS anchor_merge_source,
           coalesce(ft.sft_instance_type, 'trn1.2xlarge') AS finetune_instance_type
    FROM p CROSS JOIN ch
    LEFT JOIN boots b ON b.run_id = p.run_id AND b.lane = p.lane AND b.config IS NOT DISTINCT FROM p.server_config
                     AND b.model IS NOT DISTINCT FROM p.model
    LEFT JOIN lifecycle_anchors ac ON ac.family = p.boot_family AND ac.what = 'cold_compile'
    LEFT JOIN lifecycle_anchors aw ON aw.family = p.boot_family AND aw.what = 'warm_boot'
    LEFT JOIN ft ON ft.run_id = p.run_id
    LEFT JOIN lifecycle_anchors af ON af.family = 'any' AND af.what = 'finetune'
    LEFT JOIN lifecycle_anchors am ON am.family = 'any' AND am.what = 'merge'
),
k AS (
    SELECT j.*,
           coalesce(measured_cold_s, anchor_cold_s) AS cold_compile_s,
           CASE WHEN measured_cold_s IS NOT NULL THEN 'measured' ELSE anchor_cold_source END AS cold_compile_source,
           coalesce(measured_warm_s, anchor_warm_s) AS warm_boot_s,
           CASE WHEN measured_warm_s IS NOT NULL THEN 'measured' ELSE anchor_warm_source END AS warm_boot_source,
           CASE WHEN finetune THEN coalesce(sft_s, anchor_sft_s) END AS finetune_s,
           CASE WHEN finetune THEN CASE WHEN sft_s IS NOT NULL THEN 'measured' ELSE anchor_sft_source END END
               AS finetune_source,
           CASE WHEN finetune THEN coalesce(merge_s, anchor_merge_s) END AS merge_s_used,
           CASE WHEN finetune THEN CASE WHEN merge_s IS NOT NULL THEN 'measured' ELSE anchor_merge_source END END
               AS merge_source,
           fp.effective_usd_per_hour AS finetune_usd_per_hour
    FROM j
    LEFT JOIN report_pricing fp ON fp.instance_type = j.finetune_instance_type AND fp.pricing_model = j.pricing_model
),
c AS (
    SELECT k.*,
           model_usd_per_hour * (serving_hours + (cold_compile_s + redeploys * warm_boot_s) / 3600.0)
           + CASE WHEN finetune THEN (finetune_s + merge_s_used) / 3600.0 * finetune_usd_per_hour ELSE 0 END
               AS lifecycle_usd,
           serving_hours * utilization * 3600.0 AS useful_seconds
    FROM k
)
SELECT run_id, instance, instance_type, lane, cell, model, server_config, workload, input_len, output_len, slo_name,
       decision_group, decision_section, is_reference, pricing_model, model_candidate,
       serving_hours, redeploys, finetune, utilization,
       model_usd_per_hour, capacity_tok_s, capacity_tok_s_ci_low, capacity_tok_s_ci_high,
       model_usd_per_million_output_tokens AS serving_usd_per_million_output_tokens,
       model_usd_per_million_output_tokens_ci_low AS serving_usd_per_million_output_tokens_ci_low,
       model_usd_per_million_output_tokens_ci_high AS serving_usd_per_million_output_tokens_ci_high,
       cold_compile_s, cold_compile_source, warm_boot_s, warm_boot_source,
       finetune_s, finetune_source, merge_s_used AS merge_s, merge_source, finetune_instance_type,
       finetune_usd_per_hour,
       CASE WHEN model_candidate THEN lifecycle_usd END AS lifecycle_usd,
       CASE WHEN model_candidate THEN lifecycle_usd / (useful_seconds * capacity_tok_s) * 1e6 END
           AS lifecycle_usd_per_million_output_tokens,
       CASE WHEN model_candidate AND capacity_tok_s_ci_high > 0
            THEN lifecycle_usd / (useful_seconds * capacity_tok_s_ci_high) * 1e6 END
           AS lifecycle_usd_per_million_output_tokens_ci_low,
       CASE WHEN model_candidate AND capacity_tok_s_ci_low > 0
            THEN lifecycle_usd / (useful_seconds * capacity_tok_s_ci_low) * 1e6 END
           AS lifecycle_usd_per_million_output_tokens_ci_high,
       -- the lifecycle $/M over the serving-only $/M: what the one-off costs and idle hours add
       CASE WHEN model_candidate THEN lifecycle_usd / (useful_seconds * capacity_tok_s) * 1e6
                                      / nullif(model_usd_per_million_output_tokens, 0) END AS lifecycle_over_serving,
       nullif(concat_ws('; ',
           CASE WHEN NOT model_candidate THEN 'no serving $/M under ' || pricing_model || ': no lifecycle $/M' END,
           CASE WHEN model_candidate AND cold_compile_s IS NULL
                THEN 'no boot measured and no anchor for family ' || coalesce(type_family, 'unknown') END,
           CASE WHEN model_candidate AND finetune AND finetune_usd_per_hour IS NULL
                THEN printf('no %s price for the fine-tune box %s', pricing_model, finetune_instance_type) END,
           CASE WHEN model_candidate AND capacity_tok_s_ci_low IS NOT NULL AND capacity_tok_s_ci_low <= 0
                THEN 'capacity interval reaches 0: no upper lifecycle $/M bound' END), '') AS lifecycle_note
FROM c;
