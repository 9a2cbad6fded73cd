-- Capacity at an SLO, found by search (rule 14; pipeline/capacity.py; docs/reference/metrics.md "Capacity").
-- CREATE OR REPLACE VIEW statements only. Runs after 75_report_decision.sql (reads slo_points, report_decision).
-- Views defined here:
--   capacity_points          every point of a capacity search (sweep_points.search_json kind 'capacity'): offered
--                            and achieved rate, burstiness, arrival seed, duration, attainment, the point's
--                            verdict and why it failed (the pass rule below), and the validity rule's exclusion.
--   report_capacity          per (run, instance, lane, model, server config, workload, shape, SLO, search): the
--                            bracket (max_rate_meeting_slo, lowest_rate_missing_slo), goodput at the passing rate
--                            with intervals, the points and their verdicts, the stop reasons, the search's wall
--                            time, and $ per million output tokens at the passing rate with its interval.
--   report_decision_at_rate  report_decision with, beside each row's concurrency answer, the max sustainable rate
--                            at the SLO (its bracket, $/M output tokens at that rate with its interval) and which
--                            answer to use.
-- The pass rule: a point passes when it was not cut short (stop_reason NULL: the saturation rules), it meets the
-- SLO by the Decision's rule (slo_points.slo_met: not invalid, p{percentile} TTFT and TPOT within the bounds) and
-- its attainment (good requests / requests sent; goodput's per-request rule, a request still in flight after the
-- grace counting as sent and not good) is at least the search's attainment target. An aggregate-only point
-- (imported) reads its attainment from serving_aggregates.stats_json slo_attainment_pct.
-- The bracket: lowest_rate_missing_slo = the lowest failing offered rate; max_rate_meeting_slo = the highest
-- passing rate below it; points excluded by the validity rule (report_point_validity) count for neither.
-- Goodput tok/s = output tokens of good requests / the point's duration; its interval is goodput req/s's interval
-- times the mean output tokens of a good request.

CREATE OR REPLACE VIEW capacity_points AS
WITH sp AS (
    SELECT run_id, lane, point_id, any_value(search_json) AS search_json, any_value(stop_reason) AS stop_reason,
           any_value(request_rate) AS offered_rate, any_value(burstiness) AS burstiness,
           any_value(seed) AS arrival_seed, any_value(window_start) AS window_start,
           any_value(window_end) AS window_end, any_value(mode) AS mode
    FROM sweep_points
    WHERE json_extract_string(search_json, '$.kind') = 'capacity'
    GROUP BY ALL
),
req AS (
    SELECT run_id, lane, point_id, count(*) AS sent, count(*) FILTER (WHERE good) AS good_requests,
           sum(output_tokens) FILTER (WHERE good) AS good_output_tokens
    FROM request_slo GROUP BY ALL
),
agg AS (
    SELECT run_id, lane, point_id,
           TRY_CAST(json_extract(stats_json, '$.slo_attainment_pct') AS DOUBLE) / 100.0 AS attainment,
           TRY_CAST(json_extract(stats_json, '$.goodput_output_tokens_per_s') AS DOUBLE) AS goodput_tok_s
    FROM serving_aggregates
),
j AS (
    SELECT sp.*, json_extract_string(sp.search_json, '$.search_id') AS search_id,
           json_extract_string(sp.search_json, '$.phase') AS phase,
           TRY_CAST(json_extract(sp.search_json, '$.step') AS INTEGER) AS step,
           coalesce(TRY_CAST(json_extract(sp.search_json, '$.attainment') AS DOUBLE), 0.99) AS attainment_target,
           TRY_CAST(json_extract(sp.search_json, '$.precision') AS DOUBLE) AS search_precision,
           TRY_CAST(json_extract(sp.search_json, '$.rate_max') AS DOUBLE) AS search_rate_max,
           p.model, p.server_config, p.workload, p.input_len, p.output_len, p.instance, p.price_basis,
           p.priced_instance_type,
           p.reference_usd_per_hour, p.metric_basis, p.valid, p.invalid_reason, p.completed, p.failed,
           p.slo_name, p.slo_ttft_ms, p.slo_tpot_ms, p.slo_percentile, p.slo_met, p.slo_miss_reason,
           p.slo_ttft_value_ms, p.slo_tpot_value_ms, p.p50_ttft_ms, p.p99_ttft_ms, p.p99_tpot_ms,
           p.output_throughput, p.output_throughput_ci_low, p.output_throughput_ci_high,
           p.goodput, p.goodput_ci_low, p.goodput_ci_high,
           -- a rate at which the server completed nothing is a failing rate (rule 8), never an exclusion
           CASE WHEN coalesce(p.completed, 0) = 0 AND p.valid IS FALSE THEN NULL ELSE p.excluded_reason END
               AS excluded_reason,
           s.achieved_rate, coalesce(s.duration, a2.duration) AS duration,
           coalesce(r.sent, p.completed + p.failed) AS sent, r.good_requests,
           coalesce(r.good_requests / nullif(r.sent, 0), ag.attainment) AS attained,
           coalesce(r.good_output_tokens / nullif(coalesce(s.duration, a2.duration), 0), ag.goodput_tok_s)
               AS goodput_tok_s,
           r.good_output_tokens / nullif(r.good_requests, 0) AS tokens_per_good_request
    FROM sp
    JOIN slo_points p USING (run_id, lane, point_id)
    LEFT JOIN req r USING (run_id, lane, point_id)
    LEFT JOIN agg ag USING (run_id, lane, point_id)
    LEFT JOIN serving_points s USING (run_id, lane, point_id)
    LEFT JOIN serving_aggregates a2 USING (run_id, lane, point_id)
)
SELECT j.* EXCLUDE (tokens_per_good_request),
       goodput_ci_low * tokens_per_good_request AS goodput_tok_s_ci_low,
       goodput_ci_high * tokens_per_good_request AS goodput_tok_s_ci_high,
       offered_rate IS NOT NULL AND stop_reason IS NULL AND coalesce(slo_met, false)
           AND coalesce(attained >= attainment_target, false) AS passed,
       CASE WHEN offered_rate IS NULL THEN 'not an open-loop point (the search''s closed-loop probe)'
            ELSE nullif(concat_ws('; ', stop_reason,
                 CASE WHEN NOT coalesce(slo_met, false) THEN coalesce(slo_miss_reason, 'SLO not met') END,
                 CASE WHEN attained IS NULL THEN 'no attainment recorded'
                      WHEN attained < attainment_target
                      THEN printf('attainment %.1f %% < %.1f %%', 100 * attained, 100 * attainment_target) END),
                 '') END AS fail_reason
FROM j;

CREATE OR REPLACE VIEW report_capacity AS
WITH counted AS (
    SELECT * FROM capacity_points WHERE offered_rate IS NOT NULL
),
keyed AS (
    SELECT c.*,
           min(offered_rate) FILTER (WHERE NOT passed AND excluded_reason IS NULL) OVER w AS hi
    FROM counted c
    WINDOW w AS (PARTITION BY run_id, instance, lane, model, server_config, workload, input_len, output_len, slo_name,
                              search_id)
),
b AS (
    SELECT run_id, instance, lane, model, server_config, workload, input_len, output_len, slo_name, search_id,
           any_value(slo_ttft_ms) AS slo_ttft_ms, any_value(slo_tpot_ms) AS slo_tpot_ms,
           any_value(slo_percentile) AS slo_percentile, any_value(attainment_target) AS attainment_target,
           any_value(search_precision) AS search_precision, any_value(search_rate_max) AS search_rate_max,
           any_value(priced_instance_type) AS priced_instance_type, any_value(price_basis) AS price_basis,
           any_value(reference_usd_per_hour) AS reference_usd_per_hour,
           any_value(hi) AS lowest_rate_missing_slo,
           max(offered_rate) FILTER (WHERE passed AND excluded_reason IS NULL AND (hi IS NULL OR offered_rate < hi))
               AS max_rate_meeting_slo,
           count(*) AS points,
           count(*) FILTER (WHERE excluded_reason IS NOT NULL) AS points_excluded,
           count(*) FILTER (WHERE stop_reason IS NOT NULL) AS points_saturated,
           string_agg(printf('%.4g %s', offered_rate,
                             CASE WHEN excluded_reason IS NOT NULL THEN 'excluded'
                                  WHEN passed THEN 'pass' ELSE 'fail' END), ', ' ORDER BY offered_rate)
               AS verdicts,
           -- ordered: the report is rebuilt byte for byte from the same rows (an unordered aggregate is not)
           string_agg(DISTINCT stop_reason, '; ' ORDER BY stop_reason) AS stop_reasons,
           epoch(max(window_end)) - epoch(min(window_start)) AS search_wall_s,
           any_value(metric_basis) AS metric_basis
    FROM keyed GROUP BY ALL
),
at_rate AS (
    SELECT b.*, p.point_id AS passing_point_id, p.achieved_rate, p.attained,
           p.goodput, p.goodput_ci_low, p.goodput_ci_high,
           p.goodput_tok_s, p.goodput_tok_s_ci_low, p.goodput_tok_s_ci_high,
           p.output_throughput, p.output_throughput_ci_low, p.output_throughput_ci_high,
           p.p99_ttft_ms, p.p99_tpot_ms
    FROM b LEFT JOIN LATERAL (
        -- `counted`, not capacity_points again: the same rows here (the rate is not NULL), and a view named twice is
        -- bound and planned twice (this view's planning took 5x as long)
        SELECT * FROM counted x
        WHERE x.run_id = b.run_id AND x.lane = b.lane AND x.search_id IS NOT DISTINCT FROM b.search_id
          AND x.slo_name IS NOT DISTINCT FROM b.slo_name AND x.model IS NOT DISTINCT FROM b.model
          AND x.server_config IS NOT DISTINCT FROM b.server_config AND x.workload IS NOT DISTINCT FROM b.workload
          AND x.input_len IS NOT DISTINCT FROM b.input_len AND x.output_len IS NOT DISTINCT FROM b.output_len
          AND x.offered_rate = b.max_rate_meeting_slo AND x.passed AND x.excluded_reason IS NULL
        ORDER BY x.point_id LIMIT 1) p ON true
)
SELECT a.* EXCLUDE (priced_instance_type, reference_usd_per_hour),
       a.priced_instance_type AS instance_type,
       a.max_rate_meeting_slo IS NOT NULL AS found,
       coalesce(a.reference_usd_per_hour, ip.usd_per_hour) AS usd_per_hour,
       ip.price_date, ip.region AS price_region,
       CASE WHEN a.reference_usd_per_hour IS NOT NULL THEN 'declared at import' ELSE ip.source END AS price_source,
       coalesce(a.reference_usd_per_hour, ip.usd_per_hour) / nullif(a.output_throughput * 3600.0, 0) * 1e6
           AS usd_per_million_output_tokens,
       -- the throughput interval inverted, as report_decision's (the high throughput bound gives the low $/M bound)
       coalesce(a.reference_usd_per_hour, ip.usd_per_hour) / nullif(a.output_throughput_ci_high * 3600.0, 0) * 1e6
           AS usd_per_million_output_tokens_ci_low,
       CASE WHEN a.output_throughput_ci_low > 0
            THEN coalesce(a.reference_usd_per_hour, ip.usd_per_hour) / (a.output_throughput_ci_low * 3600.0) * 1e6 END
           AS usd_per_million_output_tokens_ci_high,
       CASE WHEN a.max_rate_meeting_slo IS NULL AND a.lowest_rate_missing_slo IS NOT NULL
            THEN printf('no rate meets the SLO: %.4g req/s, the lowest measured, fails', a.lowest_rate_missing_slo)
            WHEN a.lowest_rate_missing_slo IS NULL AND a.max_rate_meeting_slo IS NOT NULL
                 AND a.max_rate_meeting_slo >= a.search_rate_max * (1 - 1e-9)
            THEN printf('no measured rate fails: capacity is at least %.4g req/s (the top of the range)',
                        a.max_rate_meeting_slo)
            WHEN a.lowest_rate_missing_slo IS NULL AND a.max_rate_meeting_slo IS NOT NULL AND a.points_excluded > 0
            THEN printf('no counted rate fails: capacity is at least %.4g req/s; %d of %d point(s) excluded by the '
                        'validity rule count for neither side (see Failures and exclusions)',
                        a.max_rate_meeting_slo, a.points_excluded, a.points)
            WHEN a.lowest_rate_missing_slo IS NULL AND a.max_rate_meeting_slo IS NOT NULL
            THEN printf('no measured rate fails yet: capacity is at least %.4g req/s; the search stopped before '
                        'a rate failed (budget, or killed: a resume continues it)', a.max_rate_meeting_slo)
            WHEN a.max_rate_meeting_slo IS NULL
            THEN printf('no point counted: %d of %d excluded by the validity rule (see Failures and exclusions)',
                        a.points_excluded, a.points)
            WHEN (a.lowest_rate_missing_slo - a.max_rate_meeting_slo) / a.max_rate_meeting_slo
                 <= coalesce(a.search_precision, 0) * (1 + 1e-9)
            THEN printf('bracket within precision %g', a.search_precision)
            WHEN a.points_excluded > 0
            THEN printf('bracket [%.4g, %.4g] wider than the precision %s: %d of %d point(s) excluded by the '
                        'validity rule count for neither side (see Failures and exclusions)',
                        a.max_rate_meeting_slo, a.lowest_rate_missing_slo,
                        coalesce(CAST(a.search_precision AS VARCHAR), 'declared'), a.points_excluded, a.points)
            ELSE printf('bracket [%.4g, %.4g] wider than the precision %s: the search stopped early (budget, or '
                        'killed: a resume continues it)', a.max_rate_meeting_slo, a.lowest_rate_missing_slo,
                        coalesce(CAST(a.search_precision AS VARCHAR), 'declared')) END AS outcome,
       -- % of the limit at the max sustainable rate: its point's output tok/s against the roofline's bound
       a.output_throughput / rl.output_tokens_per_s_bound AS limit_fraction, rl.output_tokens_per_s_bound,
       rl.hardware AS roofline_hardware
FROM at_rate a
LEFT JOIN instance_prices ip ON ip.instance_type = a.priced_instance_type AND a.reference_usd_per_hour IS NULL
LEFT JOIN point_bounds rl ON rl.run_id = a.run_id AND rl.lane = a.lane AND rl.point_id = a.passing_point_id;

CREATE OR REPLACE VIEW report_decision_at_rate AS
WITH c AS (
    SELECT run_id, instance, lane AS capacity_lane, model, server_config, workload, input_len, output_len, slo_name,
           max_rate_meeting_slo, lowest_rate_missing_slo, found AS rate_found, outcome AS rate_outcome,
           goodput AS rate_goodput, goodput_ci_low AS rate_goodput_ci_low, goodput_ci_high AS rate_goodput_ci_high,
           goodput_tok_s AS rate_goodput_tok_s, goodput_tok_s_ci_low AS rate_goodput_tok_s_ci_low,
           goodput_tok_s_ci_high AS rate_goodput_tok_s_ci_high,
           output_throughput AS rate_output_throughput, output_throughput_ci_low AS rate_output_throughput_ci_low,
           output_throughput_ci_high AS rate_output_throughput_ci_high,
           usd_per_million_output_tokens AS rate_usd_per_million_output_tokens,
           usd_per_million_output_tokens_ci_low AS rate_usd_per_million_output_tokens_ci_low,
           usd_per_million_output_tokens_ci_high AS rate_usd_per_million_output_tokens_ci_high,
           usd_per_hour AS rate_usd_per_hour, slo_ttft_ms AS c_slo_ttft_ms, slo_tpot_ms AS c_slo_tpot_ms,
           slo_percentile AS c_slo_percentile, points AS rate_points,
           instance_type AS c_instance_type, price_basis AS c_price_basis, price_date AS c_price_date,
           price_region AS c_price_region, price_source AS c_price_source,
           row_number() OVER (PARTITION BY run_id, instance, model, server_config, workload, input_len, output_len,
                                           slo_name
                              ORDER BY lane, search_id) AS k
    FROM report_capacity
)
SELECT coalesce(d.run_id, c.run_id) AS run_id, coalesce(d.instance, c.instance) AS instance,
       d.* EXCLUDE (run_id, instance, model, server_config, workload, input_len, output_len, slo_name, slo_ttft_ms,
                    slo_tpot_ms, slo_percentile, lane, usd_per_hour, instance_type, price_basis, price_date,
                    price_region, price_source),
       coalesce(d.instance_type, c.c_instance_type) AS instance_type,
       coalesce(d.price_basis, c.c_price_basis) AS price_basis,
       coalesce(d.lane, c.capacity_lane) AS lane, coalesce(d.model, c.model) AS model,
       coalesce(d.server_config, c.server_config) AS server_config, coalesce(d.workload, c.workload) AS workload,
       coalesce(d.input_len, c.input_len) AS input_len, coalesce(d.output_len, c.output_len) AS output_len,
       coalesce(d.slo_name, c.slo_name) AS slo_name, coalesce(d.slo_ttft_ms, c.c_slo_ttft_ms) AS slo_ttft_ms,
       coalesce(d.slo_tpot_ms, c.c_slo_tpot_ms) AS slo_tpot_ms,
       coalesce(d.slo_percentile, c.c_slo_percentile) AS slo_percentile,
       coalesce(d.usd_per_hour, c.rate_usd_per_hour) AS usd_per_hour,
       CASE WHEN d.run_id IS NOT NULL THEN d.price_date ELSE c.c_price_date END AS price_date,
       CASE WHEN d.run_id IS NOT NULL THEN d.price_region ELSE c.c_price_region END AS price_region,
       CASE WHEN d.run_id IS NOT NULL THEN d.price_source ELSE c.c_price_source END AS price_source,
       c.* EXCLUDE (run_id, instance, model, server_config, workload, input_len, output_len, slo_name, c_slo_ttft_ms,
                    c_slo_tpot_ms, c_slo_percentile, rate_usd_per_hour, k, c_instance_type, c_price_basis,
                    c_price_date, c_price_region, c_price_source),
       CASE WHEN c.rate_found THEN 'rate'
            WHEN coalesce(d.meets, false) THEN 'concurrency' END AS decision_basis,
       CASE WHEN c.rate_found AND coalesce(d.meets, false)
            THEN 'use the rate: open-loop arrivals build the queue production traffic does; the closed-loop '
                 || 'concurrency never overloads the server (each stream waits for its answer), so it is context'
            WHEN c.rate_found THEN 'the rate: the only answer measured for this row'
            WHEN coalesce(d.meets, false) AND c.capacity_lane IS NOT NULL
            THEN 'the concurrency: the capacity search found no rate meeting the SLO (' || c.rate_outcome || ')'
            WHEN coalesce(d.meets, false) THEN 'the concurrency: no capacity search for this row' END
           AS decision_basis_reason
FROM report_decision d
FULL OUTER JOIN (SELECT * FROM c WHERE k = 1) c
  ON c.run_id = d.run_id AND c.instance = d.instance AND c.model IS NOT DISTINCT FROM d.model
 AND c.server_config IS NOT DISTINCT FROM d.server_config AND c.workload IS NOT DISTINCT FROM d.workload
 AND c.input_len IS NOT DISTINCT FROM d.input_len
 AND c.output_len IS NOT DISTINCT FROM d.output_len AND c.slo_name IS NOT DISTINCT FROM d.slo_name;
