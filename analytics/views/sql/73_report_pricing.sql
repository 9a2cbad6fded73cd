-- Prices as a choice (docs/reference/metrics.md "Pricing models"). CREATE OR REPLACE VIEW statements only. Runs after
-- 77_report_decision_hardware.sql (reads report_decision_hardware) and 30_prices.sql (instance_price_models,
-- decision_choice). Views defined here:
--   report_pricing           per instance type and pricing model, in the report's price region: $/hour as published,
--                            the effective $/hour the Decision divides, the month and source, or NULL with the reason.
--   report_decision_pricing  every row of report_decision_hardware under every pricing model: its $/M output tokens
--                            at the SLO and interval under that model, its rank among the group's candidates priced
--                            under it, the verdict under it and its words, and whether the group's order of types
--                            changes from the on-demand order (ranking_changed) or its cheapest type does
--                            (cheapest_changed).
-- $/M under a model = the on-demand $/M x effective $/hour under the model / on-demand $/hour: the capacity and its
-- interval are the row's own; only the price changes. A reference keeps its declared price (on-demand only).
-- The verdict rule is 77's, applied to the model's $/M: the cheapest is 'cheapest' when every other candidate's
-- 95 % interval is clear of its own, a candidate whose interval overlaps the cheapest's is 'tied within noise' (the
-- cheapest too), the rest 'ranked'; no interval to compare: 'untested'; one candidate: 'only candidate'. A row that
-- is a candidate on-demand but has no price under the model is 'not priced' with the price's reason. Rows that are
-- not candidates keep 77's verdict. The intervals are each point's own, as in 77.

CREATE OR REPLACE VIEW report_pricing AS
SELECT m.instance_type, m.region, m.pricing_model, m.usd_per_hour, m.effective_usd_per_hour, m.lost_fraction,
       m.price_date, m.source, m.null_reason,
       m.effective_usd_per_hour / nullif(od.usd_per_hour, 0) AS over_on_demand, m.interruptions
FROM instance_price_models m
JOIN instance_prices p ON p.instance_type = m.instance_type AND p.region = m.region
LEFT JOIN instance_price_models od
    ON od.instance_type = m.instance_type AND od.region = m.region AND od.pricing_model = 'on-demand';

CREATE OR REPLACE VIEW report_decision_pricing AS
WITH models AS (SELECT DISTINCT pricing_model FROM instance_price_models),
r AS (
    SELECT h.*, pm.pricing_model,
           CASE WHEN h.is_reference OR h.price_basis = 'reference'
                THEN CASE WHEN pm.pricing_model = 'on-demand' THEN h.usd_per_hour END
                ELSE p.effective_usd_per_hour END AS model_usd_per_hour,
           CASE WHEN h.is_reference OR h.price_basis = 'reference'
                THEN CASE WHEN pm.pricing_model <> 'on-demand' THEN 'a reference carries its declared price only' END
                WHEN h.instance_type IS NULL THEN 'instance type not recorded: no price'
                WHEN p.instance_type IS NULL THEN 'no price for ' || h.instance_type
                ELSE p.null_reason END AS model_price_note,
           p.price_date AS model_price_date, p.source AS model_price_source
    FROM report_decision_hardware h CROSS JOIN models pm
    LEFT JOIN report_pricing p ON p.instance_type = h.instance_type AND p.pricing_model = pm.pricing_model
),
s AS (
    SELECT r.*,
           r.model_usd_per_hour / nullif(r.usd_per_hour, 0) AS price_ratio
    FROM r
),
v AS (
    SELECT s.*,
           ranked_usd_per_million_output_tokens * price_ratio AS model_usd_per_million_output_tokens,
           ranked_usd_per_million_output_tokens_ci_low * price_ratio AS model_usd_per_million_output_tokens_ci_low,
           ranked_usd_per_million_output_tokens_ci_high * price_ratio AS model_usd_per_million_output_tokens_ci_high,
           candidate AND ranked_usd_per_million_output_tokens * price_ratio IS NOT NULL AS model_candidate
    FROM s
),
o AS (
    SELECT v.*,
           CASE WHEN model_candidate THEN row_number() OVER (
                PARTITION BY pricing_model, decision_group, model_candidate
                ORDER BY model_usd_per_million_output_tokens, instance, run_id, lane) END AS model_position,
           CASE WHEN model_candidate THEN rank() OVER (
                PARTITION BY pricing_model, decision_group, model_candidate
                ORDER BY model_usd_per_million_output_tokens) END AS model_price_rank
    FROM v
),
ch AS (
    SELECT o.*,
           count(*) FILTER (WHERE model_candidate) OVER grp AS model_candidates,
           max(instance) FILTER (WHERE model_position = 1) OVER grp AS model_cheapest_instance,
           max(model_usd_per_million_output_tokens_ci_low) FILTER (WHERE model_position = 1) OVER grp AS cheapest_low,
           max(coalesce(model_usd_per_million_output_tokens_ci_high, 'infinity'::DOUBLE)) FILTER (
               WHERE model_position = 1 AND model_usd_per_million_output_tokens_ci_low IS NOT NULL) OVER grp
               AS cheapest_high
    FROM o
    WINDOW grp AS (PARTITION BY pricing_model, decision_group)
),
x AS (
    SELECT ch.*,
           CASE WHEN model_candidate AND model_position > 1 AND cheapest_low IS NOT NULL
                     AND model_usd_per_million_output_tokens_ci_low IS NOT NULL
                THEN model_usd_per_million_output_tokens_ci_low <= cheapest_high
                     AND cheapest_low <= coalesce(model_usd_per_million_output_tokens_ci_high, 'infinity'::DOUBLE)
           END AS model_overlaps_cheapest
    FROM ch
),
y AS (
    SELECT x.*,
           count(*) FILTER (WHERE model_candidate AND model_position > 1 AND model_overlaps_cheapest) OVER grp AS tied,
           count(*) FILTER (WHERE model_candidate AND model_position > 1 AND model_overlaps_cheapest IS NULL) OVER grp
               AS untested,
           -- the group's order of the types priced under this model, and the on-demand order of the same types
           string_agg(instance, ' < ' ORDER BY model_position) FILTER (WHERE model_candidate) OVER grp AS model_order
    FROM x
    WINDOW grp AS (PARTITION BY pricing_model, decision_group)
),
od AS (  -- the on-demand order of the rows priced under each model, and the on-demand cheapest
    SELECT y.pricing_model, y.decision_group,
           string_agg(y.instance, ' < ' ORDER BY y.ranked_usd_per_million_output_tokens, y.instance, y.run_id, y.lane)
               FILTER (WHERE y.model_candidate) AS on_demand_order
    FROM y GROUP BY y.pricing_model, y.decision_group
),
odc AS (
    SELECT decision_group, max(model_cheapest_instance) AS on_demand_cheapest
    FROM y WHERE pricing_model = 'on-demand' GROUP BY decision_group
)
SELECT y.run_id, y.instance, y.instance_type, y.lane, y.cell, y.model, y.server_config, y.workload, y.input_len,
       y.output_len, y.slo_name, y.decision_group, y.decision_section, y.is_reference, y.ranked_basis,
       y.capacity_tok_s, y.capacity_tok_s_ci_low, y.capacity_tok_s_ci_high,
       y.pricing_model, y.usd_per_hour AS on_demand_usd_per_hour, y.model_usd_per_hour, y.model_price_date,
       y.model_price_source, y.model_price_note,
       y.ranked_usd_per_million_output_tokens AS on_demand_usd_per_million_output_tokens,
       y.model_usd_per_million_output_tokens, y.model_usd_per_million_output_tokens_ci_low,
       y.model_usd_per_million_output_tokens_ci_high,
       y.model_candidate, y.model_candidates, y.model_price_rank, y.model_cheapest_instance,
       y.model_overlaps_cheapest,
       CASE WHEN NOT y.candidate THEN y.verdict
            WHEN NOT y.model_candidate THEN 'not priced'
            WHEN y.model_candidates = 1 THEN 'only candidate'
            WHEN y.model_position = 1 AND y.tied > 0 THEN 'tied within noise'
            WHEN y.model_position = 1 AND (y.untested > 0 OR y.cheapest_low IS NULL) THEN 'untested'
            WHEN y.model_position = 1 THEN 'cheapest'
            WHEN y.model_overlaps_cheapest THEN 'tied within noise'
            WHEN y.model_overlaps_cheapest IS NULL THEN 'untested'
            ELSE 'ranked' END AS model_verdict,
       CASE WHEN NOT y.candidate THEN y.verdict_note
            WHEN NOT y.model_candidate
            THEN printf('no %s price: %s', y.pricing_model, coalesce(y.model_price_note, 'none recorded'))
            WHEN y.model_candidates = 1
            THEN printf('the only type priced under %s with a $/M at the SLO: nothing to rank against', y.pricing_model)
            WHEN y.model_position = 1 AND y.tied > 0
            THEN printf('lowest $/M under %s by point estimate, but another type''s interval overlaps its own',
                        y.pricing_model)
            WHEN y.model_position = 1 AND (y.untested > 0 OR y.cheapest_low IS NULL)
            THEN printf('lowest $/M under %s by point estimate; no interval to tell it from every other type',
                        y.pricing_model)
            WHEN y.model_position = 1
            THEN printf('lowest $/M of %d under %s; every other type''s interval is clear of its own',
                        y.model_candidates, y.pricing_model)
            WHEN y.model_overlaps_cheapest
            THEN printf('under %s, its $/M interval overlaps the cheapest''s (%s)', y.pricing_model,
                        y.model_cheapest_instance)
            WHEN y.model_overlaps_cheapest IS NULL
            THEN printf('rank %d under %s by point estimate; no interval to tell it from the cheapest (%s)',
                        y.model_price_rank, y.pricing_model, y.model_cheapest_instance)
            ELSE printf('rank %d of %d by $/M under %s: above the cheapest (%s) beyond both intervals',
                        y.model_price_rank, y.model_candidates, y.pricing_model, y.model_cheapest_instance)
       END AS model_verdict_note,
       y.model_order, od.on_demand_order,
       -- NULL where no type of the group is priced under the model: nothing to compare
       CASE WHEN y.model_candidates > 0 THEN y.model_order IS DISTINCT FROM od.on_demand_order END AS ranking_changed,
       odc.on_demand_cheapest,
       CASE WHEN y.model_candidates > 0 THEN y.model_cheapest_instance IS DISTINCT FROM odc.on_demand_cheapest END
           AS cheapest_changed
FROM y
LEFT JOIN od ON od.pricing_model = y.pricing_model AND od.decision_group = y.decision_group
LEFT JOIN odc ON odc.decision_group = y.decision_group;
