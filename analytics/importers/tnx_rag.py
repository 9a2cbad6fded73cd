"""torchneuronx ``inf2/results/rag/`` (its RAG appliance: PostgreSQL 16 + pgvector, Qwen3-Embedding-0.6B and
Qwen3-Reranker-0.6B traced to NeuronCores, Llama 3.1 8B generating) → the ``rag`` lane.

* ``compile_embed.json`` / ``compile_rerank.json`` → ``compiles`` rows (``what`` ``encoder_trace``): the
  ``torch_neuronx.trace`` of each model at its static shape (the ``config``: its output directory's shape suffix,
  ``b8-s512``), wall seconds as recorded, cold (its first compile).
* ``ingest.json`` → ``rag_ingest``: documents, chunks, wall seconds (embedding on the chip and the inserts; the
  source does not split them: ``embed_s`` / ``store_s`` NULL); its chunking, stated from its chunker's contract
  (heading-aware Markdown, at most ``max_chars``). Its index (``extras/rag/schema.sql``: HNSW, ``m`` 16,
  ``ef_construction`` 64, ``vector_cosine_ops``, vector(1024)) → ``rag_index``, ``store_version`` from
  ``setup_pg.log``'s ``pgvector: extversion=``; the build time was not recorded (NULL).
* ``probes_nollm_cosine.json`` / ``probes_nollm_rerank.json`` → ``rag_probes`` arms ``cosine`` and ``reranked``:
  ``hit`` is the probe's ``pass`` (its top 3 holds one of the expected strings), ``k`` 3; the rank within the 3 was
  not recorded (NULL: the view's MRR is then NULL). The per-probe stage timings (``embed_ms``, ``retrieve_ms``,
  ``rerank_ms``) → ``rag_requests`` at concurrency 1 (one query at a time); its ``e2e_ms`` is not imported: it
  includes the traced module's load in each probe's fresh process (about 56 s), which the source declares a
  harness artifact, not query latency.
* ``probes_llm.json`` (the end to end with the 8B server up) → one failed ``end_to_end`` ``rag_requests`` row per
  probe with its error, and a ``rag_coresidency`` row ``failed``: the TP=2 server on both NeuronCores, the
  embedder with no core left, and the runtime's own error, verbatim.
* ``llama31_base_boot.json`` → the generator's boot in ``compiles`` (read like the serving boots).

Not imported: ``embed_lane.json`` (the embedder's own throughput per batch: an encoder measurement, not a RAG
stage), ``rag_venv.failure.json`` (an earlier attempt at the lane's environment, superseded by the run above).
"""

from __future__ import annotations

import json
import re
from typing import Any

from analytics.importers.common import LaneImport, load_json, num, parse_time
from analytics.importers.source import Tree
from analytics.importers.tnx_inf2 import boot_row

RAG = "inf2/results/rag/"
EMBEDDER = "Qwen/Qwen3-Embedding-0.6B"
STORE = "pgvector"
K = 3  # its probes: the top-3 contexts (extras/rag/probes.py)
MAX_CHARS_DEFAULT = 1200
INDEX_PARAMS = {"m": 16, "ef_construction": 64, "ops": "vector_cosine_ops"}  # extras/rag/schema.sql
DIM = 1024  # schema.sql: vector(1024)
SHAPE_RE = re.compile(r"-(b\d+-s\d+)$")
EXTVERSION_RE = re.compile(r"pgvector:\s*extversion=(\S+)")
TP2_CORES = "NEURON_RT_VISIBLE_CORES=0-1"  # the TP=2 8B server: both NeuronCores of the inf2.xlarge
NOT_IMPORTED = {
    "embed_lane.json": "the embedder's own throughput per batch: an encoder measurement, not a RAG stage",
    "rag_venv.failure.json": "an earlier attempt at the lane's environment, superseded by the run imported",
    "e2e_ms": "each probe's end to end includes the traced module's load in a fresh process (~56 s): a harness "
    "artifact the source declares, not query latency",
}


def _compile_row(tree: Tree, path: str) -> dict[str, Any]:
    d = load_json(tree, path)
    shape = SHAPE_RE.search(str(d.get("out_dir") or ""))
    ok = d.get("status") == "compiled"
    return {
        "what": "encoder_trace",
        "model": d.get("model_id"),
        "config": shape.group(1) if shape else None,
        "cache": "cold",
        "wall_s": num(d.get("wall_s")),
        "succeeded": ok,
        "error": None if ok else str(d.get("error") or d.get("status")),
        "backend": "neuron",
        "ts": parse_time(d.get("captured")),
    }


def _probe_rows(d: dict[str, Any], arm: str, reranker: str | None, ts: Any) -> list[dict[str, Any]]:
    out = []
    for i, p in enumerate(d.get("probes") or []):
        expected = p.get("expect_any") or []
        ids = p.get("ids") or []
        out.append(
            {
                "store": STORE,
                "embedder": EMBEDDER,
                "backend": "neuron",
                "reranker": reranker,
                "probe_id": f"probe{i + 1}",
                "question": p.get("q"),
                "expected": " | ".join(map(str, expected)),
                "arm": arm,
                "rank": None,
                "k": K,
                "hit": bool(p.get("pass")),
                "candidates": len(ids) or None,
                "retrieved": ",".join(map(str, ids[:K])) or None,
                "ts": ts,
            }
        )
    return out


def _timing_rows(d: dict[str, Any], reranker: str | None, ts: Any) -> list[dict[str, Any]]:
    out = []
    stages = (("embed", "embed_ms"), ("search", "retrieve_ms"), ("rerank", "rerank_ms"))
    for i, p in enumerate(d.get("probes") or []):
        t = p.get("timings") or {}
        for stage, key in stages:
            ms = num(t.get(key))
            if ms is None:
                continue
            out.append(
                {
                    "store": STORE,
                    "embedder": EMBEDDER,
                    "backend": "neuron",
                    "reranker": reranker,
                    "generator": None,
                    "concurrency": 1,
                    "request_index": i,
                    "probe_id": f"probe{i + 1}",
                    "stage": stage,
                    "latency_s": ms / 1000.0,
                    "ok": True,
                    "ts": ts,
                }
            )
    return out


def rag_lane(tree: Tree, files: list[str]) -> LaneImport | None:
    """The rag lane from the source's receipts (None: it has none)."""
    mine = [f for f in files if f.startswith(RAG)]
    if RAG + "ingest.json" not in mine and RAG + "probes_nollm_cosine.json" not in mine:
        return None
    li = LaneImport("rag", "inf2")
    stamps = []

    def read(name: str) -> dict[str, Any] | None:
        path = RAG + name
        if path not in mine:
            return None
        li.paths.append(path)
        d = load_json(tree, path)
        stamps.append(parse_time(d.get("captured")) if isinstance(d, dict) else None)
        return d

    for name in ("compile_embed.json", "compile_rerank.json"):
        if RAG + name in mine:
            li.add("compiles", _compile_row(tree, RAG + name))
            li.paths.append(RAG + name)
    reranker = None
    rerank = load_json(tree, RAG + "compile_rerank.json") if RAG + "compile_rerank.json" in mine else {}
    reranker = rerank.get("model_id") if isinstance(rerank, dict) else None
    if RAG + "llama31_base_boot.json" in mine:
        li.add("compiles", boot_row(tree, RAG + "llama31_base_boot.json"))
        li.paths.append(RAG + "llama31_base_boot.json")
    ingest = read("ingest.json")
    if ingest is not None:
        ts = parse_time(ingest.get("captured"))
        max_chars = int(num(ingest.get("max_chars")) or MAX_CHARS_DEFAULT)
        li.add(
            "rag_ingest",
            {
                "store": STORE,
                "embedder": EMBEDDER,
                "backend": "neuron",
                "corpus": "its docs: " + ", ".join(map(str, files)) if (files := ingest.get("files")) else "its docs",
                "documents": ingest.get("docs"),
                "chunks": ingest.get("chunks"),
                "chunking": f"heading-aware markdown blocks accumulated up to {max_chars} characters, an oversized "
                "block split at line, then word boundaries (the source's chunker)",
                "seconds": num(ingest.get("wall_s")),
                "batch_size": 8,
                "ts": ts,
            },
        )
        setup = RAG + "setup_pg.log"
        version = None
        if setup in mine:
            m = EXTVERSION_RE.search(tree.text(setup))
            version = f"pgvector {m.group(1)}" if m else None
            li.paths.append(setup)
        li.add(
            "rag_index",
            {
                "store": STORE,
                "embedder": EMBEDDER,
                "backend": "neuron",
                "index_type": "hnsw",
                "index_params": json.dumps(INDEX_PARAMS, sort_keys=True),
                "store_version": version,
                "vectors": ingest.get("chunks"),
                "dim": DIM,
                "build_s": None,
                "ts": ts,
            },
        )
    cosine = read("probes_nollm_cosine.json")
    if cosine is not None:
        ts = stamps[-1]
        li.add("rag_probes", _probe_rows(cosine, "cosine", None, ts))
        li.add("rag_requests", _timing_rows(cosine, None, ts))
    reranked = read("probes_nollm_rerank.json")
    if reranked is not None:
        ts = stamps[-1]
        li.add("rag_probes", _probe_rows(reranked, "reranked", reranker, ts))
        li.add("rag_requests", _timing_rows(reranked, reranker, ts))
    llm = read("probes_llm.json")
    if llm is not None:
        ts = stamps[-1]
        errors = []
        for i, p in enumerate(llm.get("probes") or []):
            error = p.get("error")
            errors.append(error)
            li.add(
                "rag_requests",
                {
                    "store": STORE,
                    "embedder": EMBEDDER,
                    "backend": "neuron",
                    "reranker": None,
                    "generator": llm.get("llm_model"),
                    "concurrency": 1,
                    "request_index": i,
                    "probe_id": f"probe{i + 1}",
                    "stage": "end_to_end",
                    "latency_s": None,
                    "ok": error is None,
                    "error": _runtime_error(error) if error else None,
                    "ts": ts,
                },
            )
        first = next((e for e in errors if e), None)
        li.add(
            "rag_coresidency",
            {
                "backend": "neuron",
                "embedder": EMBEDDER,
                "generator": llm.get("llm_model"),
                "embedder_devices": None,
                "generator_devices": TP2_CORES,
                "outcome": "failed" if first else "measured",
                "queries": sum(1 for e in errors if not e),
                "error": _runtime_error(first) if first else None,
                "ts": ts,
            },
        )
    li.ended_at = max(filter(None, stamps), default=None)
    return li


def _runtime_error(text: str) -> str:
    """The runtime's own words: from the exception line (``RuntimeError: ...``) to the end of the recorded tail."""
    m = re.search(r"^\w+Error: .*", text, flags=re.M | re.S)
    return " ".join((m.group(0) if m else text).split())
