"""The rag lane's embedded vector store (LanceDB, :class:`agents.rag.store.LanceStore`) against exact search: index
build time, search latency p50 / p99 and recall@10 at 10^4 and 10^5 vectors.

Vectors: a seeded mixture of Gaussian clusters (``--clusters`` unit centres, each vector its centre plus noise of
norm about 0.5, unit-normalised), the shape embeddings of a corpus have; queries: fresh draws of the same mixture.
recall@10 = |ANN top 10 ∩ exact top 10| / 10, averaged over the queries; exact =
:class:`agents.rag.store.ExactStore` (one matrix product). Latency is one query at a time, in this process, wall
clock (``time.perf_counter``). Not a test: it prints the figures (docs/dev/benchmarks.md).

    PYTHONPATH=. python benchmarks/vector_store.py [--sizes 10000 100000] [--dim 256] [--queries 200]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from agents.rag.store import ExactStore, LanceStore


def mixture(n: int, dim: int, clusters: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    noise = rng.standard_normal((n, dim)).astype(np.float32) * (0.5 / np.sqrt(dim))  # norm about 0.5 per vector
    v = centres[rng.integers(0, clusters, n)] + noise
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def one_size(n: int, dim: int, queries: int, clusters: int, k: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    v, q = mixture(n, dim, clusters, rng, centres), mixture(queries, dim, clusters, rng, centres)
    ids = [str(i) for i in range(n)]
    exact = ExactStore()
    exact.create(dim)
    exact.ingest(ids, v)
    with tempfile.TemporaryDirectory() as tmp:
        lance = LanceStore(Path(tmp) / "lance")
        lance.create(dim)
        lance.ingest(ids, v)
        t0 = time.perf_counter()
        index = lance.build_index({})
        build = time.perf_counter() - t0
        lance.search(q[0], k)  # the first search opens the index
        ann_ms, exact_ms, recall = [], [], []
        for x in q:
            t = time.perf_counter()
            got = {i for i, _ in lance.search(x, k)}
            ann_ms.append(1000 * (time.perf_counter() - t))
            t = time.perf_counter()
            want = {i for i, _ in exact.search(x, k)}
            exact_ms.append(1000 * (time.perf_counter() - t))
            recall.append(len(got & want) / k)
    return {
        "vectors": n,
        "index": f"{index.index_type} {index.params}",
        "build_s": build,
        "ann_p50_ms": float(np.percentile(ann_ms, 50)),
        "ann_p99_ms": float(np.percentile(ann_ms, 99)),
        "exact_p50_ms": float(np.percentile(exact_ms, 50)),
        "recall_at_10": float(np.mean(recall)),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--clusters", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    for n in a.sizes:
        r = one_size(n, a.dim, a.queries, a.clusters, 10, a.seed)
        print(
            f"{r['vectors']:>7} vectors x {a.dim}: build {r['build_s']:.1f} s; LanceDB p50 {r['ann_p50_ms']:.2f} ms "
            f"p99 {r['ann_p99_ms']:.2f} ms; exact p50 {r['exact_p50_ms']:.2f} ms; recall@10 {r['recall_at_10']:.3f}  "
            f"[{r['index']}]",
            flush=True,
        )


if __name__ == "__main__":
    main()
