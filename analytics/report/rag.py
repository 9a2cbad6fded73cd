"""The RAG section's data for comparison.json: the rag lane's ingest, index, retrieval quality, the reranker's A/B with
its paired verdict, per-stage latency, the load levels, the SLO's Decision and the co-residency (queries over
49_report_rag.sql). Absent from the document when no run has rag rows.

The verdict of the reranker's A/B is the accuracy lane's (:mod:`analytics.report.accuracy`): Holm over each run's
reranker tests, then better / worse / within noise on the adjusted exact McNemar p and Newcombe's paired interval.
Data stage: imports no render module.
"""

from __future__ import annotations

from typing import Any

import duckdb

from analytics.report.accuracy import decide, holm_alone
from analytics.report.rows import rows

QUALITY_VIEW = "report_rag_quality"
METHOD = {
    "hits_at_k": "probes whose expected fact is in one of the first k chunks retrieved, with its Wilson 95 % interval",
    "mrr": "mean over the probes of 1 / the rank of the first chunk holding the fact (0: not among the candidates)",
    "reranker_ab": "the same probes without (A: the store's cosine order) and with (B: the reranker's order of the "
    "candidates) the reranker: hits@k B − A with Newcombe's paired interval, the exact McNemar p, Holm over the "
    "run's tests; verdict better / worse / within noise (the accuracy lane's rule)",
    "latency": "per stage and end to end: p50 / p90 / p99 ms with 95 % order-statistic intervals, per concurrency",
    "decision": "the highest concurrency whose end to end at the SLO's percentile is within the bound with no "
    "failed query; $ per thousand queries there = $/hour / (queries/s x 3600) x 1000",
}


def rag_section(con: duckdb.DuckDBPyConnection, present: set[str]) -> dict[str, Any] | None:
    """{"method", "ingest", "index", "quality", "reranker", "stages", "load", "decision", "coresidency"}; None where
    no run has rag rows."""
    if QUALITY_VIEW not in present:
        return None
    ingest = rows(con, "SELECT * FROM report_rag_ingest ORDER BY run_id, lane, ts")
    load = rows(con, "SELECT * FROM report_rag_load ORDER BY run_id, lane, store, concurrency")
    coresidency = rows(con, "SELECT * FROM report_rag_coresidency ORDER BY run_id, lane, ts")
    quality = rows(con, f"SELECT * FROM {QUALITY_VIEW} ORDER BY run_id, lane, store, arm")
    if not (ingest or load or coresidency or quality):
        return None
    tests = rows(con, "SELECT *, hit_rate_a AS acc_a FROM rag_reranker_tests ORDER BY run_id, lane, store, reranker")
    for run in dict.fromkeys(t["run_id"] for t in tests):
        holm_alone([t for t in tests if t["run_id"] == run], f"the rag reranker tests of run {run}")
    decide(tests)
    return {
        "method": METHOD,
        "ingest": ingest,
        "index": rows(con, "SELECT * FROM report_rag_index ORDER BY run_id, lane, ts"),
        "quality": quality,
        "reranker": tests,
        "stages": rows(con, "SELECT * FROM report_rag_stages ORDER BY run_id, lane, store, concurrency, stage"),
        "load": load,
        "decision": rows(con, "SELECT * FROM report_rag_decision ORDER BY run_id, lane, instance, store"),
        "coresidency": coresidency,
    }
