"""One RAG query, stage by stage: embed the question, search the store, rerank the candidates (optional), generate
through the served model's OpenAI-compatible endpoint (optional); each stage's wall time, and the end to end.

:func:`probe_rows` scores the probes (the retrieval alone, with and without the reranker); :func:`load_rows` runs
the whole query under a closed loop of ``concurrency`` clients and returns one ``rag_requests`` row per query and
stage.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.rag.corpus import Chunk, Probe
from agents.rag.store import VectorStore

STAGES = ("embed", "search", "rerank", "generate", "end_to_end")
ARMS = ("cosine", "reranked")


@dataclass
class Generator:
    """The served model's completions endpoint."""

    base_url: str
    model: str
    max_tokens: int = 16
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        import httpx

        self._client = httpx.Client(timeout=self.timeout_s)

    def complete(self, prompt: str) -> str:
        body = {"model": self.model, "prompt": prompt, "max_tokens": self.max_tokens, "temperature": 0.0}
        r = self._client.post(f"{self.base_url.rstrip('/')}/v1/completions", json=body)
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {' '.join(r.text.split())[:300]}")
        return str(r.json()["choices"][0]["text"])

    def close(self) -> None:
        self._client.close()


@dataclass
class RagPipeline:
    embedder: Any
    store: VectorStore
    chunks: dict[str, Chunk]
    k: int = 3
    candidates: int = 10
    reranker: Any = None
    generator: Generator | None = None
    batch_size: int = 8
    _embed_lock: threading.Lock = field(default_factory=threading.Lock)

    def embed(self, question: str) -> np.ndarray:
        with self._embed_lock:  # one model instance: its calls one at a time, as one device would take them
            return self.embedder.embed([question], batch_size=1)[0]

    def retrieve(self, question: str, timings: dict[str, float]) -> list[str]:
        t0 = time.perf_counter()
        vec = self.embed(question)
        t1 = time.perf_counter()
        ids = [cid for cid, _ in self.store.search(vec, self.candidates)]
        timings["embed"], timings["search"] = t1 - t0, time.perf_counter() - t1
        return ids

    def rerank(self, question: str, ids: list[str], timings: dict[str, float]) -> list[str]:
        t0 = time.perf_counter()
        with self._embed_lock:
            scores = self.reranker.score(question, [self.chunks[i].text for i in ids], batch_size=self.batch_size)
        timings["rerank"] = time.perf_counter() - t0
        order = np.argsort(-np.asarray(scores, np.float64), kind="stable")
        return [ids[i] for i in order]

    def prompt(self, question: str, ids: list[str]) -> str:
        context = "\n".join(f"- {self.chunks[i].text}" for i in ids[: self.k])
        return f"Answer from the context.\nContext:\n{context}\nQuestion: {question}\nAnswer:"

    def query(self, question: str) -> dict[str, float]:
        """One query through every stage the pipeline has: stage -> seconds (end_to_end included)."""
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        ids = self.retrieve(question, timings)
        if self.reranker is not None:
            ids = self.rerank(question, ids, timings)
        if self.generator is not None:
            t1 = time.perf_counter()
            self.generator.complete(self.prompt(question, ids))
            timings["generate"] = time.perf_counter() - t1
        timings["end_to_end"] = time.perf_counter() - t0
        return timings


def rank_of(probe: Probe, ids: list[str], chunks: dict[str, Chunk]) -> int | None:
    """1-based rank of the first chunk holding the probe's expected text; None: not among ``ids``."""
    for i, cid in enumerate(ids, 1):
        if probe.found_in(chunks[cid].text):
            return i
    return None


def probe_rows(pipe: RagPipeline, probes: list[Probe]) -> list[dict[str, Any]]:
    """Per probe and arm (cosine; reranked where the pipeline has a reranker): the expected fact's rank among the
    candidates and whether it is in the first k."""
    rows = []
    for p in probes:
        timings: dict[str, float] = {}
        ids = pipe.retrieve(p.question, timings)
        arms = [("cosine", ids)]
        if pipe.reranker is not None:
            arms.append(("reranked", pipe.rerank(p.question, ids, timings)))
        for arm, order in arms:
            rank = rank_of(p, order, pipe.chunks)
            rows.append(
                {
                    "probe_id": p.probe_id,
                    "question": p.question,
                    "expected": p.expected,
                    "arm": arm,
                    "rank": rank,
                    "k": pipe.k,
                    "hit": rank is not None and rank <= pipe.k,
                    "candidates": len(order),
                    "retrieved": ",".join(order[: pipe.k]),
                }
            )
    return rows


def load_rows(
    pipe: RagPipeline,
    questions: list[tuple[str, str]],
    concurrency: int,
    queries: int,
    progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """``queries`` queries (cycling through ``questions``: (probe id, question)) from ``concurrency`` closed-loop
    clients; one row per query and stage, a failed query's error on its end_to_end row (its stages NULL)."""
    lock = threading.Lock()
    done = [0]

    def one(i: int) -> list[dict[str, Any]]:
        pid, q = questions[i % len(questions)]
        base = {"concurrency": concurrency, "request_index": i, "probe_id": pid}
        try:
            timings, error = pipe.query(q), None
        except Exception as exc:  # noqa: BLE001 - a failed query is a row with its verbatim error, the load goes on
            timings, error = {}, f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:1500]
        with lock:
            done[0] += 1
            if progress is not None:
                progress(done[0])
        if error is not None:
            return [{**base, "stage": "end_to_end", "latency_s": None, "ok": False, "error": error}]
        return [{**base, "stage": s, "latency_s": v, "ok": True, "error": None} for s, v in timings.items()]

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        rows = [r for batch in pool.map(one, range(queries)) for r in batch]
    wall = time.perf_counter() - t0
    for r in rows:
        r["level_wall_s"] = wall
        r["level_queries"] = queries
    return rows
