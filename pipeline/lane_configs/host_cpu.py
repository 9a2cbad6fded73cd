"""host_cpu's config: triad and GEMM sizes, thread counts, repeats, tokenizer texts."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.lane_configs.bounds import BENCH_REPEATS, GEMM_N, THREADS, TOKENIZER_TEXTS, TRIAD_ELEMENTS


@dataclass
class Config:
    triad_elements: int = field(
        default=1 << 24, metadata={"help": "elements per triad array (float64)", **TRIAD_ELEMENTS}
    )
    matmul_n: int = field(default=1024, metadata={"help": "square fp32 matrix side for the GEMM", **GEMM_N})
    repeats: int = field(
        default=5, metadata={"help": "timed repeats per measurement (best and median kept)", **BENCH_REPEATS}
    )
    thread_counts: tuple[int, ...] = field(
        default=(), metadata={"help": "GEMM thread counts; empty: 1, 2, 4, ... cores", **THREADS}
    )
    tokenizer_path: str | None = field(default=None, metadata={"help": "tokenizer dir; default: the bundled tiny one"})
    tokenizer_texts: int = field(
        default=2000, metadata={"help": "texts encoded per tokenizer repeat", **TOKENIZER_TEXTS}
    )

    @classmethod
    def for_profile(cls, profile: str) -> Config:
        if profile == "full":
            return cls(triad_elements=1 << 26, matmul_n=2048, repeats=7, tokenizer_texts=20000)
        return cls(triad_elements=1 << 23, matmul_n=768, repeats=3, tokenizer_texts=1000)
