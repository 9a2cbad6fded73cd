-- Price-performance at an SLO (docs/reference/slo.md). CREATE OR REPLACE VIEW statements only. Runs after
-- 70_aggregates.sql because it reads serving_points_all. Views defined here:
--   slo_points       every serving point with the SLO in force (the point's sweep_points.slo_json; for an imported
--                    reference point reference_runs.slo_json first), the point's latency at the SLO's percentile,
--                    whether it meets the SLO, the margins, and whether the upper 95 % bounds meet it too.
--   report_decision  per (run, instance, lane, model, server config, workload, shape, SLO): the highest measured
--                    concurrency that meets the SLO, its output tok/s and goodput with intervals, and $ per million
--                    output tokens at that point from the dated price table (or the price declared at import).
-- The rule: a point meets the SLO when it is not invalid and its p{percentile} TTFT and p{percentile} TPOT are
-- within the bounds. percentile 50/90/95/99 read the matching columns; intervals exist for p50 and p99 only (others:
-- slo_met_ci NULL). A slo_json without a percentile (points written before the SLO sets) means p99.
-- Price: an AWS lane's instance type; a local run's declared lane_runs.priced_as (run --local --price-as); a
-- reference's usd_per_hour, else the price table's for its instance type. No price: NULL $/M with a note.
-- $/M output tokens = usd_per_hour / (output_throughput x 3600) x 1e6; its interval comes from the throughput
-- interval inverted (the high throughput bound gives the low $/M bound).

CREATE OR REPLACE VIEW slo_points AS
WITH runs AS (  -- the lane's effective attempt: where the point ran and how it is priced
    SELECT l.run_id, l.lane, l.box_role, l.instance_type, l.priced_as
    FROM lane_runs l JOIN report_lane_attempts a USING (run_id, lane, attempt)
    WHERE a.effective
),
sp AS (
    SELECT run_id, lane, point_id, any_value(slo_json) AS slo_json, any_value(search_json) AS search_json,
           any_value(workload) AS workload  -- NULL: a fixed shape (a workload point: pipeline.workloads)
    FROM sweep_points GROUP BY ALL
),
j AS (
    SELECT s.*, r.point_id IS NOT NULL AS is_reference, r.label AS reference_label,
           r.usd_per_hour AS reference_usd_per_hour, r.price_source AS reference_price_source,
           r.per_request AS reference_per_request, r.note AS reference_note,
           CASE WHEN r.point_id IS NOT NULL THEN 'reference'
                WHEN coalesce(lr.box_role, '') = 'local' THEN 'local' ELSE 'instance' END AS price_basis,
           CASE WHEN r.point_id IS NOT NULL THEN r.instance_type
                WHEN coalesce(lr.box_role, '') = 'local' THEN lr.priced_as ELSE lr.instance_type END AS priced_instance_type,
           lr.box_role, lr.instance_type AS lane_instance_type, lr.priced_as,
           coalesce(r.slo_json, sp.slo_json) AS slo_json, sp.search_json, sp.workload,
           pv.excluded_reason
    FROM serving_points_all s
    LEFT JOIN reference_runs r USING (run_id, lane, point_id)
    LEFT JOIN sp USING (run_id, lane, point_id)
    LEFT JOIN runs lr USING (run_id, lane)
    LEFT JOIN report_point_validity pv USING (run_id, lane, point_id)
),
k AS (
    SELECT j.*,
           CASE WHEN is_reference THEN 'reference: ' || reference_label
                WHEN price_basis = 'local' THEN coalesce(priced_as, 'local (not priced)')
                ELSE coalesce(lane_instance_type, 'instance type not recorded') END AS instance,
           CASE WHEN slo_json IS NOT NULL
                THEN coalesce(json_extract_string(slo_json, '$.name'), 'unnamed') END AS slo_name,
           TRY_CAST(json_extract(slo_json, '$.ttft_ms') AS DOUBLE) AS slo_ttft_ms,
           TRY_CAST(json_extract(slo_json, '$.tpot_ms') AS DOUBLE) AS slo_tpot_ms,
           CASE WHEN slo_json IS NOT NULL
                THEN coalesce(TRY_CAST(json_extract(slo_json, '$.percentile') AS DOUBLE), 99.0) END AS slo_percentile,
           json_extract_string(slo_json, '$.source') AS slo_source
    FROM j
),
m AS (
    SELECT k.*,
           CASE slo_percentile WHEN 50 THEN p50_ttft_ms WHEN 90 THEN p90_ttft_ms
                               WHEN 95 THEN p95_ttft_ms WHEN 99 THEN p99_ttft_ms END AS slo_ttft_value_ms,
           CASE slo_percentile WHEN 50 THEN p50_tpot_ms WHEN 90 THEN p90_tpot_ms
                               WHEN 95 THEN p95_tpot_ms WHEN 99 THEN p99_tpot_ms END AS slo_tpot_value_ms,
           CASE slo_percentile WHEN 50 THEN p50_ttft_ms_ci_high WHEN 99 THEN p99_ttft_ms_ci_high END AS slo_ttft_ci_high_ms,
           CASE slo_percentile WHEN 50 THEN p50_tpot_ms_ci_high WHEN 99 THEN p99_tpot_ms_ci_high END AS slo_tpot_ci_high_ms
    FROM k
)
SELECT run_id, lane, point_id, model, server_config, workload, mode, input_len, output_len, max_concurrency,
       metric_basis,
       is_reference, reference_label, reference_per_request, reference_note, instance, price_basis,
       priced_instance_type, box_role, lane_instance_type, priced_as, reference_usd_per_hour, reference_price_source,
       valid, invalid_reason, completed, failed, search_json, excluded_reason,
       output_throughput, output_throughput_ci_low, output_throughput_ci_high,
       goodput, goodput_ci_low, goodput_ci_high,
       p50_ttft_ms, p99_ttft_ms, p50_tpot_ms, p99_tpot_ms,
       p99_ttft_ms_ci_low, p99_ttft_ms_ci_high, p99_tpot_ms_ci_low, p99_tpot_ms_ci_high, ci_note,
       slo_json, slo_name, slo_ttft_ms, slo_tpot_ms, slo_percentile, slo_source,
       slo_ttft_value_ms, slo_tpot_value_ms, slo_ttft_ci_high_ms, slo_tpot_ci_high_ms,
       slo_ttft_ms - slo_ttft_value_ms AS ttft_margin_ms,
       slo_tpot_ms - slo_tpot_value_ms AS tpot_margin_ms,
       CASE WHEN slo_json IS NOT NULL
            THEN (valid IS NOT FALSE) AND slo_ttft_value_ms <= slo_ttft_ms AND slo_tpot_value_ms <= slo_tpot_ms
       END AS slo_met,
       CASE WHEN slo_json IS NOT NULL AND slo_ttft_ci_high_ms IS NOT NULL AND slo_tpot_ci_high_ms IS NOT NULL
            THEN (valid IS NOT FALSE) AND slo_ttft_ci_high_ms <= slo_ttft_ms AND slo_tpot_ci_high_ms <= slo_tpot_ms
       END AS slo_met_ci,
       CASE WHEN slo_json IS NULL THEN 'no SLO recorded for this point'
            ELSE nullif(concat_ws('; ',
                 CASE WHEN valid IS FALSE THEN 'invalid point: ' || coalesce(invalid_reason, 'no reason given') END,
                 CASE WHEN slo_ttft_value_ms > slo_ttft_ms
                      THEN printf('p%g TTFT %.0f ms > %g ms', slo_percentile, slo_ttft_value_ms, slo_ttft_ms) END,
                 CASE WHEN slo_tpot_value_ms > slo_tpot_ms
                      THEN printf('p%g TPOT %.1f ms > %g ms', slo_percentile, slo_tpot_value_ms, slo_tpot_ms) END,
                 CASE WHEN slo_ttft_value_ms IS NULL OR slo_tpot_value_ms IS NULL
                      THEN printf('no p%g TTFT/TPOT for this point', slo_percentile) END), '')
       END AS slo_miss_reason
FROM m;

CREATE OR REPLACE VIEW report_decision AS
WITH g AS (
    SELECT p.*,
           row_number() OVER w_best AS pick,
           count(*) OVER w AS points,
           count(*) FILTER (WHERE slo_met) OVER w AS points_meeting,
           first_value(max_concurrency) OVER w_low AS lowest_concurrency,
           first_value(slo_miss_reason) OVER w_low AS lowest_miss_reason,
           max(max_concurrency) OVER w AS highest_concurrency_measured
    FROM slo_points p
    -- an SLO in force (reference rows always appear); qwen3_attempt's first-token probe is one request, not a load point;
    -- rule 15: a point the serving tables exclude (report_point_validity) is excluded here too, a reference kept;
    -- a capacity search's open-loop points answer in report_capacity (76_report_capacity.sql), not here
    WHERE (slo_json IS NOT NULL OR is_reference) AND point_id NOT LIKE 'qwen3-probe%'
      AND (excluded_reason IS NULL OR is_reference) AND search_json IS NULL
    WINDOW w AS (PARTITION BY run_id, instance, lane, model, server_config, workload, input_len, output_len, slo_name),
           w_best AS (w ORDER BY CASE WHEN slo_met THEN 0 ELSE 1 END,
                      CASE WHEN slo_met THEN max_concurrency END DESC NULLS LAST,
                      output_throughput DESC NULLS LAST, point_id),
           w_low AS (w ORDER BY max_concurrency ASC NULLS LAST, point_id
                     ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
),
c0 AS (
    SELECT g.*, points_meeting > 0 AS meets FROM g WHERE pick = 1
),
c AS (  -- the next measured concurrency above the chosen one that misses: where the answer's boundary lies
    SELECT c0.*, nx.next_miss_concurrency, nx.next_miss_reason
    FROM c0 LEFT JOIN LATERAL (
        SELECT min(x.max_concurrency) AS next_miss_concurrency,
               arg_min(x.slo_miss_reason, x.max_concurrency) AS next_miss_reason
        FROM g x
        WHERE x.run_id = c0.run_id AND x.instance = c0.instance AND x.lane = c0.lane
          AND x.model IS NOT DISTINCT FROM c0.model AND x.server_config IS NOT DISTINCT FROM c0.server_config
          AND x.workload IS NOT DISTINCT FROM c0.workload
          AND x.input_len IS NOT DISTINCT FROM c0.input_len AND x.output_len IS NOT DISTINCT FROM c0.output_len
          AND x.slo_name IS NOT DISTINCT FROM c0.slo_name
          AND NOT coalesce(x.slo_met, false) AND x.max_concurrency > c0.max_concurrency
    ) nx ON c0.meets
),
priced AS (
    SELECT c.*, coalesce(c.reference_usd_per_hour, ip.usd_per_hour) AS usd_per_hour,
           CASE WHEN c.reference_usd_per_hour IS NULL THEN ip.price_date END AS price_date,
           CASE WHEN c.reference_usd_per_hour IS NOT NULL THEN coalesce(c.reference_price_source, 'declared at import')
                ELSE ip.source END AS price_source,
           CASE WHEN c.reference_usd_per_hour IS NULL THEN ip.region END AS price_region
    FROM c LEFT JOIN instance_prices ip ON ip.instance_type = c.priced_instance_type
)
SELECT run_id, instance, price_basis, priced_instance_type AS instance_type, box_role, lane, model,
       coalesce(server_config, reference_label) AS server_config, workload, input_len, output_len,
       slo_name, slo_ttft_ms, slo_tpot_ms, slo_percentile, slo_source,
       points, points_meeting, meets,
       CASE WHEN meets THEN max_concurrency END AS max_concurrency,
       CASE WHEN meets THEN point_id END AS point_id,
       CASE WHEN meets THEN metric_basis END AS metric_basis,
       CASE WHEN meets THEN output_throughput END AS output_throughput,
       CASE WHEN meets THEN output_throughput_ci_low END AS output_throughput_ci_low,
       CASE WHEN meets THEN output_throughput_ci_high END AS output_throughput_ci_high,
       CASE WHEN meets THEN goodput END AS goodput,
       CASE WHEN meets THEN goodput_ci_low END AS goodput_ci_low,
       CASE WHEN meets THEN goodput_ci_high END AS goodput_ci_high,
       CASE WHEN meets THEN p99_ttft_ms END AS p99_ttft_ms,
       CASE WHEN meets THEN p99_tpot_ms END AS p99_tpot_ms,
       CASE WHEN meets THEN slo_ttft_value_ms END AS slo_ttft_value_ms,
       CASE WHEN meets THEN slo_tpot_value_ms END AS slo_tpot_value_ms,
       CASE WHEN meets THEN slo_met_ci END AS slo_met_ci,
       CASE WHEN meets THEN next_miss_concurrency END AS next_miss_concurrency,
       CASE WHEN meets THEN next_miss_reason END AS next_miss_reason,
       highest_concurrency_measured,
       -- the answer is the top of the grid: nothing above it was measured, so the SLO may hold beyond it
       meets AND next_miss_concurrency IS NULL AND max_concurrency = highest_concurrency_measured AS at_grid_top,
       usd_per_hour, price_date, price_region, price_source,
       CASE WHEN meets THEN usd_per_hour / nullif(output_throughput * 3600.0, 0) * 1e6 END
           AS usd_per_million_output_tokens,
       CASE WHEN meets THEN usd_per_hour / nullif(output_throughput_ci_high * 3600.0, 0) * 1e6 END
           AS usd_per_million_output_tokens_ci_low,
       CASE WHEN meets AND output_throughput_ci_low > 0 THEN usd_per_hour / (output_throughput_ci_low * 3600.0) * 1e6 END
           AS usd_per_million_output_tokens_ci_high,
       -- % of the limit at the chosen point: its output tok/s over the roofline's bound (71_report_roofline.sql's
       -- point_roofline.throughput_fraction, divided here from the row's own throughput)
       CASE WHEN meets THEN output_throughput / rl_bound END AS limit_fraction,
       CASE WHEN meets THEN rl_bound END AS output_tokens_per_s_bound,
       CASE WHEN meets THEN rl_hardware END AS roofline_hardware,
       CASE WHEN meets THEN rl_note END AS roofline_note,
       nullif(concat_ws('; ',
           CASE WHEN slo_json IS NULL THEN 'no SLO recorded: import with --slo to judge this reference'
                WHEN NOT meets THEN 'no point meets the SLO: lowest concurrency'
                     || coalesce(' (c=' || CAST(lowest_concurrency AS VARCHAR) || ')', '') || ' '
                     || coalesce(lowest_miss_reason, 'has no latency at the SLO percentile') END,
           CASE WHEN is_reference AND NOT coalesce(reference_per_request, false)
                THEN 'reference: no per-request data, no interval' END,
           CASE WHEN meets AND next_miss_concurrency IS NOT NULL
                THEN printf('c=%d misses: %s', next_miss_concurrency, next_miss_reason)
                WHEN meets AND max_concurrency = highest_concurrency_measured
                THEN 'the highest concurrency measured: the SLO may hold beyond it' END,
           CASE WHEN meets AND slo_met_ci IS FALSE THEN 'meets the SLO, but not at the upper 95 % bounds'
                WHEN meets AND slo_met_ci IS NULL AND NOT (is_reference AND NOT coalesce(reference_per_request, false))
                THEN printf('p%g upper 95 %% bounds undefined at n=%d: judged on the point estimate', slo_percentile,
                            completed) END,
           CASE WHEN meets AND output_throughput_ci_low <= 0
                THEN 'throughput interval reaches 0: no upper $/M bound' END,
           CASE WHEN price_basis = 'local' AND priced_instance_type IS NULL
                THEN 'local run not priced: run --local --price-as TYPE declares the instance type'
                WHEN priced_instance_type IS NULL THEN 'instance type not recorded: no price'
                WHEN usd_per_hour IS NULL THEN 'no price for instance type ' || priced_instance_type END),
         '') AS note
FROM priced
LEFT JOIN (SELECT run_id AS rl_run, lane AS rl_lane, point_id AS rl_point, output_tokens_per_s_bound AS rl_bound,
                  hardware AS rl_hardware, roofline_note AS rl_note
           FROM point_bounds) rl
    ON rl.rl_run = priced.run_id AND rl.rl_lane = priced.lane AND rl.rl_point = priced.point_id;
