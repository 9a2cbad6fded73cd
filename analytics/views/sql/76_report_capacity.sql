-- Capacity at an SLO, found by search (rule 14; pipeline/capacity.py; docs/reference/metrics.md "Capacity").
-- CREATE OR REPLACE VIEW statements only. Runs after 75_report_decision.sql (reads slo_points, report_decision).
-- Views defined here:
--   capacity_points          every point of a capacity search (sweep_points.search_json kind 'capacity'): offered
--                            and achieved rate, burstiness, arrival seed, duration, attainment, the point's
--                            verdict and why it failed (the pass rule below), the validity rule's exclusion, and
--                            the overload evidence (in flight's slope, completions against arrivals: below).
--   report_capacity          per (run, instance, lane, model, server config, workload, shape, SLO, search): the
--                            bracket (max_rate_meeting_slo, lowest_rate_missing_slo), goodput at the passing rate
--                            with intervals, the points and their verdicts, the stop reasons, the search's wall
--                            time, and $ per million output tokens at the passing rate with its interval.
--   report_decision_at_rate  report_decision with, beside each row's concurrency answer, the max sustainable rate
--                            at the SLO (its bracket, $/M output tokens at that rate with its interval) and which
--                            answer to use. A capacity lane pairs with the serving lane of the same run, type and
--                            box (<lane>@<box>: a matrix cell, a repeat c01r2, a pinned box; '' when bare); one
--                            without a serving lane there is a row of its own.
-- The pass rule: a point passes when it was not cut short (stop_reason NULL: the saturation rules), it meets the
-- SLO by the Decision's rule (slo_points.slo_met: not invalid, p{percentile} TTFT and TPOT within the bounds) and
-- its attainment (good requests / requests sent; goodput's per-request rule, a request still in flight after the
-- grace counting as sent and not good) is at least the search's attainment target. An aggregate-only point
-- (imported) reads its attainment from serving_aggregates.stats_json slo_attainment_pct.
-- The bracket: lowest_rate_missing_slo = the lowest failing offered rate; max_rate_meeting_slo = the highest
-- passing rate below it; points excluded by the validity rule (report_point_validity) count for neither.
-- Goodput tok/s = output tokens of good requests / the point's duration; its interval is goodput req/s's interval
-- times the mean output tokens of a good request.
-- Overload, tested apart from the SLO's bounds (a loose bound passes a short overloaded point; above capacity no
-- rate is sustainable whatever the bound): the point's steady span runs from its first completion (the pipeline is
-- full) to its last arrival (the drain after it is no queue), cut into B equal windows, B = 8 from 24 requests sent
-- in the span, else floor(n / 3) (3..7), none under 9 (overloaded NULL: untested, and said). Per window: the mean
-- requests in flight (sent, not done: each request's time inside the window / the window) and the completions
-- per s. in_flight_slope is the least-squares slope of the window means on the windows' centres (req/s), its 95 %
-- interval Student t (df B - 2) on the slope's standard error; completion_rate is the mean of the window rates,
-- its interval Student t (df B - 1) on their spread. A point is overloaded when the queue grew beyond chance (the
-- slope's interval lies above 0) by at least 2 requests across the span, or when the
-- completions' interval lies below the rate that arrived in the span by at least 2 requests' worth over it (a
-- server completing less than it is offered). An overloaded point fails, whatever its latencies.

CREATE OR REPLACE VIEW capacity_points AS
WITH ov_req AS (
    SELECT r.run_id, r.lane, r.point_id, r.t_sent_ns, r.t_done_ns, r.success
    FROM requests r
    SEMI JOIN sweep_points s ON s.run_id = r.run_id AND s.lane = r.lane AND s.point_id = r.point_id
                             AND json_extract_string(s.search_json, '$.kind') = 'capacity'
    WHERE NOT r.warmup AND r.t_sent_ns IS NOT NULL
),
ov_span AS (
    SELECT o.*, (o.s1 - o.s0) / 1e9 AS span_s,
           CAST(CASE WHEN o.n >= 24 THEN 8 WHEN o.n >= 9 THEN o.n // 3 END AS BIGINT) AS windows
    FROM (
        SELECT q.run_id, q.lane, q.point_id, q.s0, q.s1,
               (SELECT count(*) FROM ov_req x WHERE x.run_id = q.run_id AND x.lane = q.lane
                                               AND x.point_id = q.point_id AND x.t_sent_ns BETWEEN q.s0 AND q.s1) AS n
        FROM (SELECT run_id, lane, point_id, min(t_done_ns) FILTER (WHERE success) AS s0, max(t_sent_ns) AS s1
              FROM ov_req GROUP BY ALL) q
    ) o
),
ov_win AS (  -- one row per window: its centre (s from the span's start), mean in flight, completions and arrivals
    SELECT run_id, lane, point_id, j, (j + 0.5) * width_s AS centre_s, width_s,
           busy_ns / (width_s * 1e9) AS in_flight, completions, arrivals
    FROM (
        SELECT p.run_id, p.lane, p.point_id, w.j, p.span_s / p.windows AS width_s,
               coalesce(sum(greatest(0, least(coalesce(r.t_done_ns, w.e + 1), w.e) - greatest(r.t_sent_ns, w.b))), 0)
                   AS busy_ns,
               count(*) FILTER (WHERE r.success AND r.t_done_ns >= w.b
                                  AND (r.t_done_ns < w.e OR (w.j = p.windows - 1 AND r.t_done_ns <= w.e)))
                   AS completions,
               count(*) FILTER (WHERE r.t_sent_ns >= w.b
                                  AND (r.t_sent_ns < w.e OR (w.j = p.windows - 1 AND r.t_sent_ns <= w.e)))
                   AS arrivals
        FROM ov_span p
        CROSS JOIN LATERAL (
            SELECT j, p.s0 + j * (p.s1 - p.s0) / p.windows AS b, p.s0 + (j + 1) * (p.s1 - p.s0) / p.windows AS e
            FROM (SELECT unnest(range(p.windows)) AS j)) w
        LEFT JOIN ov_req r ON r.run_id = p.run_id AND r.lane = p.lane AND r.point_id = p.point_id
                          AND r.t_sent_ns <= w.e AND coalesce(r.t_done_ns, w.e + 1) >= w.b
        WHERE p.windows IS NOT NULL AND p.s1 > p.s0
        GROUP BY p.run_id, p.lane, p.point_id, w.j, p.span_s, p.windows
    )
),
ov_fit AS (
    SELECT run_id, lane, point_id, count(*) AS windows,
           regr_slope(in_flight, centre_s) AS in_flight_slope,
           sqrt(greatest(regr_syy(in_flight, centre_s) - regr_sxy(in_flight, centre_s) ^ 2
                         / nullif(regr_sxx(in_flight, centre_s), 0), 0) / (count(*) - 2)
                / nullif(regr_sxx(in_flight, centre_s), 0)) AS slope_se,
           avg(completions / width_s) AS completion_rate,
           -- identical window rates give no spread to estimate from: no interval (NULL), never a zero-width one
           nullif(stddev_samp(completions / width_s), 0) / sqrt(count(*)) AS completion_se,
           sum(arrivals) / sum(width_s) AS span_arrival_rate
    FROM ov_win GROUP BY ALL
),
ov AS (
    SELECT sp.run_id, sp.lane, sp.point_id, sp.span_s AS overload_span_s, f.windows AS overload_windows,
           f.span_arrival_rate, f.completion_rate,
           f.completion_rate - tc.t * f.completion_se AS completion_rate_ci_low,
           f.completion_rate + tc.t * f.completion_se AS completion_rate_ci_high,
           f.in_flight_slope, f.in_flight_slope - ts.t * f.slope_se AS in_flight_slope_ci_low,
           f.in_flight_slope + ts.t * f.slope_se AS in_flight_slope_ci_high,
           f.in_flight_slope * sp.span_s AS in_flight_growth,
           sp.n AS overload_requests
    FROM ov_span sp
    LEFT JOIN ov_fit f USING (run_id, lane, point_id)
    ASOF LEFT JOIN t_crit_95 tc ON f.windows - 1 >= tc.df
    ASOF LEFT JOIN t_crit_95 ts ON f.windows - 2 >= ts.df
),
ovv AS (
    SELECT ov.*,
           coalesce(in_flight_slope_ci_low > 0 AND in_flight_growth >= 2, false) AS queue_grew,
           coalesce(completion_rate_ci_high < span_arrival_rate
                    AND (span_arrival_rate - completion_rate) * overload_span_s >= 2, false) AS completions_short
    FROM ov
),
overload AS (
    SELECT run_id, lane, point_id, overload_span_s, overload_windows, span_arrival_rate, completion_rate,
           completion_rate_ci_low, completion_rate_ci_high, in_flight_slope, in_flight_slope_ci_low,
           in_flight_slope_ci_high, in_flight_growth,
           CASE WHEN queue_grew OR completions_short THEN true
                WHEN overload_windows IS NULL OR in_flight_slope_ci_low IS NULL THEN NULL
                ELSE false END AS overloaded,
           CASE WHEN queue_grew OR completions_short
                THEN 'overload: ' || concat_ws('; ',
                     CASE WHEN completions_short
                          THEN printf('completions %.3g/s [%.3g, %.3g] < offered %.3g/s', completion_rate,
                                      completion_rate_ci_low, completion_rate_ci_high, span_arrival_rate) END,
                     CASE WHEN queue_grew
                          THEN printf('in flight grew %.3g requests over %.3g s (slope %.3g/s [%.3g, %.3g])',
                                      in_flight_growth, overload_span_s, in_flight_slope, in_flight_slope_ci_low,
                                      in_flight_slope_ci_high) END)
                WHEN overload_windows IS NULL
                THEN printf('overload untested: %d requests sent between the first completion and the last '
                            'arrival (needs 9)', coalesce(overload_requests, 0))
                WHEN in_flight_slope_ci_low IS NULL THEN 'overload untested: no spread to estimate from' END
               AS overload_reason
    FROM ovv
),
sp AS (
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
           p.slo_ttft_value_ms, p.slo_tpot_value_ms, p.p50_ttft_ms, p.p99_ttft_ms, p.p99_tpot_ms, s.p50_e2el_ms,
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
SELECT j.* EXCLUDE (tokens_per_good_request), ovl.* EXCLUDE (run_id, lane, point_id),
       goodput_ci_low * tokens_per_good_request AS goodput_tok_s_ci_low,
       goodput_ci_high * tokens_per_good_request AS goodput_tok_s_ci_high,
       offered_rate IS NOT NULL AND stop_reason IS NULL AND coalesce(slo_met, false)
           AND coalesce(attained >= attainment_target, false) AND NOT coalesce(ovl.overloaded, false) AS passed,
       CASE WHEN offered_rate IS NULL THEN 'not an open-loop point (the search''s closed-loop probe)'
            ELSE nullif(concat_ws('; ', stop_reason, CASE WHEN ovl.overloaded THEN ovl.overload_reason END,
                 CASE WHEN NOT coalesce(slo_met, false) THEN coalesce(slo_miss_reason, 'SLO not met') END,
                 CASE WHEN attained IS NULL THEN 'no attainment recorded'
                      WHEN attained < attainment_target
                      THEN printf('attainment %.1f %% < %.1f %%', 100 * attained, 100 * attainment_target) END),
                 '') END AS fail_reason
FROM j
LEFT JOIN overload ovl USING (run_id, lane, point_id);

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
           count(*) FILTER (WHERE overloaded) AS points_overloaded,
           string_agg(printf('%.4g %s%s', offered_rate,
                             CASE WHEN excluded_reason IS NOT NULL THEN 'excluded'
                                  WHEN passed THEN 'pass' ELSE 'fail' END,
                             CASE WHEN phase = 'confirm'
                                  THEN coalesce(printf(' (confirmation, %.4g s)', duration), ' (confirmation)')
                                  ELSE '' END),
                      ', ' ORDER BY offered_rate, phase = 'confirm', step) AS verdicts,
           -- why the lowest failing rate failed (its fail_reason; of two points there, the first by step)
           arg_min(fail_reason, step) FILTER (WHERE offered_rate = hi AND NOT passed AND excluded_reason IS NULL)
               AS lowest_rate_missing_reason,
           -- the answer's confirmation: a passing long point at the highest passing rate below every failure
           max(offered_rate) FILTER (WHERE phase = 'confirm' AND passed AND excluded_reason IS NULL
                                       AND (hi IS NULL OR offered_rate < hi)) AS confirmed_rate,
           any_value(TRY_CAST(json_extract(search_json, '$.confirm_overload') AS DOUBLE)) AS confirm_overload,
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
SELECT a.* EXCLUDE (priced_instance_type, reference_usd_per_hour, confirmed_rate),
       a.priced_instance_type AS instance_type,
       a.max_rate_meeting_slo IS NOT NULL AS found,
       -- NULL: nothing to confirm (no answer) or no confirmation asked for (confirm_overload NULL)
       CASE WHEN a.max_rate_meeting_slo IS NOT NULL AND a.confirm_overload IS NOT NULL
            THEN a.confirmed_rate IS NOT DISTINCT FROM a.max_rate_meeting_slo END AS confirmed,
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
           -- the box the lane ran on: a matrix cell's or a pinned box's (<lane>@<box>), '' for a bare lane; a cell's
           -- capacity lane answers beside that cell's serving lane, a repeat's beside the repeat's
           split_part(lane, '@', 2) AS lane_box,
           row_number() OVER (PARTITION BY run_id, instance, split_part(lane, '@', 2), model, server_config, workload,
                                           input_len, output_len, slo_name
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
                    c_slo_tpot_ms, c_slo_percentile, rate_usd_per_hour, k, lane_box, c_instance_type, c_price_basis,
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
  ON c.run_id = d.run_id AND c.instance = d.instance AND c.lane_box = split_part(d.lane, '@', 2)
 AND c.model IS NOT DISTINCT FROM d.model
 AND c.server_config IS NOT DISTINCT FROM d.server_config AND c.workload IS NOT DISTINCT FROM d.workload
 AND c.input_len IS NOT DISTINCT FROM d.input_len
 AND c.output_len IS NOT DISTINCT FROM d.output_len AND c.slo_name IS NOT DISTINCT FROM d.slo_name;
