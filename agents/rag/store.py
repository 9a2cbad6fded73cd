"""The vector store behind one small interface: create, ingest, build the index, search, close.

Stores (:data:`STORES`): ``lancedb`` (embedded, from PyPI: a directory of Lance files in the lane's work
directory, an IVF-HNSW index once the table has enough rows to train one), ``pgvector`` (PostgreSQL with the
pgvector extension, started and stopped by the lane: :mod:`agents.rag.pgvector`), and ``exact`` (a numpy matrix
searched exhaustively: the reference recall is measured against, never a database).

Every store searches by cosine distance over L2-normalised vectors; ``search`` returns (chunk id, distance) pairs,
nearest first. :attr:`VectorStore.index` says what the last :meth:`build_index` built, as the ``rag_index`` row
records it (index type and its parameters; ``flat`` where the search is exhaustive).
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

STORES = ("lancedb", "pgvector", "exact")


@dataclass
class IndexInfo:
    index_type: str
    params: dict[str, Any] = field(default_factory=dict)


class VectorStore(ABC):
    name: str = ""

    def __init__(self) -> None:
        self.index = IndexInfo("flat")

    @abstractmethod
    def create(self, dim: int) -> None: ...

    @abstractmethod
    def ingest(self, ids: list[str], vectors: np.ndarray) -> None: ...

    @abstractmethod
    def build_index(self, params: dict[str, Any]) -> IndexInfo: ...

    @abstractmethod
    def search(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]: ...

    def close(self) -> None:
        return None

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ExactStore(VectorStore):
    name = "exact"

    def create(self, dim: int) -> None:
        self._ids: list[str] = []
        self._m = np.zeros((0, dim), np.float32)

    def ingest(self, ids: list[str], vectors: np.ndarray) -> None:
        self._ids += list(ids)
        self._m = np.concatenate([self._m, np.asarray(vectors, np.float32)])

    def build_index(self, params: dict[str, Any]) -> IndexInfo:
        self.index = IndexInfo("flat")
        return self.index

    def search(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        d = 1.0 - self._m @ np.asarray(vector, np.float32)
        top = np.argsort(d, kind="stable")[:k]
        return [(self._ids[i], float(d[i])) for i in top]


# below this many rows LanceDB cannot train its partitions: the search stays exhaustive (recorded as flat)
LANCE_MIN_INDEX_ROWS = 256
LANCE_DEFAULTS = {
    "index_type": "IVF_HNSW_SQ",
    "num_partitions": None,
    "m": 20,
    "ef_construction": 300,
    "ef": 64,
    "nprobes": 8,
}


class LanceStore(VectorStore):
    """LanceDB, embedded: the table lives in ``root`` (removed first, so a rerun starts empty)."""

    name = "lancedb"

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = Path(root)
        self._search: dict[str, Any] = {}

    def create(self, dim: int) -> None:
        import lancedb
        import pyarrow as pa

        shutil.rmtree(self.root, ignore_errors=True)
        self._db = lancedb.connect(str(self.root))
        schema = pa.schema([pa.field("id", pa.string()), pa.field("vector", pa.list_(pa.float32(), dim))])
        self._table = self._db.create_table("chunks", schema=schema)
        self._dim = dim

    def ingest(self, ids: list[str], vectors: np.ndarray) -> None:
        import pyarrow as pa

        v = np.asarray(vectors, np.float32).reshape(-1)
        arr = pa.FixedSizeListArray.from_arrays(pa.array(v, pa.float32()), self._dim)
        self._table.add(pa.table({"id": pa.array(ids, pa.string()), "vector": arr}))

    def build_index(self, params: dict[str, Any]) -> IndexInfo:
        p = {**LANCE_DEFAULTS, **params}
        rows = self._table.count_rows()
        if rows < LANCE_MIN_INDEX_ROWS:
            self.index = IndexInfo("flat", {"reason": f"{rows} rows < {LANCE_MIN_INDEX_ROWS}: exhaustive search"})
            self._search = {}
            return self.index
        partitions = p["num_partitions"] or max(1, int(round(rows**0.5 / 4)))
        kind = str(p["index_type"])
        kwargs: dict[str, Any] = {"metric": "cosine", "num_partitions": partitions, "index_type": kind}
        if "HNSW" in kind:
            kwargs.update(m=int(p["m"]), ef_construction=int(p["ef_construction"]))
        self._table.create_index(**kwargs)
        self._search = {"nprobes": int(p["nprobes"]), **({"ef": int(p["ef"])} if "HNSW" in kind else {})}
        self.index = IndexInfo(kind, {k: v for k, v in kwargs.items() if k != "index_type"} | self._search)
        return self.index

    def search(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        q = self._table.search(np.asarray(vector, np.float32)).distance_type("cosine").limit(k).select(["id"])
        if "nprobes" in self._search:
            q = q.nprobes(self._search["nprobes"])
        if "ef" in self._search:
            q = q.ef(self._search["ef"])
        return [(r["id"], float(r["_distance"])) for r in q.to_list()]
