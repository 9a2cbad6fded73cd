"""REPORT.md's RAG section: the ingest, the index, retrieval quality per arm, the reranker's A/B verdict, per-stage
latency per concurrency, the load levels against the SLO with the RAG Decision, and the co-residency (the runtime's
error verbatim). Render stage: rows comparison.json holds (49_report_rag.sql, analytics/report/rag.py), nothing
computed; no section where there is no rag row."""

from __future__ import annotations

from typing import Any

from analytics.report.document import Comparison
from analytics.report.format import fmt, table
from analytics.report.kernels_md import with_interval

INTRO = (
    "The rag lane's pipeline: a corpus cut into chunks, embedded, indexed in a vector store; retrieval probes "
    "(each with the text its answer must contain) scored without and with the reranker; then whole queries "
    "(embed, search, rerank, generate through the served model) under closed-loop load. hits@k with Wilson "
    "95 % intervals, MRR, latencies p50 / p99 ms with 95 % intervals (docs/reference/metrics.md, RAG)."
)


def _cells(r: dict[str, Any], k: str) -> Any:
    if k == "hits":
        return f"{fmt(r.get('hits'))}/{fmt(r.get('probes'))}"
    if k == "hit_rate":
        return with_interval(r.get("hit_rate"), r.get("hit_rate_ci_low"), r.get("hit_rate_ci_high"))
    if k == "delta":
        return with_interval(r.get("delta"), r.get("delta_ci_low"), r.get("delta_ci_high"))
    if k in ("p50", "p99"):
        return with_interval(r.get(f"{k}_ms"), r.get(f"{k}_ms_ci_low"), r.get(f"{k}_ms_ci_high"))
    return r.get(k)


def s_rag(c: Comparison) -> list[str]:
    g = c.rag
    if g is None:
        return []
    lines = ["## RAG", "", INTRO, ""]
    if g.ingest:
        lines += table(
            g.ingest,
            [
                ("run_id", "run"),
                ("store", "store"),
                ("embedder", "embedder"),
                ("backend", "backend"),
                ("corpus", "corpus"),
                ("chunks", "chunks"),
                ("chunking", "chunking"),
                ("seconds", "s"),
                ("chunks_per_s", "chunks/s"),
            ],
        )
    if g.index:
        lines += table(
            g.index,
            [
                ("run_id", "run"),
                ("store", "store"),
                ("index_type", "index"),
                ("index_params", "parameters"),
                ("store_version", "version"),
                ("vectors", "vectors"),
                ("dim", "dim"),
                ("build_s", "build s"),
            ],
        )
    if g.quality:
        lines += ["Retrieval quality", ""]
        lines += table(
            g.quality,
            [
                ("run_id", "run"),
                ("store", "store"),
                ("embedder", "embedder"),
                ("arm", "arm"),
                ("reranker", "reranker"),
                ("k", "k"),
                ("hits", "hits@k"),
                ("hit_rate", "hit rate [95 %]"),
                ("mrr", "MRR"),
            ],
            get=_cells,
        )
    if g.reranker:
        lines += ["Reranker A/B (the same probes, A: cosine order, B: reranked)", ""]
        lines += table(
            g.reranker,
            [
                ("run_id", "run"),
                ("reranker", "reranker"),
                ("n", "probes"),
                ("b", "lost (A hit, B miss)"),
                ("c", "gained"),
                ("delta", "Δ hit rate [95 %]"),
                ("mcnemar_p", "McNemar p"),
                ("p_holm", "Holm p"),
                ("verdict", "verdict"),
            ],
            get=_cells,
        )
    if g.stages:
        lines += ["Per stage (ms)", ""]
        lines += table(
            g.stages,
            [
                ("run_id", "run"),
                ("concurrency", "clients"),
                ("stage", "stage"),
                ("n", "n"),
                ("p50", "p50 [95 %]"),
                ("p99", "p99 [95 %]"),
            ],
            get=_cells,
        )
    if g.load:
        lines += table(
            g.load,
            [
                ("run_id", "run"),
                ("concurrency", "clients"),
                ("ok_queries", "queries"),
                ("failed_queries", "failed"),
                ("queries_per_s", "queries/s"),
                ("slo_percentile", "SLO pct"),
                ("slo_value_ms", "end to end ms"),
                ("slo_end_to_end_ms", "bound ms"),
                ("slo_met", "meets SLO"),
            ],
        )
    if g.decision:
        lines += ["RAG Decision (per instance type: the highest load meeting the SLO)", ""]
        lines += table(
            g.decision,
            [
                ("run_id", "run"),
                ("instance", "instance"),
                ("store", "store"),
                ("generator", "generator"),
                ("concurrency_at_slo", "clients at SLO"),
                ("queries_per_s_at_slo", "queries/s"),
                ("usd_per_hour", "$/h"),
                ("usd_per_1k_queries", "$/1k queries"),
                ("note", "note"),
            ],
        )
    if g.coresidency:
        lines += ["Co-residency (the embedder beside the served model)", ""]
        lines += table(
            g.coresidency,
            [
                ("run_id", "run"),
                ("backend", "backend"),
                ("embedder_devices", "embedder"),
                ("generator_devices", "served model"),
                ("outcome", "outcome"),
                ("queries", "queries together"),
            ],
        )
        for r in g.coresidency:
            if r.get("error"):
                lines.append(f"- **co-residency failed** (run `{r.get('run_id')}`): {fmt(r.get('error'))}")
    return lines + [""]
