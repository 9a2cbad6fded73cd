-- The Decision across hardware (docs/reference/slo.md "Across instance types"). CREATE OR REPLACE VIEW statements
-- only. Runs after 76_report_capacity.sql (reads report_decision_at_rate) and 30_prices.sql (instance_catalogue).
-- View defined here:
--   report_decision_hardware  per (model, server config, workload, shape, SLO) — the ranking group — one row per
--                             (run, instance, lane) of the serving lanes a run matrix fans out (serve_sweep and
--                             capacity, as `<lane>` or `<lane>@<cell>`) and per imported reference: the type's
--                             family and accelerator, its closed-loop capacity (report_decision) and open-loop
--                             capacity (report_capacity) at the SLO with $/M output tokens and their intervals,
--                             the basis the group is ranked on, and the verdict. decision_section (the group
--                             without its server config) is the report's table and plot.
-- The ranked basis of a group: the open-loop rate ('rate') when any type measured here found one, else the
-- closed-loop concurrency ('concurrency') — the rule report_decision_at_rate states for one row, held for the whole
-- group so types are compared on one answer. Candidates: rows measured here (not references) with a $/M at that
-- basis. By $/M (point estimate; ties by instance, run, lane) the first candidate is the cheapest; a candidate
-- whose $/M 95 % interval overlaps the cheapest's is 'tied within noise' (and then so is the cheapest); a candidate
-- clear of it is 'ranked' (price_rank); a row or cheapest without an interval cannot be compared: 'untested'.
-- The cheapest is 'cheapest' only when every other candidate's interval is clear of its own. A missing upper $/M
-- bound (the lower throughput bound reached 0) is unbounded above. One candidate: 'only candidate' (nothing to
-- rank). A row with no $/M at the basis: 'SLO never met' (no point or rate meets the SLO), 'closed loop only' (it
-- meets closed loop but has no capacity search, while the group ranks on rates) or 'not priced'. A reference is
-- 'measured elsewhere' and never ranked. The intervals are each point's own (its requests' spread; see
-- 11_serving_intervals.sql): non-overlap says two points differ beyond their own noise, not a run-level test
-- (rule 13).

CREATE OR REPLACE VIEW report_decision_hardware AS
WITH a AS (
    SELECT d.*,
           coalesce(d.price_basis = 'reference', false) OR starts_with(d.instance, 'reference: ') AS is_reference,
           -- a matrix cell's lane is <lane>@c<digits>, a repeat's <lane>@c<digits>r<run> (control_plane.adaptive_waves);
           -- <lane>@<box> names a pinned box, not a cell
           CASE WHEN regexp_matches(split_part(d.lane, '@', 2), '^c[0-9]+(r[0-9]+)?$') THEN split_part(d.lane, '@', 2) END
               AS cell
    FROM report_decision_at_rate d
    WHERE split_part(d.lane, '@', 1) IN ('serve_sweep', 'capacity', 'reference')
),
g AS (
    SELECT a.*,
           CASE WHEN bool_or(coalesce(rate_found, false) AND NOT is_reference) OVER grp THEN 'rate'
                ELSE 'concurrency' END AS group_basis,
           -- the ranking group, and the report's table (the group without the server config: references, whose
           -- config is their label, sit beside the types measured here)
           concat_ws(' · ', model, server_config, workload, shape, slo_name) AS decision_group,
           concat_ws(' · ', model, workload, shape, slo_name) AS decision_section
    FROM a, LATERAL (SELECT CAST(a.input_len AS VARCHAR) || ':' || CAST(a.output_len AS VARCHAR) AS shape) sh
    WINDOW grp AS (PARTITION BY model, server_config, workload, input_len, output_len, slo_name)
),
v AS (  -- the figures at the basis the row is read on (a reference: its own answer)
    SELECT g.*, b.ranked_basis,
           CASE b.ranked_basis WHEN 'rate' THEN coalesce(rate_found, false) ELSE coalesce(meets, false) END AS met,
           CASE b.ranked_basis WHEN 'rate' THEN rate_output_throughput
                WHEN 'concurrency' THEN output_throughput END AS capacity_tok_s,
           CASE b.ranked_basis WHEN 'rate' THEN rate_output_throughput_ci_low
                WHEN 'concurrency' THEN output_throughput_ci_low END AS capacity_tok_s_ci_low,
           CASE b.ranked_basis WHEN 'rate' THEN rate_output_throughput_ci_high
                WHEN 'concurrency' THEN output_throughput_ci_high END AS capacity_tok_s_ci_high,
           CASE b.ranked_basis WHEN 'rate' THEN rate_usd_per_million_output_tokens
                WHEN 'concurrency' THEN usd_per_million_output_tokens END AS ranked_usd_per_million_output_tokens,
           CASE b.ranked_basis WHEN 'rate' THEN rate_usd_per_million_output_tokens_ci_low
                WHEN 'concurrency' THEN usd_per_million_output_tokens_ci_low END
               AS ranked_usd_per_million_output_tokens_ci_low,
           CASE b.ranked_basis WHEN 'rate' THEN rate_usd_per_million_output_tokens_ci_high
                WHEN 'concurrency' THEN usd_per_million_output_tokens_ci_high END
               AS ranked_usd_per_million_output_tokens_ci_high
    FROM g, LATERAL (SELECT CASE WHEN g.is_reference THEN g.decision_basis ELSE g.group_basis END AS ranked_basis) b
),
c AS (
    SELECT v.*,
           NOT is_reference AND met AND ranked_usd_per_million_output_tokens IS NOT NULL AS candidate
    FROM v
),
o AS (  -- the order of the candidates by $/M
    SELECT c.*,
           CASE WHEN candidate THEN row_number() OVER (
                PARTITION BY model, server_config, workload, input_len, output_len, slo_name, candidate
                ORDER BY ranked_usd_per_million_output_tokens, instance, run_id, lane) END AS position,
           CASE WHEN candidate THEN rank() OVER (
                PARTITION BY model, server_config, workload, input_len, output_len, slo_name, candidate
                ORDER BY ranked_usd_per_million_output_tokens) END AS price_rank
    FROM c
),
ch AS (  -- the cheapest candidate of each group beside every row
    SELECT o.*,
           count(*) FILTER (WHERE candidate) OVER grp AS candidates,
           max(instance) FILTER (WHERE position = 1) OVER grp AS cheapest_instance,
           max(ranked_usd_per_million_output_tokens_ci_low) FILTER (WHERE position = 1) OVER grp AS cheapest_low,
           -- NULL upper bound with a lower one: unbounded above
           max(coalesce(ranked_usd_per_million_output_tokens_ci_high, 'infinity'::DOUBLE)) FILTER (
               WHERE position = 1 AND ranked_usd_per_million_output_tokens_ci_low IS NOT NULL) OVER grp AS cheapest_high
    FROM o
    WINDOW grp AS (PARTITION BY model, server_config, workload, input_len, output_len, slo_name)
),
x AS (  -- each other candidate against the cheapest: overlaps (true), clear (false), cannot tell (NULL)
    SELECT ch.*,
           CASE WHEN candidate AND position > 1 AND cheapest_low IS NOT NULL
                     AND ranked_usd_per_million_output_tokens_ci_low IS NOT NULL
                THEN ranked_usd_per_million_output_tokens_ci_low <= cheapest_high
                     AND cheapest_low <= coalesce(ranked_usd_per_million_output_tokens_ci_high, 'infinity'::DOUBLE)
           END AS overlaps_cheapest
    FROM ch
),
y AS (
    SELECT x.*,
           count(*) FILTER (WHERE candidate AND position > 1 AND overlaps_cheapest) OVER grp AS tied,
           count(*) FILTER (WHERE candidate AND position > 1 AND overlaps_cheapest IS NULL) OVER grp AS untested,
           string_agg(instance, ', ' ORDER BY instance) FILTER (WHERE candidate AND position > 1 AND overlaps_cheapest)
               OVER grp
               AS tied_instances
    FROM x
    WINDOW grp AS (PARTITION BY model, server_config, workload, input_len, output_len, slo_name)
),
verdicts AS (
    SELECT y.*,
           CASE WHEN is_reference THEN 'measured elsewhere'
                WHEN NOT met AND ranked_basis = 'rate' AND capacity_lane IS NULL AND coalesce(meets, false)
                THEN 'closed loop only'
                WHEN NOT met THEN 'SLO never met'
                WHEN NOT candidate THEN 'not priced'
                WHEN candidates = 1 THEN 'only candidate'
                WHEN position = 1 AND tied > 0 THEN 'tied within noise'
                WHEN position = 1 AND (untested > 0 OR cheapest_low IS NULL) THEN 'untested'
                WHEN position = 1 THEN 'cheapest'
                WHEN overlaps_cheapest THEN 'tied within noise'
                WHEN overlaps_cheapest IS NULL THEN 'untested'
                ELSE 'ranked' END AS verdict
    FROM y
)
SELECT run_id, instance, instance_type, price_basis, is_reference,
       ic.family, ic.accelerator, ic.accelerators, lane, cell, capacity_lane,
       model, server_config, workload, input_len, output_len, slo_name, slo_ttft_ms, slo_tpot_ms, slo_percentile,
       decision_group, decision_section,
       -- closed loop (report_decision)
       meets, max_concurrency, at_grid_top, point_id, metric_basis,
       output_throughput, output_throughput_ci_low, output_throughput_ci_high,
       usd_per_million_output_tokens, usd_per_million_output_tokens_ci_low, usd_per_million_output_tokens_ci_high,
       -- open loop (report_capacity)
       rate_found, max_rate_meeting_slo, lowest_rate_missing_slo, rate_outcome,
       rate_output_throughput, rate_output_throughput_ci_low, rate_output_throughput_ci_high,
       rate_goodput_tok_s, rate_goodput_tok_s_ci_low, rate_goodput_tok_s_ci_high,
       rate_usd_per_million_output_tokens, rate_usd_per_million_output_tokens_ci_low,
       rate_usd_per_million_output_tokens_ci_high,
       -- what the group is ranked on
       group_basis, ranked_basis, capacity_tok_s, capacity_tok_s_ci_low, capacity_tok_s_ci_high,
       ranked_usd_per_million_output_tokens, ranked_usd_per_million_output_tokens_ci_low,
       ranked_usd_per_million_output_tokens_ci_high,
       usd_per_hour, price_date, price_region, price_source,
       candidate, candidates, price_rank, cheapest_instance, overlaps_cheapest, verdict,
       CASE verdict
            WHEN 'measured elsewhere' THEN 'a reference measured elsewhere (imported): shown beside the types measured '
                 || 'here, never ranked against them'
            WHEN 'closed loop only'
            THEN printf('meets the SLO closed loop (c=%d) but has no capacity search; the group '
                 || 'ranks the types on their open-loop rate, so this one is not ranked', max_concurrency)
            WHEN 'SLO never met' THEN CASE
                 WHEN ranked_basis = 'rate' AND capacity_lane IS NOT NULL AND coalesce(meets, false)
                 THEN printf('open loop: %s; closed loop meets at c=%d (context, not the answer)', rate_outcome,
                             max_concurrency)
                 WHEN ranked_basis = 'rate' AND capacity_lane IS NOT NULL
                 THEN 'open loop: ' || rate_outcome || coalesce('; closed loop: ' || note, '')
                 ELSE 'no $/M at the SLO: ' || coalesce(note, 'no point meets the SLO') END
            WHEN 'not priced' THEN 'meets the SLO, but no $/M: ' || coalesce(note, 'no price')
            WHEN 'only candidate' THEN 'the only type here with a $/M at the SLO: nothing to rank against'
            WHEN 'cheapest'
            THEN printf('lowest $/M of %d; every other type''s interval is clear of its own', candidates)
            WHEN 'tied within noise' THEN CASE WHEN position = 1
                 THEN 'lowest $/M by point estimate, but the interval of ' || tied_instances || ' overlaps its own'
                 ELSE 'its $/M interval overlaps the cheapest''s (' || cheapest_instance || ')' END
            WHEN 'untested' THEN CASE WHEN position = 1
                 THEN 'lowest $/M by point estimate; no interval to tell it from every other type (an aggregate-only '
                      || 'point, or no throughput interval)'
                 ELSE printf('rank %d by point estimate; no interval to tell it from the cheapest (%s)', price_rank,
                             cheapest_instance) END
            WHEN 'ranked' THEN printf('rank %d of %d by $/M: above the cheapest (%s) beyond both intervals',
                                      price_rank, candidates, cheapest_instance)
       END AS verdict_note,
       note, decision_basis, decision_basis_reason
FROM verdicts
LEFT JOIN instance_catalogue ic USING (instance_type);
