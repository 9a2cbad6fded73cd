"""Fixed prompts asked greedily, twice: determinism, the texts, mean logprob where the server gives it.

Each ask is a non-streaming chat completion at temperature 0 with seed 0 and
``logprobs: true``. A server that refuses logprobs (an HTTP 4xx naming them, or a 5xx) is asked
again without, and its verbatim refusal is kept as the note beside a NULL
``mean_logprob``; a server that answers but returns no logprobs gets a note saying so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

import httpx

CHAT_ENDPOINT = "/v1/chat/completions"


@dataclass(frozen=True)
class QualityPrompt:
    id: str
    category: str
    prompt: str


@dataclass
class Answer:
    text: str | None
    output_tokens: int | None
    mean_logprob: float | None
    logprob_note: str | None
    finish_reason: str | None
    error: str | None = None


def load_prompts() -> list[QualityPrompt]:
    text = (resources.files("agents.serving") / "prompts" / "quality_prompts.json").read_text()
    return [QualityPrompt(p["id"], p["category"], p["prompt"]) for p in json.loads(text)["prompts"]]


def error_text(resp: httpx.Response) -> str:
    """The server's own words: the error message field when JSON, else the body verbatim."""
    try:
        body = resp.json()
    except ValueError:
        return resp.text.strip()
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        for key in ("message", "detail", "error"):
            if body.get(key):
                return str(body[key]) if not isinstance(body[key], str) else body[key]
    return resp.text.strip()


def mean_logprob(choice: dict[str, Any]) -> tuple[float | None, str | None]:
    lp = choice.get("logprobs")
    if not lp:
        return None, "server returned no logprobs (choices[0].logprobs is null)"
    content = lp.get("content") if isinstance(lp, dict) else None
    values = [c.get("logprob") for c in content or [] if isinstance(c, dict)]
    values = [float(v) for v in values if v is not None]
    if not values:
        return None, "server returned logprobs without per-token values"
    return sum(values) / len(values), None


def ask(
    client: httpx.Client,
    base_url: str,
    model: str,
    prompt: str,
    max_tokens: int,
    temperature: float = 0.0,
    seed: int = 0,
) -> Answer:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": temperature,
        "seed": seed,
        "stream": False,
        "logprobs": True,
    }
    refusal = None
    try:
        resp = client.post(base_url + CHAT_ENDPOINT, json=body)
        # a refusal naming logprobs (4xx), or a server that breaks on them (the predecessor's NxDI answered 500
        # "list index out of range" to logprobs): asked again without them; a second failure is the answer's error
        if 400 <= resp.status_code < 600:
            refusal = f"HTTP {resp.status_code}: {error_text(resp)}"
            body.pop("logprobs")
            resp = client.post(base_url + CHAT_ENDPOINT, json=body)
        if resp.status_code != 200:
            return Answer(None, None, None, refusal, None, f"HTTP {resp.status_code}: {error_text(resp)}")
        data = resp.json()
        choice = data["choices"][0]
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        return Answer(None, None, None, refusal, None, f"{type(exc).__name__}: {exc}")
    text = (choice.get("message") or {}).get("content")
    tokens = (data.get("usage") or {}).get("completion_tokens")
    if refusal is not None:
        mean, note = None, refusal
    else:
        mean, note = mean_logprob(choice)
    return Answer(text, tokens, mean, note, choice.get("finish_reason"))


def quality_rows(
    base_url: str,
    served_model: str,
    variant: str,
    server_config: str,
    backend: str,
    prompts: list[QualityPrompt],
    max_tokens: int,
    seed: int = 0,
    timeout_s: float = 600.0,
    progress: Any = None,
) -> list[dict[str, Any]]:
    rows = []
    with httpx.Client(timeout=timeout_s) as client:
        for i, p in enumerate(prompts):
            a1 = ask(client, base_url, served_model, p.prompt, max_tokens, 0.0, seed)
            a2 = ask(client, base_url, served_model, p.prompt, max_tokens, 0.0, seed)
            failed = a1.error or a2.error
            rows.append(
                {
                    "model": served_model,
                    "variant": variant,
                    "server_config": server_config,
                    "backend": backend,
                    "endpoint": CHAT_ENDPOINT,
                    "prompt_id": p.id,
                    "category": p.category,
                    "prompt": p.prompt,
                    "temperature": 0.0,
                    "seed": seed,
                    "max_tokens": max_tokens,
                    "text_1": a1.text,
                    "text_2": a2.text,
                    "deterministic": None if failed else a1.text == a2.text,
                    "mean_logprob": a1.mean_logprob,
                    "mean_logprob_2": a2.mean_logprob,
                    "logprob_note": a1.logprob_note or a2.logprob_note,
                    "output_tokens": a1.output_tokens,
                    "output_tokens_2": a2.output_tokens,
                    "finish_reason": a1.finish_reason,
                    "error": a1.error or a2.error,
                }
            )
            if progress is not None:
                progress(i + 1, len(prompts))
    return rows
