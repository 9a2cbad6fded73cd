"""rag's config: the corpus and its probes, the embedder, the reranker, the vector store and its index, the served
model that generates, the load, the SLO the Decision judges the end to end by."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.lane_configs.bounds import BATCH, BOOT_S, CONCURRENCY, NEW_TOKENS, PROMPTS, REQUEST_TIMEOUT_S, SEED

STORES = ("lancedb", "pgvector")
CHUNK_CHARS = {"min": 50, "max": 100_000}
TOP_K = {"min": 1, "max": 100}
CANDIDATES = {"min": 1, "max": 1000}
END_TO_END_MS = {"min": 0.1, "max": 600_000.0}  # under 0.1 ms no pipeline answers; over ten minutes, no SLO
SLO_PERCENTILES = (50.0, 90.0, 95.0, 99.0)
SLO_KEYS = ("end_to_end_ms", "percentile")


def slo_problem(slo: Any) -> str | None:
    """Why ``slo`` is not {end_to_end_ms: bound, percentile: one of SLO_PERCENTILES}; None when it is."""
    if not isinstance(slo, dict):
        return f"rag_slo: an object {{end_to_end_ms, percentile}}, got {slo!r}"
    unknown = sorted(set(slo) - set(SLO_KEYS))
    if unknown:
        return f"rag_slo.{unknown[0]}: unknown key; valid keys: {', '.join(SLO_KEYS)}"
    bound = slo.get("end_to_end_ms")
    if bound is None:
        return "rag_slo: no bound (end_to_end_ms): an SLO without a bound judges nothing"
    if isinstance(bound, bool) or not isinstance(bound, (int, float)):
        return f"rag_slo.end_to_end_ms: a number of milliseconds, got {bound!r}"
    if not END_TO_END_MS["min"] <= bound <= END_TO_END_MS["max"]:
        return f"rag_slo.end_to_end_ms: {bound} is outside [{END_TO_END_MS['min']}, {END_TO_END_MS['max']:,.0f}]"
    if slo.get("percentile", 99.0) not in SLO_PERCENTILES:
        return f"rag_slo.percentile: one of {', '.join(f'{p:g}' for p in SLO_PERCENTILES)}"
    return None


def file_problems(config: Config) -> list[str]:
    """``field: path: reason`` for a corpus or probes file that is missing, not a file or empty here (the plan of a
    local run checks them; on a box the lane reads them and fails with the same line)."""
    out = []
    for name in ("corpus", "probes"):
        path = getattr(config, name)
        if path is None:
            continue
        p = Path(path)
        if not p.is_file():
            out.append(f"{name}: {path}: no such file")
        elif p.stat().st_size == 0:
            out.append(f"{name}: {path}: empty")
    return out


@dataclass
class Config:
    corpus: str | None = field(
        default=None,
        metadata={"help": "the corpus, a local UTF-8 text or Markdown file on the box; None: the shipped handbook"},
    )
    probes: str | None = field(
        default=None,
        metadata={"help": "retrieval probes, a local JSON list of {id, question, expected}; None: the shipped ones"},
    )
    chunk_chars: int = field(default=400, metadata={"help": "a chunk's most characters", **CHUNK_CHARS})
    embedder: str = field(
        default="tiny-qwen3-embedding",
        metadata={"help": "text embedding model: a tiny-* model (built here) or a hub id on the box"},
    )
    reranker: str | None = field(
        default="tiny-qwen3-reranker",
        metadata={"help": "reranking model (None: no rerank stage, no A/B); tiny-* or a hub id on the box"},
    )
    reranker_honours_mask: bool = field(
        default=True,
        metadata={"help": "false: the reranker attends to its padding (the static trace's fault, on purpose)"},
    )
    store: str = field(default="lancedb", metadata={"help": f"vector store: {', '.join(STORES)}"})
    index: dict[str, Any] | None = field(
        default=None,
        metadata={
            "help": "index parameters: lancedb index_type, num_partitions, m, ef_construction, ef, nprobes; "
            "pgvector (HNSW) m, ef_construction, ef_search; None: the store's defaults (recorded in rag_index)"
        },
    )
    pg_bin: str | None = field(
        default=None, metadata={"help": "PostgreSQL's bin directory (None: the newest /usr/lib/postgresql/*/bin)"}
    )
    k: int = field(
        default=3, metadata={"help": "chunks given to the generator; a probe's hit is within these", **TOP_K}
    )
    candidates: int = field(
        default=10, metadata={"help": "chunks retrieved per query (what the reranker reorders)", **CANDIDATES}
    )
    batch_size: int = field(default=8, metadata={"help": "the embedder's and reranker's batch", **BATCH})
    model: str = field(default="tiny-llama", metadata={"help": "catalogue model that generates (served)"})
    server_config: str = field(default="A", metadata={"help": "server config the generator is served with"})
    generate: bool = field(default=True, metadata={"help": "false: no served model, no generate stage"})
    max_tokens: int = field(default=8, metadata={"help": "tokens generated per query", **NEW_TOKENS})
    concurrency: list[int] = field(
        default_factory=lambda: [1, 2], metadata={"help": "closed-loop clients per load level", **CONCURRENCY}
    )
    queries: int = field(default=8, metadata={"help": "queries per load level", **PROMPTS})
    rag_slo: dict[str, Any] = field(
        default_factory=lambda: {"end_to_end_ms": 2000.0, "percentile": 99.0},
        metadata={"help": "the Decision's SLO: end_to_end_ms at the percentile (50, 90, 95, 99)"},
    )
    seed: int = field(default=0, metadata={"help": "the tiny models' seed", **SEED})
    request_timeout_s: float = field(default=60.0, metadata={"help": "one generate request", **REQUEST_TIMEOUT_S})
    health_timeout_s: float = field(default=180.0, metadata={"help": "the served model's boot budget", **BOOT_S})

    def __post_init__(self) -> None:
        if self.store not in STORES:
            raise ValueError(f"store: unknown store {self.store!r}; valid stores: {', '.join(STORES)}")
        for name in ("corpus", "probes"):
            path = getattr(self, name)
            if path is not None and str(path).startswith("s3://"):
                raise ValueError(f"{name}: {path}: a local file on the box (s3:// is not read by this lane)")
        problem = slo_problem(self.rag_slo)
        if problem:
            raise ValueError(problem)
        if not isinstance(self.concurrency, list) or not self.concurrency:
            raise ValueError("concurrency: a non-empty list of clients per level")
        if self.candidates < self.k:
            raise ValueError(f"candidates: {self.candidates} < k {self.k} (the first k are taken from them)")

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "tiny":
            return cls()
        return cls(
            embedder="Qwen/Qwen3-Embedding-0.6B",
            reranker="Qwen/Qwen3-Reranker-0.6B",
            store="pgvector",
            model="llama-3.1-8b-instruct",
            max_tokens=64,
            concurrency=[1, 2, 4, 8],
            queries=64,
            rag_slo={"end_to_end_ms": 5000.0, "percentile": 99.0},
            request_timeout_s=300.0,
            health_timeout_s=5400.0,
        )
