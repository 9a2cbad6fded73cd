"""host_cpu: the client-side ceiling (rule 10: context, never a headline).

* triad: STREAM-like ``a = b + s*c`` memory bandwidth, counted as STREAM does
  (24 bytes per element: two reads, one write), on 1 thread and on all threads;
* matmul: fp32 GEMM GFLOP/s (2·n³ per multiply) against the thread count;
* tokenizer: encode throughput of the bundled tokenizer (or a given one) over the bundled data.

Each figure is the best of ``repeats`` timed runs after a warm-up, with the median beside it.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.context import LaneContext
from pipeline.lane_configs.host_cpu import Config


def default_thread_counts() -> tuple[int, ...]:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    counts, t = [], 1
    while t < cores:
        counts.append(t)
        t *= 2
    counts.append(cores)
    return tuple(counts)


def _time_best(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    fn()  # warm-up (page faults, thread pool start)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def triad_rows(n: int, repeats: int, threads: tuple[int, ...]) -> list[dict[str, Any]]:
    rows = []
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        prev = torch.get_num_threads()
        b = torch.rand(n, dtype=torch.float64)
        c = torch.rand(n, dtype=torch.float64)
        a = torch.empty_like(b)
        try:
            for t in sorted({1, max(threads)}):
                torch.set_num_threads(t)
                best, med = _time_best(lambda: torch.add(b, c, alpha=3.0, out=a), repeats)
                rows.append(
                    {
                        "bench": "triad",
                        "threads": t,
                        "size": n,
                        "value": 24 * n / best / 1e9,
                        "median": 24 * n / med / 1e9,
                        "unit": "GB/s",
                        "repeats": repeats,
                        "note": "torch.add(b, c, alpha=s, out=a), fused; 24 B/element (STREAM convention)",
                    }
                )
        finally:
            torch.set_num_threads(prev)
    else:
        import numpy as np

        b = np.random.default_rng(0).random(n)
        c = np.random.default_rng(1).random(n)
        a = np.empty_like(b)

        def triad() -> None:
            np.multiply(c, 3.0, out=a)
            np.add(a, b, out=a)

        best, med = _time_best(triad, repeats)
        rows.append(
            {
                "bench": "triad",
                "threads": 1,
                "size": n,
                "value": 24 * n / best / 1e9,
                "median": 24 * n / med / 1e9,
                "unit": "GB/s",
                "repeats": repeats,
                "note": "numpy two-pass (40 B/element moved); reported at STREAM's 24 B/element, a lower bound",
            }
        )
    return rows


def matmul_rows(n: int, repeats: int, threads: tuple[int, ...]) -> list[dict[str, Any]]:
    rows = []
    flops = 2.0 * n**3
    try:
        import torch
    except ImportError:
        import numpy as np

        x = np.random.default_rng(0).random((n, n), dtype=np.float32)
        best, med = _time_best(lambda: x @ x, repeats)
        return [
            {
                "bench": "matmul",
                "threads": None,
                "size": n,
                "value": flops / best / 1e9,
                "median": flops / med / 1e9,
                "unit": "GFLOP/s",
                "repeats": repeats,
                "note": "numpy BLAS, thread count not controlled (torch absent)",
            }
        ]
    prev = torch.get_num_threads()
    x = torch.rand(n, n, dtype=torch.float32)
    y = torch.rand(n, n, dtype=torch.float32)
    out = torch.empty(n, n, dtype=torch.float32)
    try:
        for t in threads:
            torch.set_num_threads(t)
            best, med = _time_best(lambda: torch.mm(x, y, out=out), repeats)
            rows.append(
                {
                    "bench": "matmul",
                    "threads": t,
                    "size": n,
                    "value": flops / best / 1e9,
                    "median": flops / med / 1e9,
                    "unit": "GFLOP/s",
                    "repeats": repeats,
                    "note": "torch.mm fp32, 2n^3 FLOPs",
                }
            )
    finally:
        torch.set_num_threads(prev)
    return rows


def bundled_texts(limit: int) -> list[str]:
    """Texts of the bundled instruction data (instruction + context + response), cycled to ``limit``."""
    from agents.training.data import load_instructions

    texts = [
        " ".join(str(r.get(k) or "") for k in ("instruction", "context", "response")).strip()
        for r in load_instructions().records
    ]
    out: list[str] = []
    while len(out) < limit:
        out.extend(texts)
    return out[:limit]


def tokenizer_rows(ctx: LaneContext, config: Config) -> list[dict[str, Any]]:
    from tokenizers import Tokenizer

    if config.tokenizer_path:
        tok_dir = Path(config.tokenizer_path)
    else:
        from agents.training.tiny_models import ensure_tokenizer

        tok_dir = ensure_tokenizer(ctx.cache_dir)
    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    texts = bundled_texts(config.tokenizer_texts)
    n_tokens = sum(len(e.ids) for e in tok.encode_batch(texts))
    rows = []
    for mode, fn in (
        ("sequential", lambda: [tok.encode(t) for t in texts]),
        ("batch", lambda: tok.encode_batch(texts)),
    ):
        best, med = _time_best(fn, config.repeats)
        rows.append(
            {
                "bench": "tokenizer",
                "threads": 1 if mode == "sequential" else None,
                "size": len(texts),
                "value": n_tokens / best,
                "median": n_tokens / med,
                "unit": "tokens/s",
                "repeats": config.repeats,
                "note": f"{mode} encode of {len(texts)} bundled texts ({n_tokens} tokens) with {tok_dir.name}",
            }
        )
    return rows


def run(ctx: LaneContext, config: Config) -> None:
    threads = config.thread_counts or default_thread_counts()
    rows = triad_rows(config.triad_elements, config.repeats, threads)
    ctx.progress("host_cpu", 1, 3, "benches")
    rows += matmul_rows(config.matmul_n, config.repeats, threads)
    ctx.progress("host_cpu", 2, 3, "benches")
    rows += tokenizer_rows(ctx, config)
    ctx.write("host_bench", rows)
    ctx.progress("host_cpu", 3, 3, "benches")
