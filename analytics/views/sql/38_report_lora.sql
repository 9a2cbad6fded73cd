-- Report-side view: how a multi-LoRA variant's requests split across its adapters, for the Variants
-- section. Reads request_metrics (10_serving_requests.sql) and sweep_points.
--   report_lora_traffic    one row per (run, lane, model, config, request_model) of a multi-LoRA variant's points
--                          (sweep_points.model_mix_json set): the measured requests that asked for that adapter (or
--                          the base model), their share of the config's requests against the stated weight's share,
--                          how many succeeded, and their median TTFT and TPOT.

CREATE OR REPLACE VIEW report_lora_traffic AS
WITH req AS (
    SELECT s.run_id, s.lane, s.model, s.server_config AS config, m.request_model, m.success, m.ttft_ms, m.tpot_ms,
           CAST(json_extract(s.model_mix_json, '$."' || m.request_model || '"') AS DOUBLE) AS weight,
           (SELECT sum(CAST(v AS DOUBLE)) FROM (SELECT unnest(json_extract(s.model_mix_json, '$.*')) AS v)) AS total
    FROM request_metrics m JOIN sweep_points s USING (run_id, lane, point_id)
    WHERE s.model_mix_json IS NOT NULL
)
SELECT run_id, lane, model, config, request_model,
       count(*) AS requests,
       count(*) / sum(count(*)) OVER (PARTITION BY run_id, lane, model, config) AS share,
       any_value(weight / total) AS stated_share,
       count(*) FILTER (WHERE success) AS succeeded,
       median(ttft_ms) FILTER (WHERE success) AS p50_ttft_ms,
       median(tpot_ms) FILTER (WHERE success) AS p50_tpot_ms
FROM req
GROUP BY run_id, lane, model, config, request_model;
