-- Quality per dollar (docs/reference/metrics.md "Quality per dollar"). CREATE OR REPLACE VIEW statements only. Runs
-- after 73_report_pricing.sql (report_decision_pricing) and reads 43_report_accuracy.sql (report_accuracy) and
-- 30_prices.sql (decision_choice). View defined here:
--   report_quality_cost  per Decision row under the chosen pricing model with a $/M at the SLO, and per accuracy task
--                        its run evaluated for the same model and server config (the base model, the same matrix
--                        cell): accuracy with its Wilson 95 % interval beside $/M with its interval, and whether the
--                        point is on the Pareto front of its model, task, workload, shape and SLO (no other point
--                        is at once no dearer and no less accurate, and better on one: point estimates), else the
--                        points that dominate it. The accuracy lane's paired verdict (worse than its baseline: Holm-
--                        adjusted McNemar) is computed in Python (analytics/report/accuracy.py) and marked beside
--                        these rows by the report: a cheaper variant that is worse is never a plain win.

CREATE OR REPLACE VIEW report_quality_cost AS
WITH d AS (
    SELECT d.* FROM report_decision_pricing d JOIN decision_choice ch ON d.pricing_model = ch.pricing_model
    WHERE d.model_candidate
),
a AS (
    SELECT run_id, lane AS accuracy_lane, model, server_config, task, metric, n, correct, accuracy,
           accuracy_ci_low, accuracy_ci_high,
           CASE WHEN regexp_matches(split_part(lane, '@', 2), '^c[0-9]+$') THEN split_part(lane, '@', 2) END AS cell
    FROM report_accuracy
    WHERE model_variant = 'base' AND accuracy IS NOT NULL
),
j AS (
    SELECT d.run_id, d.instance, d.instance_type, d.lane, d.cell, d.model, d.server_config, d.workload, d.input_len,
           d.output_len, d.slo_name, d.decision_section, d.pricing_model,
           d.model_usd_per_million_output_tokens AS usd_per_million_output_tokens,
           d.model_usd_per_million_output_tokens_ci_low AS usd_per_million_output_tokens_ci_low,
           d.model_usd_per_million_output_tokens_ci_high AS usd_per_million_output_tokens_ci_high,
           a.accuracy_lane, a.task, a.metric, a.n, a.correct, a.accuracy, a.accuracy_ci_low, a.accuracy_ci_high
    FROM d JOIN a ON a.run_id = d.run_id AND a.model IS NOT DISTINCT FROM d.model
                 AND a.server_config IS NOT DISTINCT FROM d.server_config AND a.cell IS NOT DISTINCT FROM d.cell
)
SELECT j.*,
       dom.dominated_by IS NULL AS pareto,
       dom.dominated_by
FROM j
LEFT JOIN LATERAL (
    SELECT string_agg(o.instance || ' ' || coalesce(o.server_config, ''), ', ' ORDER BY o.instance, o.server_config)
               AS dominated_by
    FROM j o
    WHERE o.model IS NOT DISTINCT FROM j.model AND o.task = j.task AND o.workload IS NOT DISTINCT FROM j.workload
      AND o.input_len IS NOT DISTINCT FROM j.input_len AND o.output_len IS NOT DISTINCT FROM j.output_len
      AND o.slo_name IS NOT DISTINCT FROM j.slo_name
      AND NOT (o.run_id = j.run_id AND o.lane = j.lane AND o.instance = j.instance
               AND o.server_config IS NOT DISTINCT FROM j.server_config)
      AND o.usd_per_million_output_tokens <= j.usd_per_million_output_tokens AND o.accuracy >= j.accuracy
      AND (o.usd_per_million_output_tokens < j.usd_per_million_output_tokens OR o.accuracy > j.accuracy)
) dom ON true;
