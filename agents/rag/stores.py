"""A vector store by name: the embedded ones (:mod:`agents.rag.store`) and pgvector (:mod:`agents.rag.pgvector`),
which builds on the interface the first module defines (so the choice lives here, beside both)."""

from __future__ import annotations

from pathlib import Path

from agents.rag.store import STORES, ExactStore, LanceStore, VectorStore


def open_store(name: str, workdir: Path, pg_bin: str | None = None) -> VectorStore:
    """A store by name (:data:`agents.rag.store.STORES`); an unknown name raises ``ValueError`` listing them."""
    if name == "lancedb":
        return LanceStore(Path(workdir) / "lancedb")
    if name == "exact":
        return ExactStore()
    if name == "pgvector":
        from agents.rag.pgvector import PgVectorStore

        return PgVectorStore(Path(workdir) / "pgvector", bin_dir=pg_bin)
    raise ValueError(f"store: unknown store {name!r}; valid stores: {', '.join(STORES)}")
