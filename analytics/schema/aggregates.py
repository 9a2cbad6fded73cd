"""Aggregate-only serving points: ``serving_aggregates``; imported reference points: ``reference_runs``.

Some results arrive without per-request rows — a hand-run predecessor kept only
each point's summary (``vllm bench serve --save-result``-style keys). Those
numbers are real but cannot be re-derived, gated or re-cut: there is no
client-queue check, no goodput (no per-request SLO test) and no p95 (the source
never computed one). They live here, apart from ``requests``-derived metrics,
with the source's own definitions beside them (``definitions_json``) so a reader
never mistakes "output tokens = non-empty SSE chunks" for server usage counts.
The ``serving_points_all`` view lists them beside request-derived points.
"""

import pyarrow as pa

from analytics.schema._types import TS, f, table

_STATS = ("mean", "median", "std", "p50", "p90", "p99")
_METRICS = ("ttft", "tpot", "itl", "e2el")

SERVING_AGGREGATES = table(
    f("point_id", pa.string(), False, "the measurement point (the same id as its sweep_points row)"),
    f("model", pa.string()),
    f("server_config", pa.string()),
    f("mode", pa.string(), doc="closed | sustained_iteration"),
    f("client", pa.string(), doc="the client that measured the point, as the source names it"),
    f("input_len", pa.int32(), doc="configured input length"),
    f("output_len", pa.int32(), doc="configured output length"),
    f("max_concurrency", pa.int32()),
    f("num_prompts", pa.int32()),
    f("completed", pa.int32()),
    f("failed", pa.int32()),
    f("duration", pa.float64(), doc="seconds, as the source measured it"),
    f("total_input_tokens", pa.int64()),
    f("total_output_tokens", pa.int64()),
    f("request_throughput", pa.float64()),
    f("output_throughput", pa.float64()),
    f("total_token_throughput", pa.float64()),
    f("max_output_tokens_per_s", pa.float64()),
    f("max_concurrent_requests", pa.int32()),
    *[f(f"{s}_{m}_ms", pa.float64()) for m in _METRICS for s in _STATS],
    f("measured_at", TS, doc="when the source says the point was measured"),
    f("definitions_json", pa.string(), doc="the source's definitions of tokens, TTFT, TPOT, ITL, E2EL, percentiles"),
    f("source_uri", pa.string(), doc="where the aggregate came from, e.g. git:<commit>:<path>"),
    f("note", pa.string()),
    f(
        "stats_json",
        pa.string(),
        doc="every statistic the source wrote that has no column here, verbatim (e.g. "
        "p95 or p99.9 percentiles, client-queue stats, vLLM's request_goodput "
        "against an SLO the file does not record)",
    ),
    doc="Per-point aggregates of points with no per-request rows (no validity gate, no goodput, no p95).",
)

# Reference points: results measured elsewhere (`neuronpipe import vllm-bench`: an H100, an MI300X, a colleague's
# run), labelled so the decision tables can set them beside the boxes' own points with the price and SLO the
# importer declared. One row per imported point; the point's numbers live in serving_aggregates (always) and,
# when the file kept per-request lists, in sweep_points + requests (then the views derive it like our own).
REFERENCE_RUNS = table(
    f("point_id", pa.string(), False, "the imported point (the same id as its serving_aggregates row)"),
    f("label", pa.string(), False, "the reference's name, as given with --label"),
    f("instance_type", pa.string(), False, "the instance the reference ran on, as given with --instance-type"),
    f(
        "usd_per_hour",
        pa.float64(),
        doc="the price declared at import; NULL: the price table's price for "
        "instance_type applies (none there: no $ figures)",
    ),
    f("price_source", pa.string(), doc="'declared at import' when usd_per_hour is set, else NULL"),
    f(
        "slo_json",
        pa.string(),
        doc="the SLO the point is judged by (--slo, default the profile's default set): "
        '{"name", "ttft_ms", "tpot_ms", "percentile", "source"}',
    ),
    f(
        "per_request",
        pa.bool_(),
        False,
        "true when the file kept per-request lists (--save-detailed) and they "
        "were imported as requests rows (the point then has intervals and goodput)",
    ),
    f("source_uri", pa.string(), doc="the file read, with its sha256"),
    f("client", pa.string(), doc="the client that measured the point, e.g. 'vllm bench serve'"),
    f("note", pa.string(), doc="what the import could not take (e.g. why per-request lists were left out)"),
    doc="Imported reference points: label, instance, declared price and SLO of each.",
)

AGGREGATE_TABLES = {"serving_aggregates": SERVING_AGGREGATES, "reference_runs": REFERENCE_RUNS}
