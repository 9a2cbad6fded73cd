"""Per-server request adapters: how each server kind is asked for exact lengths.

* ``vllm``: ``max_tokens`` + ``ignore_eos`` + ``min_tokens`` pin the output;
  ``truncate_prompt_tokens`` pins the input; per-chunk usage
  (``continuous_usage_stats``) gives exact tokens per chunk.
* ``transformers`` (``transformers serve``): no ``ignore_eos``; a
  ``generation_config`` JSON with ``min_new_tokens``/``max_new_tokens``; one request
  at a time (``max_concurrency`` 1).
* ``synthetic``: the synthetic server (vLLM's knobs).
* ``openai``: any other OpenAI-compatible server: ``max_tokens`` only (achieved
  lengths are still checked and a miss flags the point).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

Endpoint = Literal["completions", "chat"]
ENDPOINT_PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


class UnknownServerKindError(KeyError):
    def __init__(self, name: str):
        super().__init__(f"unknown server kind {name!r}; valid kinds: {', '.join(sorted(ADAPTERS))}")

    def __str__(self) -> str:
        return self.args[0]


class UnknownEndpointError(KeyError):
    def __init__(self, name: str):
        super().__init__(f"unknown endpoint {name!r}; valid endpoints: {', '.join(ENDPOINT_PATHS)}")

    def __str__(self) -> str:
        return self.args[0]


def endpoint_path(endpoint: str) -> str:
    try:
        return ENDPOINT_PATHS[endpoint]
    except KeyError:
        raise UnknownEndpointError(endpoint) from None


@dataclass(frozen=True)
class ServerAdapter:
    name: str
    pins_output: bool  # ignore_eos / min_tokens (or an equivalent) are honoured
    pins_input: bool  # the server truncates the prompt to the requested length
    per_chunk_usage: bool  # ask for usage on every chunk
    max_concurrency: int | None = None  # the server serves this many at once at most (None: no limit)

    def body(
        self,
        endpoint: str,
        model: str,
        prompt: str,
        input_len: int | None,
        output_len: int,
        messages: list[dict[str, str]] | None = None,
    ) -> dict[str, Any]:
        """One request's body; ``messages``: a whole conversation (a multi-turn session's turn) instead of
        ``prompt`` as its one user message (chat endpoint)."""
        body: dict[str, Any] = {
            "model": model,
            "stream": True,
            "max_tokens": output_len,
            "stream_options": {"include_usage": True},
        }
        if endpoint_path(endpoint).endswith("chat/completions"):
            body["messages"] = messages if messages is not None else [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        if self.per_chunk_usage:
            body["stream_options"]["continuous_usage_stats"] = True
        return self.extend(body, input_len, output_len)

    def extend(self, body: dict[str, Any], input_len: int | None, output_len: int) -> dict[str, Any]:
        return body


class VllmAdapter(ServerAdapter):
    def extend(self, body: dict[str, Any], input_len: int | None, output_len: int) -> dict[str, Any]:
        body["ignore_eos"] = True
        body["min_tokens"] = output_len
        if input_len:
            body["truncate_prompt_tokens"] = input_len
        return body


class TransformersAdapter(ServerAdapter):
    def extend(self, body: dict[str, Any], input_len: int | None, output_len: int) -> dict[str, Any]:
        body["generation_config"] = json.dumps(
            {"max_new_tokens": output_len, "min_new_tokens": output_len, "do_sample": False}
        )
        return body


ADAPTERS: dict[str, ServerAdapter] = {
    a.name: a
    for a in [
        VllmAdapter("vllm", pins_output=True, pins_input=True, per_chunk_usage=True),
        TransformersAdapter(
            "transformers", pins_output=True, pins_input=False, per_chunk_usage=False, max_concurrency=1
        ),
        VllmAdapter("synthetic", pins_output=True, pins_input=True, per_chunk_usage=True),
        ServerAdapter("openai", pins_output=False, pins_input=False, per_chunk_usage=False),
    ]
}


def get_adapter(name: str) -> ServerAdapter:
    try:
        return ADAPTERS[name]
    except KeyError:
        raise UnknownServerKindError(name) from None


class ServerResponseShapeError(ValueError):
    """A server answered ``GET /v1/models`` with something that is not OpenAI's ``{"data": [...]}``."""


class UnconfirmedExtensionError(ValueError):
    """``--server-kind auto`` found a server whose support of ``ignore_eos`` / ``min_tokens`` it cannot confirm:
    sending them anyway might be ignored, and dropping them quietly would unpin the output length."""


def model_entries(models_response: Any) -> list[dict[str, Any]]:
    """The ``data`` entries of a ``GET /v1/models`` answer; any other shape is a :class:`ServerResponseShapeError`."""
    if not isinstance(models_response, dict):
        raise ServerResponseShapeError(
            f"GET /v1/models returned a JSON {type(models_response).__name__}, not an object with a 'data' list"
        )
    data = models_response.get("data", [])
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        raise ServerResponseShapeError("GET /v1/models: 'data' is not a list of model objects")
    return data


def detect_server_kind(models_response: Any) -> str:
    """The adapter for a server, from its ``GET /v1/models`` answer."""
    from agents.loadgen.synthetic_server import OWNED_BY

    owners = {str(m.get("owned_by", "")).lower() for m in model_entries(models_response)}
    if OWNED_BY in owners:
        return "synthetic"
    if "vllm" in owners:
        return "vllm"
    return "openai"


def confirm_auto_kind(models_response: Any, output_len: int) -> str:
    """``--server-kind auto``: the detected kind, or :class:`UnconfirmedExtensionError` when the server is neither
    vLLM nor ours and the output length would need ``ignore_eos``/``min_tokens`` to be pinned."""
    kind = detect_server_kind(models_response)
    if kind == "openai" and output_len > 0:
        owners = sorted({str(m.get("owned_by", "")) for m in model_entries(models_response)}) or ["none listed"]
        raise UnconfirmedExtensionError(
            f"--server-kind auto: the server is neither vLLM nor neuronpipe's (owned_by: {', '.join(owners)}), so "
            "ignore_eos/min_tokens cannot be confirmed and the output length would not be pinned; pass "
            "--server-kind vllm if it honours vLLM's extensions, or --server-kind openai to send max_tokens only "
            "(achieved lengths are still checked)"
        )
    return kind
