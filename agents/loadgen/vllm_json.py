"""``vllm bench serve --save-result`` files, from a point's rows and its view metrics."""
from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

STATS = ("mean", "median", "std", "p50", "p90", "p95", "p99")
METRICS = ("ttft", "tpot", "itl", "e2el")


def vllm_result(result: Any, tokenizer_id: str | None = None) -> dict[str, Any]:
    """The fields vLLM writes, taken from the serving_points view (never recomputed here)."""
    m = result.metrics
    sp = result.sweep_point
    measured = [r for r in result.requests if not r["warmup"]]
    ok = [r for r in measured if r["success"]]
    out: dict[str, Any] = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"),
        "backend": "openai-chat" if str(sp.get("endpoint", "")).endswith("chat/completions") else "openai",
        "endpoint_type": "openai-chat" if str(sp.get("endpoint", "")).endswith("chat/completions") else "openai",
        "label": None,
        "model_id": sp.get("model"),
        "tokenizer_id": tokenizer_id or sp.get("tokenizer"),
        "num_prompts": sp.get("num_prompts") or len(measured),
        "request_rate": sp["request_rate"] if sp.get("request_rate") is not None else "inf",
        "burstiness": sp.get("burstiness") if sp.get("burstiness") is not None else 1.0,
        "max_concurrency": sp.get("max_concurrency"),
        "duration": m.get("duration"),
        "completed": m.get("completed", 0),
        "failed": m.get("failed", 0),
        "total_input_tokens": m.get("total_input_tokens") or 0,
        "total_output_tokens": m.get("total_output_tokens") or 0,
        "request_throughput": m.get("request_throughput"),
        "request_goodput": m.get("request_goodput"),
        "output_throughput": m.get("output_throughput"),
        "total_token_throughput": m.get("total_token_throughput"),
        "input_lens": [r.get("prompt_tokens") or r.get("input_len") or 0 for r in measured],
        "output_lens": [r.get("output_tokens") or 0 for r in measured],
        "ttfts": [r["ttft_s"] for r in ok],
        "itls": [[b - a for a, b in zip(r["chunk_times_s"], r["chunk_times_s"][1:])] for r in ok],
        "generated_texts": ["" for _ in measured],
        "errors": [f"{r.get('error_type')}: {r.get('error')}" if not r["success"] else "" for r in measured],
    }
    for metric in METRICS:
        for stat in STATS:
            out[f"{stat}_{metric}_ms"] = m.get(f"{stat}_{metric}_ms")
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def point_file(path: Path, index: int, total: int) -> Path:
    """``out.json`` for one point; ``out-1.json``, ``out-2.json``... when there are several."""
    path = Path(path)
    return path if total == 1 else path.with_name(f"{path.stem}-{index + 1}{path.suffix or '.json'}")


def save_vllm_json(result: Any, path: Path, tokenizer_id: str | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(vllm_result(result, tokenizer_id), indent=1, default=str) + "\n")
    return path
