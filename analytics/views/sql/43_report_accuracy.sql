-- Accuracy (docs/reference/metrics.md "Accuracy"). CREATE OR REPLACE VIEW statements only. Views defined
-- here:
--   report_accuracy            one row per evaluation (accuracy_tasks, and any eval_id of accuracy_samples without a
--                              task row): samples scored, correct, accuracy with its Wilson 95 % interval, failed
--                              samples (counted, never scored), latency, the task's settings and outcome.
--   accuracy_config_baselines  per (run, server config) that names a baseline (compiles.config_json's base, as the
--                              Variants section reads it): whether the variant is expected to be lossless under greedy
--                              decoding (its settings equal its baseline's once speculative decoding, prefix caching
--                              and the tenant count are set aside) and why.
--   accuracy_eval_pairs        ordered pairs (A, B) of evaluations of one task on the same documents (same lane, model,
--                              task source, metric, output type and few-shot count): kind 'finetune' (variant base vs
--                              finetune, same run and server config), 'configs' (two server configs of one run, same
--                              variant; baseline set where A is the config B declares as its base: a variant vs its
--                              baseline), 'runs' (the same variant and server config in two runs). Both orders of
--                              'configs' and 'runs' pairs are listed: `compare` names which side is the baseline.
--   accuracy_sample_pairs      one row per pair of evaluations and document both evaluated (the doc_id join).
--   accuracy_pair_tests        per pair: the paired 2x2 table, the accuracy delta B - A with Newcombe's paired
--                              hybrid-score interval (method 10), the exact McNemar test, the identical-output share.
--   report_accuracy_pairs      accuracy_pair_tests of base vs finetune and of each variant vs its baseline, beside
--                              each side's own accuracy: the report's verdict table (Holm and the verdict:
--                              analytics/report/accuracy.py, because the family holds the comparison's run-level
--                              tests, computed in Python).
-- variant_a / variant_b of a pair are the evaluations' model_variant (base | finetune | a multi-LoRA NAME/ADAPTER).
-- The table views show each lane's effective attempt only (the latest committed one: analytics.views.register_tables),
-- so a re-run's samples replace its earlier attempt's; every key below carries run_id and lane.
-- A sample is scored when error IS NULL and correct IS NOT NULL; a failed sample (error set) is excluded from the
-- accuracy and counted (failed); one without a 0/1 outcome (a non-binary metric) is counted as unscored.
-- z = 1.959963984540054, the two-sided 95 % standard normal quantile, everywhere in this file.
CREATE OR REPLACE VIEW report_accuracy AS
WITH s AS (
    SELECT run_id, lane, eval_id,
           any_value(model) AS model, any_value(variant) AS variant, any_value(server_config) AS server_config,
           any_value(backend) AS backend, any_value(task) AS task, any_value(output_type) AS output_type,
           any_value(metric) AS metric,
           count(*)                                                          AS samples,
           count(*) FILTER (WHERE error IS NULL AND correct IS NOT NULL)     AS n,
           count(*) FILTER (WHERE error IS NULL AND correct)                 AS correct,
           count(*) FILTER (WHERE error IS NOT NULL)                         AS failed,
           count(*) FILTER (WHERE error IS NULL AND correct IS NULL)         AS unscored,
           avg(metric_value) FILTER (WHERE error IS NULL)                    AS mean_metric_value,
           avg(latency_s) FILTER (WHERE error IS NULL)                       AS mean_latency_s,
           quantile_cont(latency_s, 0.5) FILTER (WHERE error IS NULL)        AS p50_latency_s,
           count(prediction_hash) FILTER (WHERE error IS NULL)               AS hashed,
           min(error) FILTER (WHERE error IS NOT NULL)                       AS first_error
    FROM accuracy_samples
    GROUP BY run_id, lane, eval_id
),
j AS (
    SELECT coalesce(t.run_id, s.run_id) AS run_id, coalesce(t.lane, s.lane) AS lane,
           coalesce(t.eval_id, s.eval_id) AS eval_id,
           coalesce(t.model, s.model) AS model, coalesce(t.variant, s.variant) AS variant,
           coalesce(t.server_config, s.server_config) AS server_config, coalesce(t.backend, s.backend) AS backend,
           coalesce(t.task, s.task) AS task, t.task_source, coalesce(t.output_type, s.output_type) AS output_type,
           coalesce(t.metric, s.metric) AS metric, t.status, t.reason, t.sample_limit, t.n_docs,
           t.num_fewshot, t.max_gen_toks, t.lm_eval_score, t.lm_eval_version, t.wall_s,
           t.n_samples AS declared_samples, t.n_failed AS declared_failed,
           coalesce(s.samples, 0) AS samples, coalesce(s.n, 0) AS n, coalesce(s.correct, 0) AS correct,
           coalesce(s.failed, 0) AS failed, coalesce(s.unscored, 0) AS unscored, s.mean_metric_value,
           s.mean_latency_s, s.p50_latency_s, coalesce(s.hashed, 0) AS hashed, s.first_error
    FROM accuracy_tasks t
    FULL OUTER JOIN s ON s.run_id = t.run_id AND s.lane = t.lane AND s.eval_id = t.eval_id
),
w AS (
    SELECT j.*,
           CASE WHEN n > 0 THEN correct / n END AS accuracy,
           CASE WHEN n > 0 THEN (correct + 1.959963984540054 ^ 2 / 2) / (n + 1.959963984540054 ^ 2) END AS wc,
           CASE WHEN n > 0 THEN 1.959963984540054 * sqrt(correct * (n - correct) / n + 1.959963984540054 ^ 2 / 4)
                                / (n + 1.959963984540054 ^ 2) END AS wh
    FROM j
)
SELECT run_id, lane, eval_id, model, variant,
       -- the model served: base | finetune; the accuracy lane names a server variant's evaluation of the base model
       -- after its config (variant = server_config): that is the base model too
       CASE WHEN variant = server_config THEN 'base' ELSE variant END AS model_variant,
       server_config, backend, task, task_source, output_type, metric,
       status, reason, sample_limit, n_docs, num_fewshot, max_gen_toks, declared_samples, declared_failed,
       samples, n, correct, accuracy,
       -- greatest/least: rounding only (the Wilson bounds lie in [0, 1]); NULL without a scored sample
       CASE WHEN n > 0 THEN greatest(0.0, wc - wh) END AS accuracy_ci_low,
       CASE WHEN n > 0 THEN least(1.0, wc + wh) END    AS accuracy_ci_high,
       failed, unscored, mean_metric_value, mean_latency_s, p50_latency_s, hashed, first_error,
       lm_eval_score, accuracy - lm_eval_score AS lm_eval_delta, lm_eval_version, wall_s
FROM w;

CREATE OR REPLACE VIEW accuracy_config_baselines AS
WITH declared AS (
    SELECT run_id, config,
           max(config_json) FILTER (WHERE config_json IS NOT NULL)               AS config_json,
           max(config_fingerprint) FILTER (WHERE config_fingerprint IS NOT NULL) AS fingerprint
    FROM compiles WHERE what = 'serving_config'
    GROUP BY run_id, config
),
settings AS (  -- config_json is canonical (sorted keys: pipeline.servers.ServerConfig.to_json), so equal text = equal
    SELECT run_id, config, config_json, fingerprint,
           json_extract_string(config_json, '$.base') AS base,
           json_extract_string(config_json, '$.speculative') IS NOT NULL AS speculative,
           coalesce(TRY_CAST(json_extract_string(config_json, '$.enable_prefix_caching') AS BOOLEAN), false)
             AS prefix_caching,
           CAST(json_merge_patch(config_json, '{"name": null, "base": null, "fingerprint": null, "description": null,
                                                "tenants": null, "speculative": null,
                                                "enable_prefix_caching": null}') AS VARCHAR) AS numerics
    FROM declared
)
SELECT v.run_id, v.config, v.base AS baseline, v.fingerprint, b.fingerprint AS baseline_fingerprint,
       v.speculative, v.prefix_caching,
       CASE WHEN v.config_json IS NULL OR b.config_json IS NULL THEN NULL
            ELSE v.numerics = b.numerics AND NOT (b.speculative OR b.prefix_caching) END AS lossless_expected,
       CASE WHEN v.config_json IS NULL OR b.config_json IS NULL THEN 'baseline settings not recorded'
            WHEN v.numerics <> b.numerics THEN 'changes what is computed: ' || v.numerics || ' vs ' || b.numerics
            WHEN b.speculative OR b.prefix_caching
            THEN 'the baseline itself uses speculative decoding or prefix caching'
            WHEN v.speculative AND v.prefix_caching THEN 'speculative decoding and prefix caching'
            WHEN v.speculative THEN 'speculative decoding'
            WHEN v.prefix_caching THEN 'prefix caching'
            ELSE 'the baseline''s settings (an A/A copy)' END AS lossless_basis
FROM settings v
LEFT JOIN settings b ON b.run_id = v.run_id AND b.config = v.base
WHERE v.base IS NOT NULL AND v.base <> v.config;

CREATE OR REPLACE VIEW accuracy_eval_pairs AS
WITH e AS (  -- evaluations that ran (a refused one has no samples to pair)
    SELECT run_id, lane, eval_id, model, model_variant AS variant, server_config, backend, task, task_source,
           output_type, metric, num_fewshot
    FROM report_accuracy WHERE status IS DISTINCT FROM 'refused' AND samples > 0
),
same_task AS (  -- what makes two evaluations' doc_ids the same documents, scored the same way
    SELECT a.run_id AS run_id_a, a.lane AS lane_a, a.eval_id AS eval_id_a, b.run_id AS run_id_b, b.lane AS lane_b,
           b.eval_id AS eval_id_b, a.model, a.variant AS variant_a, b.variant AS variant_b,
           a.server_config AS config_a, b.server_config AS config_b, a.task, a.metric, a.output_type
    FROM e a JOIN e b  -- within a run the same lane is the same box; between runs the backend may differ
      ON a.task = b.task AND a.lane = b.lane AND a.model IS NOT DISTINCT FROM b.model
     AND a.task_source IS NOT DISTINCT FROM b.task_source AND a.metric IS NOT DISTINCT FROM b.metric
     AND a.output_type IS NOT DISTINCT FROM b.output_type AND a.num_fewshot IS NOT DISTINCT FROM b.num_fewshot
    WHERE a.eval_id <> b.eval_id OR a.run_id <> b.run_id
)
SELECT 'finetune' AS kind, p.*, CAST(NULL AS VARCHAR) AS baseline, false AS lossless_expected,
       'different weights' AS lossless_basis
FROM same_task p
WHERE p.run_id_a = p.run_id_b AND p.variant_a = 'base' AND p.variant_b = 'finetune'
  AND p.config_a IS NOT DISTINCT FROM p.config_b
UNION ALL
SELECT 'configs', p.*, cb.baseline, cb.lossless_expected, cb.lossless_basis
FROM same_task p
LEFT JOIN accuracy_config_baselines cb  -- set where A is the config B declares as its baseline (tenants of NAME too)
  ON cb.run_id = p.run_id_b AND cb.config = regexp_replace(p.config_b, '\.(alone|t[0-9]+)$', '')
 AND cb.baseline = p.config_a
WHERE p.run_id_a = p.run_id_b AND p.variant_a IS NOT DISTINCT FROM p.variant_b
  AND p.config_a IS DISTINCT FROM p.config_b
UNION ALL
SELECT 'runs', p.*, CAST(NULL AS VARCHAR), CAST(NULL AS BOOLEAN), CAST(NULL AS VARCHAR)
FROM same_task p
WHERE p.run_id_a <> p.run_id_b AND p.variant_a IS NOT DISTINCT FROM p.variant_b
  AND p.config_a IS NOT DISTINCT FROM p.config_b;

CREATE OR REPLACE VIEW accuracy_sample_pairs AS
SELECT p.kind, p.run_id_a, p.lane_a, p.eval_id_a, p.run_id_b, p.lane_b, p.eval_id_b, p.model, p.variant_a,
       p.variant_b, p.config_a, p.config_b, p.task, sa.doc_id,
       sa.correct AS correct_a, sb.correct AS correct_b,
       sa.error IS NULL AND sa.correct IS NOT NULL AND sb.error IS NULL AND sb.correct IS NOT NULL AS scored,
       sa.target IS NOT DISTINCT FROM sb.target AS same_target,
       sa.prediction_hash AS prediction_hash_a, sb.prediction_hash AS prediction_hash_b,
       CASE WHEN sa.error IS NULL AND sb.error IS NULL AND sa.prediction_hash IS NOT NULL
                 AND sb.prediction_hash IS NOT NULL
            THEN sa.prediction_hash = sb.prediction_hash END AS identical,
       sa.latency_s AS latency_s_a, sb.latency_s AS latency_s_b
FROM accuracy_eval_pairs p
JOIN accuracy_samples sa ON sa.run_id = p.run_id_a AND sa.lane = p.lane_a AND sa.eval_id = p.eval_id_a
JOIN accuracy_samples sb ON sb.run_id = p.run_id_b AND sb.lane = p.lane_b AND sb.eval_id = p.eval_id_b
                        AND sb.doc_id = sa.doc_id;

CREATE OR REPLACE VIEW accuracy_pair_tests AS
WITH t AS (
    SELECT kind, run_id_a, lane_a, eval_id_a, run_id_b, lane_b, eval_id_b, model, variant_a, variant_b, config_a,
           config_b, task,
           count(*)                                                          AS common_docs,
           count(*) FILTER (WHERE NOT scored)                                AS excluded_failed,
           count(*) FILTER (WHERE scored AND NOT same_target)                AS excluded_target,
           count(*) FILTER (WHERE scored AND same_target)                    AS n,
           count(*) FILTER (WHERE scored AND same_target AND correct_a AND correct_b)         AS n11,
           count(*) FILTER (WHERE scored AND same_target AND correct_a AND NOT correct_b)     AS b,
           count(*) FILTER (WHERE scored AND same_target AND NOT correct_a AND correct_b)     AS c,
           count(*) FILTER (WHERE scored AND same_target AND NOT correct_a AND NOT correct_b) AS n00,
           count(identical)                                                  AS hashed_pairs,
           count(*) FILTER (WHERE identical)                                 AS identical_outputs,
           avg(latency_s_a) FILTER (WHERE scored)                            AS mean_latency_s_a,
           avg(latency_s_b) FILTER (WHERE scored)                            AS mean_latency_s_b
    FROM accuracy_sample_pairs
    GROUP BY ALL
),
p AS (  -- the two accuracies on the paired documents and each one's Wilson score bounds (a: acc_a, b: acc_b)
    SELECT t.*,
           CASE WHEN n > 0 THEN (n11 + b) / n END AS acc_a,
           CASE WHEN n > 0 THEN (n11 + c) / n END AS acc_b,
           CASE WHEN n > 0 THEN ((n11 + b) + 1.959963984540054 ^ 2 / 2) / (n + 1.959963984540054 ^ 2) END AS ca,
           CASE WHEN n > 0 THEN 1.959963984540054 * sqrt((n11 + b) * (c + n00) / n + 1.959963984540054 ^ 2 / 4)
                                / (n + 1.959963984540054 ^ 2) END AS ha,
           CASE WHEN n > 0 THEN ((n11 + c) + 1.959963984540054 ^ 2 / 2) / (n + 1.959963984540054 ^ 2) END AS cb,
           CASE WHEN n > 0 THEN 1.959963984540054 * sqrt((n11 + c) * (b + n00) / n + 1.959963984540054 ^ 2 / 4)
                                / (n + 1.959963984540054 ^ 2) END AS hb,
           -- Newcombe's phi: the correlation of the two outcomes, with the n/2 correction of his method 10
           -- (0 where a margin is empty or 0 <= n11*n00 - b*c <= n/2)
           CASE WHEN CAST(n11 + b AS DOUBLE) * (c + n00) * (n11 + c) * (b + n00) = 0 THEN 0.0
                WHEN n11 * n00 - b * c > n / 2
                THEN (n11 * n00 - b * c - n / 2) / sqrt(CAST(n11 + b AS DOUBLE) * (c + n00) * (n11 + c) * (b + n00))
                WHEN n11 * n00 - b * c >= 0 THEN 0.0
                ELSE (n11 * n00 - b * c) / sqrt(CAST(n11 + b AS DOUBLE) * (c + n00) * (n11 + c) * (b + n00))
           END AS phi
    FROM t
),
q AS (
    SELECT p.*,
           CASE WHEN n > 0 THEN greatest(0.0, ca - ha) END AS la, CASE WHEN n > 0 THEN least(1.0, ca + ha) END AS ua,
           CASE WHEN n > 0 THEN greatest(0.0, cb - hb) END AS lb, CASE WHEN n > 0 THEN least(1.0, cb + hb) END AS ub
    FROM p
)
SELECT q.kind, q.run_id_a, q.lane_a, q.eval_id_a, q.run_id_b, q.lane_b, q.eval_id_b, q.model, q.variant_a,
       q.variant_b, q.config_a, q.config_b, q.task, e.metric, e.output_type, e.baseline, e.lossless_expected,
       e.lossless_basis,
       q.common_docs, q.excluded_failed, q.excluded_target, q.n, q.n11, q.b, q.c, q.n00, q.acc_a, q.acc_b,
       q.acc_a_ci_low, q.acc_a_ci_high, q.acc_b_ci_low, q.acc_b_ci_high,
       q.acc_b - q.acc_a AS delta,
       q.acc_b - q.acc_a - sqrt(greatest(0.0, (q.acc_b - q.lb) ^ 2 - 2 * q.phi * (q.acc_b - q.lb) * (q.ua - q.acc_a)
                                               + (q.ua - q.acc_a) ^ 2)) AS delta_ci_low,
       q.acc_b - q.acc_a + sqrt(greatest(0.0, (q.ub - q.acc_b) ^ 2 - 2 * q.phi * (q.ub - q.acc_b) * (q.acc_a - q.la)
                                               + (q.acc_a - q.la) ^ 2)) AS delta_ci_high,
       q.phi,
       -- exact McNemar: under H0 b ~ Binomial(b + c, 1/2); two-sided p = min(1, 2 P(X <= min(b, c))), 1 when b + c = 0
       CASE WHEN q.n = 0 THEN NULL
            WHEN q.b + q.c = 0 THEN 1.0
            ELSE least(1.0, 2 * list_sum(list_transform(range(0, least(q.b, q.c) + 1), lambda k:
                     exp(lgamma(q.b + q.c + 1) - lgamma(k + 1) - lgamma(q.b + q.c - k + 1) - (q.b + q.c) * ln(2)))))
       END AS mcnemar_p,
       q.hashed_pairs, q.identical_outputs,
       CASE WHEN q.hashed_pairs > 0 THEN q.identical_outputs / q.hashed_pairs END AS identical_share,
       CASE WHEN e.lossless_expected AND q.hashed_pairs > 0 THEN q.identical_outputs < q.hashed_pairs END
         AS exactness_flagged,
       q.mean_latency_s_a, q.mean_latency_s_b
FROM (SELECT *, la AS acc_a_ci_low, ua AS acc_a_ci_high, lb AS acc_b_ci_low, ub AS acc_b_ci_high FROM q) q
JOIN accuracy_eval_pairs e
  ON e.kind = q.kind AND e.run_id_a = q.run_id_a AND e.lane_a = q.lane_a AND e.eval_id_a = q.eval_id_a
 AND e.run_id_b = q.run_id_b AND e.lane_b = q.lane_b AND e.eval_id_b = q.eval_id_b;

CREATE OR REPLACE VIEW report_accuracy_pairs AS
SELECT t.*,
       ra.accuracy AS accuracy_a, ra.accuracy_ci_low AS accuracy_a_ci_low, ra.accuracy_ci_high AS accuracy_a_ci_high,
       ra.n AS n_a, ra.failed AS failed_a,
       rb.accuracy AS accuracy_b, rb.accuracy_ci_low AS accuracy_b_ci_low, rb.accuracy_ci_high AS accuracy_b_ci_high,
       rb.n AS n_b, rb.failed AS failed_b
FROM accuracy_pair_tests t
JOIN report_accuracy ra ON ra.run_id = t.run_id_a AND ra.lane = t.lane_a AND ra.eval_id = t.eval_id_a
JOIN report_accuracy rb ON rb.run_id = t.run_id_b AND rb.lane = t.lane_b AND rb.eval_id = t.eval_id_b
WHERE t.kind = 'finetune' OR (t.kind = 'configs' AND t.baseline IS NOT NULL);
