-- The Decision with run-level noise (docs/explanation/decision-noise.md). CREATE OR REPLACE VIEW statements only.
-- Runs after 77_report_decision_hardware.sql (reads report_decision_hardware) and reads 30_prices.sql
-- (decision_choice, instance_price_models, instance_prices). Views defined here:
--   decision_noise_options  per Decision group (model, server config, workload, shape, SLO) and instance type: its
--                           candidate rows (repeats: runs or cells of the same type in the group), the mean of
--                           ln $/M at the group's basis under the chosen pricing model, the point component (each
--                           row's own interval), the run-level component and its source, the $/M with the points' own
--                           interval and with the interval that includes the run-level component, and the type's
--                           verdict; a type not priced under the model: NULL $/M with the reason (note).
--   report_decision_noise   every ordered pair of candidate types of a group priced under the chosen model:
--                           P(the first's $/M < the second's), P(the first's $/M <= (1 + margin) x the second's),
--                           P(it is at least 5 % lower) and the verdict words, with the pricing model they are for.
--   report_decision_standing per type of a group: its verdict with run-to-run noise against all the others.
-- The model: one measurement of type i is ln $/M = mu_i + r + e, r the run-to-run component (sd sigma_run: another
-- run, another box of the same type) and e the point's own (sd from the row's 95 % interval:
-- (ln high - ln low) / (2 x 1.96)); a type's n measurements give mean ln $/M with variance
-- (sigma_run^2 + mean e variance) / n (sigma_run at its upper bound, below); two types are measured apart, so P(i cheaper than j) =
-- Phi((mean_j - mean_i) / sqrt(var_i + var_j)) (normal on the log scale).
-- sigma_run, first found of:
--   'repeats'     the group's own repeats: the within-type variance of ln $/M pooled over the group's types with >= 2
--                 rows, less their mean point variance (floored at 0), when it has >= 4 degrees of freedom
--                 (e.g. 5 rows of one type, or 3 of each of two);
--   'aa_history'  the same, pooled over the store's other groups where a type of this family (instance_catalogue
--                 family) has repeats, >= 4 degrees of freedom;
--   'prior'       0.22 in log: the run-to-run standard deviation of p50 TPOT measured over 21 A/A runs on a shared
--                 host (docs/explanation/compare.md, "Measured on real runs"), $/M being throughput inverted.
-- sigma_run is an estimate from few degrees of freedom (the prior's: 20, from its 21 runs); P uses its one-sided 95 %
-- upper confidence bound, sqrt(ss / chi2_0.05(df) - point variance) (ss = df x the estimated total variance), so
-- an estimate from few runs does not make P confident: the bound is 1.36 x the estimate at 20 df, 1.71 x at 8
-- (run_sd_upper_log; run_sd_log is the estimate). chi2_0.05 by Wilson-Hilferty, inline.
-- A row without a bounded $/M interval (no interval, or the throughput's lower bound reached 0) has no point
-- variance: its type's P is NULL ('untested'). The verdict: 'cheaper' only where P(the first's $/M <= 0.95 x the
-- second's), p_cheaper_by_margin, is >= 0.99; 'more expensive' where the same holds the other way; else 'not
-- decided'. Why stricter than P(cheaper) >= 0.95: a Decision compares every pair of a group, a report holds many
-- groups and the adaptive matrix judges again after each wave, so 5 % false calls per look add up; a buyer does not
-- change boxes for a gap under 5 %; and on A/A runs of one type (benchmarks/decision_aa.py) P >= 0.95 alone called
-- up to 9 % of the pairs cheaper than themselves, this rule none of 244 pairs, each judged with the prior and with
-- the A/A history (docs/explanation/decision-noise.md). The margin of p_within_margin is the session variable
-- decision_margin_pct (SET VARIABLE; control_plane.adaptive sets it for the stop rule), 0 when unset.
-- The pricing model: P and the verdict are for the model the Decision is read for (decision_choice.pricing_model).
-- $/M under a model = the on-demand $/M x the type's effective $/hour under it / its on-demand $/hour (in
-- instance_prices' region, as 73_report_pricing.sql): ln $/M shifts by that per-type constant, so sigma_run and the
-- point variance are the on-demand ones (every candidate row's repeats count towards them, priced under the model or
-- not) and only the means move. A type without a price under the model is kept with its reason (note) and compared
-- with no other type. On-demand: the constant is 1, its ln 0, the figures the on-demand $/M's.
-- Phi: Abramowitz & Stegun 26.2.17 (absolute error < 7.5e-8), inline below: DuckDB has no erf.

CREATE OR REPLACE VIEW decision_noise_options AS
WITH pm AS (  -- the chosen model's effective $/hour over the on-demand $/hour, per type in the price region
    SELECT m.instance_type, m.pricing_model, m.null_reason,
           m.effective_usd_per_hour / nullif(od.usd_per_hour, 0) AS price_ratio
    FROM instance_price_models m
    JOIN decision_choice ch ON ch.pricing_model = m.pricing_model
    JOIN instance_prices od ON od.instance_type = m.instance_type AND od.region = m.region
),
r AS (  -- the candidate rows: a type measured here with a $/M at the group's basis (on-demand)
    SELECT h.decision_group, h.decision_section, h.model, h.server_config, h.workload, h.input_len, h.output_len,
           h.slo_name, h.ranked_basis, h.instance, h.family, h.run_id, h.lane,
           h.ranked_usd_per_million_output_tokens AS usd,
           ln(h.ranked_usd_per_million_output_tokens) AS y,
           CASE WHEN h.ranked_usd_per_million_output_tokens_ci_low > 0
                     AND h.ranked_usd_per_million_output_tokens_ci_high >= h.ranked_usd_per_million_output_tokens_ci_low
                THEN pow((ln(h.ranked_usd_per_million_output_tokens_ci_high)
                          - ln(h.ranked_usd_per_million_output_tokens_ci_low)) / (2 * 1.959963984540054), 2) END
               AS point_var,
           ch.pricing_model,
           CASE WHEN ch.pricing_model = 'on-demand' THEN 1.0 ELSE pm.price_ratio END AS price_ratio,
           CASE WHEN ch.pricing_model = 'on-demand' THEN NULL
                WHEN h.instance_type IS NULL THEN 'instance type not recorded: no price'
                WHEN pm.instance_type IS NULL THEN 'no price for ' || h.instance_type
                ELSE pm.null_reason END AS price_note
    FROM report_decision_hardware h
    CROSS JOIN decision_choice ch
    LEFT JOIN pm ON pm.instance_type = h.instance_type
    WHERE h.candidate AND h.ranked_usd_per_million_output_tokens > 0
),
t AS (  -- per type of a group
    SELECT decision_group, instance,
           any_value(decision_section) AS decision_section, any_value(model) AS model,
           any_value(server_config) AS server_config, any_value(workload) AS workload,
           any_value(input_len) AS input_len, any_value(output_len) AS output_len, any_value(slo_name) AS slo_name,
           any_value(ranked_basis) AS ranked_basis, any_value(family) AS family,
           count(*) AS repeats, avg(y) AS mean_y, coalesce(sum(pow(y, 2)) - count(*) * pow(avg(y), 2), 0) AS ss,
           avg(point_var) AS point_var, count(point_var) = count(*) AS bounded,
           string_agg(run_id || ' ' || lane, ', ' ORDER BY run_id, lane) AS measurements,
           any_value(pricing_model) AS pricing_model, count(price_ratio) = count(*) AS priced,
           avg(ln(price_ratio)) AS ln_price_ratio, max(price_note) AS price_note
    FROM r GROUP BY decision_group, instance
),
grp AS (  -- the group's repeats, pooled over its types with >= 2 rows
    SELECT decision_group, sum(ss) AS ss, sum(repeats - 1) AS df,
           sum(point_var * (repeats - 1)) / nullif(sum(repeats - 1), 0) AS point_var
    FROM t WHERE repeats >= 2 AND bounded GROUP BY decision_group
),
hist AS (  -- the store's history per family: the same, over every group's types with repeats
    SELECT family, decision_group, sum(ss) AS ss, sum(repeats - 1) AS df,
           sum(point_var * (repeats - 1)) AS point_var_df
    FROM t WHERE repeats >= 2 AND bounded AND family IS NOT NULL GROUP BY family, decision_group
),
s0 AS (
    SELECT t.*,
           CASE WHEN g.df >= 4 THEN 'repeats' WHEN h.df >= 4 THEN 'aa_history' ELSE 'prior' END AS run_sd_source,
           -- the estimate's sum of squares, degrees of freedom and the point variance it includes
           CASE WHEN g.df >= 4 THEN g.ss WHEN h.df >= 4 THEN h.ss ELSE pow(0.22, 2) * 20 END AS run_ss,
           CASE WHEN g.df >= 4 THEN CAST(g.df AS INTEGER) WHEN h.df >= 4 THEN CAST(h.df AS INTEGER) ELSE 20 END
               AS run_sd_df,
           CASE WHEN g.df >= 4 THEN g.point_var WHEN h.df >= 4 THEN h.point_var_df / h.df ELSE 0 END AS run_point_var,
           CASE WHEN g.df >= 4 THEN printf('the within-type spread of this group''s repeats (%d df)', g.df)
                WHEN h.df >= 4 THEN printf('the within-type spread of repeats of family %s in %d other group(s) of '
                                           || 'the store (%d df)', t.family, h.groups, h.df)
                ELSE '22 % in log, the run-to-run spread of p50 TPOT over 21 A/A runs on a shared host '
                     || '(docs/explanation/compare.md; 20 df)' END AS run_sd_note
    FROM t
    LEFT JOIN grp g USING (decision_group)
    LEFT JOIN (SELECT h.family, t0.decision_group, sum(h.ss) AS ss, sum(h.df) AS df, sum(h.point_var_df) AS point_var_df,
                      count(*) AS groups
               FROM hist h JOIN (SELECT DISTINCT decision_group, family FROM t) t0
                    ON t0.family = h.family AND h.decision_group <> t0.decision_group
               GROUP BY h.family, t0.decision_group) h
        ON h.family = t.family AND h.decision_group = t.decision_group
),
s AS (  -- sigma_run's estimate and its one-sided 95 % upper confidence bound (the one P uses)
    SELECT s0.*,
           sqrt(greatest(run_ss / run_sd_df - run_point_var, 0)) AS run_sd_log,
           -- chi2_0.05(k) by Wilson-Hilferty: k (1 - 2/(9k) + z_0.05 sqrt(2/(9k)))^3, z_0.05 = -1.6448536...;
           -- below the exact quantile by 2.9 % at 4 df, 0.4 % at 8, 0.04 % at 20 (a slightly wider bound)
           sqrt(greatest(run_ss / (run_sd_df * pow(1 - 2 / (9.0 * run_sd_df)
                                                   - 1.6448536269514722 * sqrt(2 / (9.0 * run_sd_df)), 3))
                         - run_point_var, 0)) AS run_sd_upper_log
    FROM s0
),
v AS (  -- the mean ln $/M under the chosen model (NULL: not priced under it)
    SELECT s.*,
           CASE WHEN bounded THEN (pow(run_sd_upper_log, 2) + point_var) / repeats END AS mean_var,
           CASE WHEN priced THEN mean_y + ln_price_ratio END AS model_y
    FROM s
)
SELECT decision_group, decision_section, model, server_config, workload, input_len, output_len, slo_name,
       ranked_basis, instance, family, repeats, measurements,
       model_y AS mean_ln_usd_per_million, exp(model_y) AS usd_per_million_output_tokens,
       sqrt(point_var) AS point_sd_log, run_sd_log, run_sd_upper_log, run_sd_source, run_sd_df, run_sd_note,
       sqrt(mean_var) AS sd_log,
       -- the points' own interval (their requests' spread): what report_decision_hardware shows per row
       CASE WHEN bounded THEN exp(model_y - 1.959963984540054 * sqrt(point_var / repeats)) END AS point_ci_low,
       CASE WHEN bounded THEN exp(model_y + 1.959963984540054 * sqrt(point_var / repeats)) END AS point_ci_high,
       -- with the run-level component: where another run on other boxes of these types may land the mean
       exp(model_y - 1.959963984540054 * sqrt(mean_var)) AS run_ci_low,
       exp(model_y + 1.959963984540054 * sqrt(mean_var)) AS run_ci_high,
       CASE WHEN NOT priced THEN printf('not priced under %s: %s; compared with no other type', pricing_model,
                                        coalesce(price_note, 'no price'))
            WHEN NOT bounded THEN 'a row without a bounded $/M interval: no point variance, P untested' END AS note,
       pricing_model, priced, exp(ln_price_ratio) AS price_over_on_demand
FROM v;

CREATE OR REPLACE VIEW report_decision_noise AS
WITH o AS (  -- read once: binding the view chain behind it is the cost of this view
    SELECT * FROM decision_noise_options
),
p AS (
    SELECT a.decision_group, a.decision_section, a.model, a.server_config, a.workload, a.input_len, a.output_len,
           a.slo_name, a.ranked_basis, a.instance, b.instance AS other_instance,
           a.usd_per_million_output_tokens, b.usd_per_million_output_tokens AS other_usd_per_million_output_tokens,
           a.repeats, b.repeats AS other_repeats, a.run_sd_source, b.run_sd_source AS other_run_sd_source,
           b.mean_ln_usd_per_million - a.mean_ln_usd_per_million AS ln_gap,
           sqrt(pow(a.sd_log, 2) + pow(b.sd_log, 2)) AS sd_ln_gap,
           coalesce(TRY_CAST(getvariable('decision_margin_pct') AS DOUBLE), 0.0) AS margin_pct, a.pricing_model
    FROM o a
    JOIN o b ON a.decision_group = b.decision_group AND a.instance <> b.instance
    WHERE a.priced AND b.priced  -- a type without a price under the model is no candidate (its note says why)
),
z AS (
    SELECT p.*,
           CASE WHEN sd_ln_gap > 0 THEN ln_gap / sd_ln_gap END AS z_cheaper,
           CASE WHEN sd_ln_gap > 0 THEN (ln_gap + ln(1 + margin_pct / 100)) / sd_ln_gap END AS z_margin,
           -- the verdict's: P(first <= (1 - 5 %) x second) and P(second <= (1 - 5 %) x first)
           CASE WHEN sd_ln_gap > 0 THEN (ln_gap + ln(1 - 0.05)) / sd_ln_gap END AS z_cheaper_by,
           CASE WHEN sd_ln_gap > 0 THEN (-ln_gap + ln(1 - 0.05)) / sd_ln_gap END AS z_dearer_by
    FROM p
),
u AS (  -- both arguments of Phi as rows, so the approximation is written once
    SELECT decision_group, instance, other_instance, 'cheaper' AS arg, z_cheaper AS x FROM z
    UNION ALL
    SELECT decision_group, instance, other_instance, 'margin' AS arg, z_margin AS x FROM z
    UNION ALL
    SELECT decision_group, instance, other_instance, 'cheaper_by' AS arg, z_cheaper_by AS x FROM z
    UNION ALL
    SELECT decision_group, instance, other_instance, 'dearer_by' AS arg, z_dearer_by AS x FROM z
),
phi AS (  -- Phi(x) = 1 - phi(|x|) k (b1 + k (b2 + k (b3 + k (b4 + k b5)))), k = 1 / (1 + 0.2316419 |x|), for x >= 0
    SELECT decision_group, instance, other_instance, arg,
           CASE WHEN x >= 0 THEN 1 - tail ELSE tail END AS p
    FROM u, LATERAL (SELECT 1 / (1 + 0.2316419 * abs(u.x)) AS k) kk,
         LATERAL (SELECT 0.3989422804014327 * exp(-u.x * u.x / 2) * kk.k
                         * (0.319381530 + kk.k * (-0.356563782 + kk.k * (1.781477937 + kk.k
                            * (-1.821255978 + kk.k * 1.330274429)))) AS tail) tt
),
pr AS (
    SELECT z.*, c.p AS p_cheaper, m.p AS p_within_margin, cb.p AS p_cheaper_by_margin, db.p AS p_dearer_by_margin
    FROM z
    LEFT JOIN phi c ON c.arg = 'cheaper' AND c.decision_group = z.decision_group AND c.instance = z.instance
                       AND c.other_instance = z.other_instance
    LEFT JOIN phi m ON m.arg = 'margin' AND m.decision_group = z.decision_group AND m.instance = z.instance
                       AND m.other_instance = z.other_instance
    LEFT JOIN phi cb ON cb.arg = 'cheaper_by' AND cb.decision_group = z.decision_group AND cb.instance = z.instance
                        AND cb.other_instance = z.other_instance
    LEFT JOIN phi db ON db.arg = 'dearer_by' AND db.decision_group = z.decision_group AND db.instance = z.instance
                        AND db.other_instance = z.other_instance
)
SELECT decision_group, decision_section, model, server_config, workload, input_len, output_len, slo_name,
       ranked_basis, instance, other_instance, usd_per_million_output_tokens, other_usd_per_million_output_tokens,
       repeats, other_repeats, run_sd_source, other_run_sd_source, ln_gap, sd_ln_gap, p_cheaper,
       margin_pct, p_within_margin, 5.0 AS verdict_margin_pct, p_cheaper_by_margin, 0.99 AS p_threshold,
       CASE WHEN p_cheaper IS NULL THEN 'untested' WHEN p_cheaper_by_margin >= 0.99 THEN 'cheaper'
            WHEN p_dearer_by_margin >= 0.99 THEN 'more expensive' ELSE 'not decided' END AS verdict,
       CASE WHEN p_cheaper IS NULL THEN 'no bounded $/M interval on one side: no variance to judge it by'
            ELSE printf('P(cheaper) = %.3f, P(at least 5 %% cheaper) = %.3f at %s prices (sd of the ln $/M gap %.3g; '
                        || 'run-level sd from %s here, %s for %s); "cheaper" needs P(at least 5 %% cheaper) >= 0.99',
                        p_cheaper, p_cheaper_by_margin, pricing_model, sd_ln_gap, run_sd_source, other_run_sd_source,
                        other_instance) END AS verdict_note,
       pricing_model
FROM pr;

-- The verdict with run-to-run noise per type of a group, from its pairs above: 'cheapest' when it is 'cheaper' than
-- every other candidate type, 'more expensive' when another type is 'cheaper' than it (named), 'untested' when a
-- pair has no P, else 'not decided'. The Decision's hardware table shows it beside the per-point verdict.
CREATE OR REPLACE VIEW report_decision_standing AS
SELECT decision_group, instance, count(*) AS others,
       count(*) FILTER (WHERE verdict = 'cheaper') AS cheaper_than,
       count(*) FILTER (WHERE verdict = 'more expensive') AS dearer_than,
       CASE WHEN count(*) FILTER (WHERE verdict = 'untested') > 0 THEN 'untested'
            WHEN count(*) FILTER (WHERE verdict = 'cheaper') = count(*) THEN 'cheapest'
            WHEN count(*) FILTER (WHERE verdict = 'more expensive') > 0 THEN 'more expensive'
            ELSE 'not decided' END AS standing,
       CASE WHEN count(*) FILTER (WHERE verdict = 'untested') > 0
            THEN 'no P against ' || string_agg(other_instance, ', ' ORDER BY other_instance)
                 FILTER (WHERE verdict = 'untested')
            WHEN count(*) FILTER (WHERE verdict = 'cheaper') = count(*)
            THEN printf('at least 5 %% cheaper than each of the %d other type(s) at P >= 0.99', count(*))
            WHEN count(*) FILTER (WHERE verdict = 'more expensive') > 0
            THEN 'at least 5 % cheaper than it at P >= 0.99: ' || string_agg(other_instance, ', ' ORDER BY other_instance)
                 FILTER (WHERE verdict = 'more expensive')
            ELSE 'not told apart at P(at least 5 % cheaper) >= 0.99 from '
                 || string_agg(other_instance, ', ' ORDER BY other_instance) FILTER (WHERE verdict <> 'cheaper')
       END AS standing_note
FROM report_decision_noise
GROUP BY decision_group, instance;
