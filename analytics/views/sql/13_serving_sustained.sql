-- docs/reference/metrics.md, "Sustained" as SQL, the single implementation (the serving family, 4 of 4: sustained points).
-- Owned by the load generator (agents/loadgen). CREATE OR REPLACE VIEW statements only.
-- Reads t_crit_95 (11_serving_intervals.sql) and the tables requests and sweep_points; the load order is
-- analytics.views.VIEW_FILES.
--
-- sustained_window_metrics one row per fixed window of a sustained point
-- sustained_summary        retention vs first / peak K windows with 95% CI, drift slopes with 95% CI

CREATE OR REPLACE VIEW sustained_window_metrics AS
WITH bounds AS (
    SELECT run_id, lane, point_id, min(t_sent_ns) AS t0_ns, max(t_done_ns) AS t_end_ns
    FROM requests WHERE NOT warmup GROUP BY run_id, lane, point_id
),
pts AS (
    SELECT s.run_id, s.lane, s.point_id, s.model, s.server_config, s.window_s,
           coalesce(s.warmup_windows, 0) AS warmup_windows, s.window_start AS start_wall, b.t0_ns,
           -- only full windows inside the run (the drain after the duration is not a window)
           CAST(floor(coalesce(s.duration_limit_s, (b.t_end_ns - b.t0_ns) / 1e9) / s.window_s) AS BIGINT)
               AS n_windows
    FROM sweep_points s JOIN bounds b USING (run_id, lane, point_id)
    WHERE s.mode = 'sustained' AND s.window_s > 0
),
windows AS (
    SELECT p.*, unnest(range(0, p.n_windows)) AS "window" FROM pts p
),
chunks AS (
    SELECT r.run_id, r.lane, r.point_id, r.t_sent_ns,
           unnest(r.chunk_times_s) AS t_rel_s, unnest(r.chunk_tokens) AS tokens
    FROM requests r SEMI JOIN pts p ON r.run_id = p.run_id AND r.lane = p.lane AND r.point_id = p.point_id
    WHERE NOT r.warmup AND r.success
),
chunk_windows AS (
    SELECT c.run_id, c.lane, c.point_id,
           CAST(floor((c.t_sent_ns + c.t_rel_s * 1e9 - p.t0_ns) / (p.window_s * 1e9)) AS BIGINT) AS "window",
           sum(c.tokens) AS output_tokens
    FROM chunks c JOIN pts p USING (run_id, lane, point_id)
    GROUP BY ALL
),
req_windows AS (
    SELECT r.run_id, r.lane, r.point_id,
           CAST(floor((r.t_sent_ns - p.t0_ns) / (p.window_s * 1e9)) AS BIGINT) AS "window",
           quantile_cont(r.ttft_s * 1000.0, 0.99) FILTER (WHERE r.success) AS p99_ttft_ms
    FROM requests r JOIN pts p USING (run_id, lane, point_id)
    WHERE NOT r.warmup
    GROUP BY ALL
),
done_windows AS (
    SELECT r.run_id, r.lane, r.point_id,
           CAST(floor((r.t_done_ns - p.t0_ns) / (p.window_s * 1e9)) AS BIGINT) AS "window",
           count(*) FILTER (WHERE r.success) AS completed,
           count(*) FILTER (WHERE NOT r.success) AS failed
    FROM requests r JOIN pts p USING (run_id, lane, point_id)
    WHERE NOT r.warmup
    GROUP BY ALL
)
SELECT
    w.run_id, w.lane, w.point_id, w.model, w.server_config,
    CAST(w."window" AS INTEGER) AS "window", w.window_s,
    w.start_wall + to_microseconds(CAST(round(w."window" * w.window_s * 1e6) AS BIGINT)) AS window_start,
    coalesce(c.output_tokens, 0) AS output_tokens,
    coalesce(c.output_tokens, 0) / w.window_s AS output_throughput,
    CAST(coalesce(d.completed, 0) AS INTEGER) AS completed,
    CAST(coalesce(d.failed, 0) AS INTEGER) AS failed,
    q.p99_ttft_ms,
    w."window" < w.warmup_windows AS warmup,
    (w."window" + 0.5) * w.window_s / 60.0 AS t_mid_min
FROM windows w
LEFT JOIN chunk_windows c USING (run_id, lane, point_id, "window")
LEFT JOIN req_windows q USING (run_id, lane, point_id, "window")
LEFT JOIN done_windows d USING (run_id, lane, point_id, "window");

CREATE OR REPLACE VIEW sustained_summary AS
WITH measured AS (
    SELECT w.*, coalesce(s.retention_k, 3) AS k,
           row_number() OVER (PARTITION BY w.run_id, w.lane, w.point_id ORDER BY w."window") AS pos,
           count(*) OVER (PARTITION BY w.run_id, w.lane, w.point_id) AS n
    FROM sustained_window_metrics w
    JOIN sweep_points s USING (run_id, lane, point_id)
    WHERE NOT w.warmup
),
first_k AS (
    SELECT run_id, lane, point_id, median(output_throughput) AS first_k_throughput,
           avg(output_throughput) AS first_mean, stddev_samp(output_throughput) AS first_sd
    FROM measured WHERE pos <= k GROUP BY ALL
),
last_k AS (
    SELECT run_id, lane, point_id, median(output_throughput) AS last_k_throughput,
           avg(output_throughput) AS last_mean, stddev_samp(output_throughput) AS last_sd
    FROM measured WHERE pos > n - k GROUP BY ALL
),
runs_k AS (  -- every K consecutive measured windows, by its first window
    SELECT a.run_id, a.lane, a.point_id, a.pos AS start_pos, median(b.output_throughput) AS med, count(*) AS cnt,
           any_value(a.k) AS k, avg(b.output_throughput) AS mean_k, stddev_samp(b.output_throughput) AS sd_k
    FROM measured a JOIN measured b
      ON a.run_id = b.run_id AND a.lane = b.lane AND a.point_id = b.point_id
     AND b.pos BETWEEN a.pos AND a.pos + a.k - 1
    GROUP BY a.run_id, a.lane, a.point_id, a.pos
),
peak_k AS (  -- the best K (the earliest among equals)
    SELECT run_id, lane, point_id, med AS peak_k_throughput, mean_k AS peak_mean, sd_k AS peak_sd
    FROM runs_k WHERE cnt = k
    QUALIFY row_number() OVER (PARTITION BY run_id, lane, point_id ORDER BY med DESC, start_pos) = 1
),
fit AS (
    SELECT run_id, lane, point_id,
           count(*) AS windows, any_value(k) AS retention_k,
           regr_slope(output_throughput, t_mid_min) AS throughput_slope_per_min,
           regr_sxx(output_throughput, t_mid_min) AS sxx_tp,
           regr_syy(output_throughput, t_mid_min) AS syy_tp,
           regr_sxy(output_throughput, t_mid_min) AS sxy_tp,
           regr_count(output_throughput, t_mid_min) AS n_tp,
           regr_slope(p99_ttft_ms, t_mid_min) AS p99_ttft_slope_ms_per_min,
           regr_sxx(p99_ttft_ms, t_mid_min) AS sxx_tt,
           regr_syy(p99_ttft_ms, t_mid_min) AS syy_tt,
           regr_sxy(p99_ttft_ms, t_mid_min) AS sxy_tt,
           regr_count(p99_ttft_ms, t_mid_min) AS n_tt
    FROM measured GROUP BY ALL
),
fit_se AS (
    SELECT f.*,
        CASE WHEN n_tp > 2 AND sxx_tp > 0
             THEN sqrt(greatest(syy_tp - throughput_slope_per_min * sxy_tp, 0) / (n_tp - 2) / sxx_tp) END AS se_tp,
        CASE WHEN n_tt > 2 AND sxx_tt > 0
             THEN sqrt(greatest(syy_tt - p99_ttft_slope_ms_per_min * sxy_tt, 0) / (n_tt - 2) / sxx_tt) END AS se_tt,
        (SELECT t FROM t_crit_95 WHERE df <= CAST(f.n_tp AS BIGINT) - 2 ORDER BY df DESC LIMIT 1) AS t_tp,
        (SELECT t FROM t_crit_95 WHERE df <= CAST(f.n_tt AS BIGINT) - 2 ORDER BY df DESC LIMIT 1) AS t_tt
    FROM fit f
),
-- retention intervals: log(retention) ± t·SE, SE² = s_a²/(K·mean_a²) + s_b²/(K·mean_b²) (delta method on the
-- means of the K windows of each group), t at the Welch–Satterthwaite df rounded down (next smaller table row)
ret AS (
    SELECT f.run_id, f.lane, f.point_id, f.windows, f.retention_k,
        -- the first and last K must not overlap, else retention is not defined
        CASE WHEN f.windows >= 2 * f.retention_k THEN lk.last_k_throughput / NULLIF(fk.first_k_throughput, 0) END
            AS retention_vs_first,
        CASE WHEN f.windows >= 2 * f.retention_k THEN lk.last_k_throughput / NULLIF(pk.peak_k_throughput, 0) END
            AS retention_vs_peak,
        pow(lk.last_sd, 2) / (f.retention_k * pow(lk.last_mean, 2)) AS v_last,
        pow(fk.first_sd, 2) / (f.retention_k * pow(fk.first_mean, 2)) AS v_first,
        pow(pk.peak_sd, 2) / (f.retention_k * pow(pk.peak_mean, 2)) AS v_peak
    FROM fit f
    LEFT JOIN first_k fk USING (run_id, lane, point_id)
    LEFT JOIN last_k lk USING (run_id, lane, point_id)
    LEFT JOIN peak_k pk USING (run_id, lane, point_id)
),
ret_df AS (
    SELECT run_id, lane, point_id, retention_vs_first, retention_vs_peak,
        sqrt(v_last + v_first) AS se_first, sqrt(v_last + v_peak) AS se_peak,
        -- Welch–Satterthwaite (equal group sizes K); zero spread in both groups: df K − 1 (the width is 0 anyway)
        CAST(floor(coalesce(pow(v_last + v_first, 2) / NULLIF((pow(v_last, 2) + pow(v_first, 2)) / (retention_k - 1), 0),
                            retention_k - 1)) AS BIGINT) AS df_first,
        CAST(floor(coalesce(pow(v_last + v_peak, 2) / NULLIF((pow(v_last, 2) + pow(v_peak, 2)) / (retention_k - 1), 0),
                            retention_k - 1)) AS BIGINT) AS df_peak
    FROM ret WHERE retention_k >= 2
),
ret_ci AS (
    SELECT d.run_id, d.lane, d.point_id,
        CASE WHEN d.retention_vs_first > 0 THEN exp(ln(d.retention_vs_first) - tf.t * d.se_first) END
            AS retention_vs_first_ci_low,
        CASE WHEN d.retention_vs_first > 0 THEN exp(ln(d.retention_vs_first) + tf.t * d.se_first) END
            AS retention_vs_first_ci_high,
        CASE WHEN d.retention_vs_peak > 0 THEN exp(ln(d.retention_vs_peak) - tp.t * d.se_peak) END
            AS retention_vs_peak_ci_low,
        CASE WHEN d.retention_vs_peak > 0 THEN exp(ln(d.retention_vs_peak) + tp.t * d.se_peak) END
            AS retention_vs_peak_ci_high
    FROM ret_df d
    ASOF LEFT JOIN t_crit_95 tf ON d.df_first >= tf.df
    ASOF LEFT JOIN t_crit_95 tp ON d.df_peak >= tp.df
)
SELECT
    f.run_id, f.lane, f.point_id, f.windows, f.retention_k,
    fk.first_k_throughput, lk.last_k_throughput, pk.peak_k_throughput,
    r.retention_vs_first, r.retention_vs_peak,
    f.throughput_slope_per_min,
    f.throughput_slope_per_min - f.t_tp * f.se_tp AS throughput_slope_ci_low,
    f.throughput_slope_per_min + f.t_tp * f.se_tp AS throughput_slope_ci_high,
    f.p99_ttft_slope_ms_per_min,
    f.p99_ttft_slope_ms_per_min - f.t_tt * f.se_tt AS p99_ttft_slope_ci_low,
    f.p99_ttft_slope_ms_per_min + f.t_tt * f.se_tt AS p99_ttft_slope_ci_high,
    rc.retention_vs_first_ci_low, rc.retention_vs_first_ci_high,
    rc.retention_vs_peak_ci_low, rc.retention_vs_peak_ci_high
FROM fit_se f
LEFT JOIN first_k fk USING (run_id, lane, point_id)
LEFT JOIN last_k lk USING (run_id, lane, point_id)
LEFT JOIN peak_k pk USING (run_id, lane, point_id)
LEFT JOIN ret r USING (run_id, lane, point_id)
LEFT JOIN ret_ci rc USING (run_id, lane, point_id);
