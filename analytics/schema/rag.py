"""The rag lane's tables: the index it built, the ingest, every query's stages under load, the retrieval probes with
and without the reranker, and where the embedder and the served model were placed together.

Percentiles, intervals, hits@k, MRR, throughput, the reranker's paired verdict and the SLO's highest load are the
views' (49_report_rag.sql); these tables hold what was measured.
"""

import pyarrow as pa

from analytics.schema._types import TS, f, table

_RUN = (
    f("store", pa.string(), doc="the vector store: lancedb | pgvector | exact"),
    f("embedder", pa.string(), doc="the text embedding model"),
    f("backend", pa.string(), doc="neuron | cuda | cpu: where the embedder ran"),
)

RAG_INDEX = table(
    *_RUN,
    f("index_type", pa.string(), False, "what the search used: hnsw (pgvector), IVF_HNSW_SQ ... (lancedb), flat"),
    f("index_params", pa.string(), doc="the index's parameters as JSON (m, ef_construction, ef_search, ...)"),
    f("store_version", pa.string(), doc="the store's version (pgvector's extversion, lancedb's package)"),
    f("vectors", pa.int64(), doc="vectors indexed"),
    f("dim", pa.int32(), doc="their dimension"),
    f("build_s", pa.float64(), doc="wall seconds of the index build; NULL: not built (flat) or not recorded"),
    f("ts", TS),
    doc="One row per index the lane built: its store, type, parameters, size and build time.",
)

RAG_INGEST = table(
    *_RUN,
    f("corpus", pa.string(), doc="the corpus file (shipped:corpus.md for the shipped handbook)"),
    f("documents", pa.int32(), doc="documents read"),
    f("chunks", pa.int64(), False, "chunks ingested"),
    f("chunking", pa.string(), False, "how the corpus was cut, stated"),
    f("embed_s", pa.float64(), doc="wall seconds embedding the chunks; NULL where the source does not split it"),
    f("store_s", pa.float64(), doc="wall seconds writing them to the store; NULL where not split"),
    f("seconds", pa.float64(), False, "wall seconds of the ingest: embedding and writing"),
    f("batch_size", pa.int32(), doc="the embedder's batch"),
    f("ts", TS),
    doc="One row per ingest: chunks, the chunking stated, its wall time (chunks/s is the view's).",
)

RAG_REQUESTS = table(
    *_RUN,
    f("reranker", pa.string(), doc="the reranking model; NULL: no rerank stage"),
    f("generator", pa.string(), doc="the served model that generated; NULL: no generate stage"),
    f("concurrency", pa.int32(), False, "closed-loop clients of the load level"),
    f("request_index", pa.int32(), False, "the query's place in its level, 0-based"),
    f("probe_id", pa.string(), doc="the probe whose question was asked"),
    f("stage", pa.string(), False, "embed | search | rerank | generate | end_to_end"),
    f("latency_s", pa.float64(), doc="the stage's wall seconds; NULL: the query failed (error)"),
    f("ok", pa.bool_(), False, "the query completed"),
    f("error", pa.string(), doc="a failed query's verbatim error (on its end_to_end row)"),
    f("level_wall_s", pa.float64(), doc="wall seconds of the whole level (its queries / this is its throughput)"),
    f("level_queries", pa.int32(), doc="queries the level sent"),
    f("slo_end_to_end_ms", pa.float64(), doc="the SLO's end-to-end bound in force"),
    f("slo_percentile", pa.float64(), doc="the percentile the SLO judges"),
    f("ts", TS),
    doc="One row per query per stage at each load level (concurrency).",
)

RAG_PROBES = table(
    *_RUN,
    f("reranker", pa.string(), doc="the reranking model (arm reranked)"),
    f("probe_id", pa.string(), False),
    f("question", pa.string()),
    f("expected", pa.string(), doc="the text a retrieved chunk must contain"),
    f("arm", pa.string(), False, "cosine (the store's order) | reranked (the reranker's order of the candidates)"),
    f("rank", pa.int32(), doc="1-based rank of the first chunk holding the expected text; NULL: not retrieved"),
    f("k", pa.int32(), False, "the chunks the hit is judged within"),
    f("hit", pa.bool_(), False, "rank <= k"),
    f("candidates", pa.int32(), doc="chunks retrieved (what was ranked)"),
    f("retrieved", pa.string(), doc="the first k chunk ids, comma-separated"),
    f("ts", TS),
    doc="One row per retrieval probe per arm (without / with the reranker).",
)

RAG_CORESIDENCY = table(
    f("backend", pa.string(), False),
    f("embedder", pa.string()),
    f("generator", pa.string(), doc="the served model"),
    f("embedder_devices", pa.string(), doc="the embedder's cores (NEURON_RT_VISIBLE_CORES, CPU affinity)"),
    f("generator_devices", pa.string(), doc="the served model's cores"),
    f("outcome", pa.string(), False, "measured (both placed, the load ran with both) | failed (the runtime refused)"),
    f("queries", pa.int32(), doc="queries measured with both in place"),
    f("error", pa.string(), doc="the runtime's own error, verbatim (outcome failed)"),
    f("ts", TS),
    doc="One row per placement of the embedder beside the served model on one box's devices.",
)

RAG_TABLES = {
    "rag_index": RAG_INDEX,
    "rag_ingest": RAG_INGEST,
    "rag_requests": RAG_REQUESTS,
    "rag_probes": RAG_PROBES,
    "rag_coresidency": RAG_CORESIDENCY,
}
