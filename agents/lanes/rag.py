"""rag: the RAG appliance on one box — ingest a corpus, embed it, index it in a vector store, answer the retrieval
probes with and without the reranker, then serve whole queries (embed, search, rerank, generate) under load
(docs/reference/lanes.md, "rag").

Order: the served model boots first (its cores placed apart from the lane's: :mod:`agents.rag.placement`), then the
embedder loads beside it. An embedder that cannot start beside the server is a ``rag_coresidency`` row ``failed``
with the runtime's own error; the server is stopped, the embedder loads alone, and the retrieval (ingest, probes,
load without a generate stage) is measured anyway. A server that does not boot fails the generate stage the same
way: its ``compiles`` row says why, and the retrieval is measured without it.
"""

from __future__ import annotations

import contextlib
import json
import time
from datetime import datetime, timezone
from typing import Any

from agents.context import LaneContext
from pipeline.lane_configs.rag import Config


def run(ctx: LaneContext, config: Config) -> None:
    from agents.encoders import text as api
    from agents.rag.corpus import chunk_text, read_corpus, read_probes
    from agents.rag.placement import placed, placement, with_server_env
    from agents.serving import get_launcher
    from agents.serving.launcher import ServedModel, ServerBootError
    from agents.serving.session import serve
    from agents.serving.variants import lane_server_configs
    from agents.training.catalogue import resolve_model

    text, source = read_corpus(config.corpus)  # CorpusInputError names the file
    probes = read_probes(config.probes)
    chunks = chunk_text(text, source, config.chunk_chars)
    workdir = ctx.lane_dir("rag")
    run_cols = {"store": config.store, "embedder": config.embedder, "backend": ctx.backend}

    server_ctx: Any = contextlib.nullcontext(None)
    where = None
    if config.generate:
        launcher = get_launcher(ctx.backend, ctx.cache_dir)
        cfg = lane_server_configs(ctx, launcher, [config.server_config])[0]
        where = placement(cfg, ctx.backend)
        model = ServedModel(config.model, resolve_model(config.model, ctx.cache_dir, ctx.profile))
        server_ctx = serve(ctx, launcher, model, with_server_env(cfg, where), config.health_timeout_s)
    with contextlib.ExitStack() as stack:
        server = None
        try:
            server = stack.enter_context(server_ctx)
        except ServerBootError:
            pass  # its compiles row says why; the retrieval goes on without a generate stage
        if server is not None and where is not None:
            stack.enter_context(placed(where))
        try:
            embedder, reranker = _load(api, config, ctx, workdir)
        except Exception as exc:  # the runtime's refusal beside the server is the co-residency result
            if server is None:
                raise
            _coresidency(ctx, config, where, "failed", None, exc)
            stack.close()  # the server stops; the embedder loads alone
            server = None
            embedder, reranker = _load(api, config, ctx, workdir)
        _measure(ctx, config, chunks, probes, source, embedder, reranker, server, where, workdir, run_cols)


def _load(api: Any, config: Config, ctx: LaneContext, workdir: Any) -> tuple[Any, Any]:
    embedder = api.load_text_embedder(config.embedder, backend=ctx.backend, workdir=workdir, seed=config.seed)
    reranker = None
    if config.reranker:
        reranker = api.load_reranker(
            config.reranker,
            backend=ctx.backend,
            workdir=workdir,
            seed=config.seed,
            honour_mask=config.reranker_honours_mask,
        )
    return embedder, reranker


def _coresidency(
    ctx: LaneContext, config: Config, where: Any, outcome: str, queries: int | None, exc: Exception | None
) -> None:
    ctx.write(
        "rag_coresidency",
        [
            {
                "backend": ctx.backend,
                "embedder": config.embedder,
                "generator": config.model,
                "embedder_devices": where.embedder_devices if where else None,
                "generator_devices": where.server_devices if where else None,
                "outcome": outcome,
                "queries": queries,
                "error": f"{type(exc).__name__}: {exc}"[-4000:] if exc is not None else None,
                "ts": datetime.now(timezone.utc),
            }
        ],
        keep_on_failure=outcome == "failed",
    )


def _measure(
    ctx: LaneContext,
    config: Config,
    chunks: list[Any],
    probes: list[Any],
    source: str,
    embedder: Any,
    reranker: Any,
    server: Any,
    where: Any,
    workdir: Any,
    run_cols: dict[str, Any],
) -> None:
    from agents.rag.stages import Generator, RagPipeline, load_rows, probe_rows
    from agents.rag.stores import open_store

    store = open_store(config.store, workdir, config.pg_bin)
    with store:
        t0 = time.perf_counter()
        vectors = embedder.embed([c.text for c in chunks], batch_size=config.batch_size)
        t1 = time.perf_counter()
        store.create(int(vectors.shape[1]))
        store.ingest([c.chunk_id for c in chunks], vectors)
        t2 = time.perf_counter()
        ctx.write(
            "rag_ingest",
            [
                {
                    **run_cols,
                    "corpus": source,
                    "documents": 1,
                    "chunks": len(chunks),
                    "chunking": _chunking(config.chunk_chars),
                    "embed_s": t1 - t0,
                    "store_s": t2 - t1,
                    "seconds": t2 - t0,
                    "batch_size": config.batch_size,
                    "ts": _now(),
                }
            ],
        )
        index = store.build_index(dict(config.index or {}))
        built = time.perf_counter() - t2
        ctx.write(
            "rag_index",
            [
                {
                    **run_cols,
                    "index_type": index.index_type,
                    "index_params": json.dumps(index.params, sort_keys=True),
                    "store_version": _store_version(store),
                    "vectors": len(chunks),
                    "dim": int(vectors.shape[1]),
                    "build_s": built if index.index_type != "flat" else None,
                    "ts": _now(),
                }
            ],
        )
        pipe = RagPipeline(
            embedder,
            store,
            {c.chunk_id: c for c in chunks},
            k=config.k,
            candidates=min(config.candidates, len(chunks)),
            reranker=reranker,
            batch_size=config.batch_size,
        )
        ctx.write(
            "rag_probes",
            [{**run_cols, "reranker": config.reranker, **r, "ts": _now()} for r in probe_rows(pipe, probes)],
        )
        generator = None
        if server is not None:
            generator = Generator(server.base_url, config.model, config.max_tokens, config.request_timeout_s)
            pipe.generator = generator
        questions = [(p.probe_id, p.question) for p in probes]
        total = config.queries * len(config.concurrency)
        cols = {
            **run_cols,
            "reranker": config.reranker,
            "generator": config.model if generator is not None else None,
            "slo_end_to_end_ms": float(config.rag_slo["end_to_end_ms"]),
            "slo_percentile": float(config.rag_slo.get("percentile", 99.0)),
        }
        measured = 0
        try:
            for level, c in enumerate(config.concurrency):
                done = level * config.queries
                rows = load_rows(
                    pipe, questions, c, config.queries, lambda n, d=done: ctx.progress("rag queries", d + n, total)
                )
                ctx.write("rag_requests", [{**cols, **r, "ts": _now()} for r in rows])
                measured += sum(1 for r in rows if r["stage"] == "end_to_end" and r["ok"])
        finally:
            if generator is not None:
                generator.close()
        if server is not None:
            _coresidency(ctx, config, where, "measured", measured, None)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _chunking(max_chars: int) -> str:
    from agents.rag.corpus import chunking

    return chunking(max_chars)


def _store_version(store: Any) -> str | None:
    if store.name == "pgvector":
        return f"pgvector {store.version}" if store.version else None
    if store.name == "lancedb":
        from importlib.metadata import version

        return f"lancedb {version('lancedb')}"
    return None
