"""The served endpoint as lm-eval sees it: lm-eval's ``local-completions`` model with every request sent, timed and
recorded here (registered as ``neuronpipe-completions``), and the probe that asks a server for prompt logprobs.

Each request goes through one httpx connection; its wall time (``time.perf_counter`` around the POST and the read
of the answer) is recorded under the key lm-eval asked it with (the generation prompt, or the (context,
continuation) pair scored), so the harness attributes it to its document. A connection error or a 5xx is retried
``max_retries`` times; a 4xx is the server's answer and is not; a request that still fails, or is past the time
budget, returns a placeholder answer lm-eval scores as wrong, and its record carries the verbatim error.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

COMPLETIONS = "/v1/completions"
MODEL_NAME = "neuronpipe-completions"
FAILED = "_neuronpipe_failed"  # marks the placeholder answer of a failed request


@dataclass(frozen=True)
class Settings:
    sample_limit: int | None
    max_gen_toks: int | None
    num_fewshot: int | None
    seed: int
    request_timeout_s: float
    max_retries: int
    deadline: float  # time.monotonic() past which no request is sent


@dataclass
class Probe:
    ok: bool
    answer: str  # the server's verbatim answer (its error message, or what it returned instead)


@dataclass
class RequestRecord:
    latency_s: float | None
    error: str | None


@dataclass
class Recorder:
    """Per request key (the generation prompt, or the (context, continuation) pair scored), what happened, in order."""

    calls: dict[Any, list[RequestRecord]] = field(default_factory=dict)
    sent: int = 0

    def add(self, key: Any, record: RequestRecord) -> None:
        self.calls.setdefault(key, []).append(record)

    def take(self, key: Any) -> RequestRecord | None:
        queue = self.calls.get(key)
        return queue.pop(0) if queue else None


def _error_text(resp: httpx.Response) -> str:
    """``HTTP 400: <the server's own message>`` (the error's message field when JSON, else the body)."""
    from agents.serving.quality import error_text

    return f"HTTP {resp.status_code}: {error_text(resp)}"


def probe_prompt_logprobs(
    base_url: str, model: str, timeout_s: float = 60.0, client: httpx.Client | None = None
) -> Probe:
    """Ask what an lm-eval log-likelihood request asks (``echo`` + ``logprobs`` on /v1/completions, one token): ok
    when the answer scores the prompt's tokens; else the server's verbatim answer."""
    body = {
        "model": model,
        "prompt": "The capital of France is Paris",
        "max_tokens": 1,
        "temperature": 0,
        "logprobs": 1,
        "echo": True,
    }
    own = client is None
    client = client or httpx.Client(timeout=timeout_s)
    try:
        resp = client.post(base_url + COMPLETIONS, json=body)
        if resp.status_code != 200:
            return Probe(False, _error_text(resp))
        choice = (resp.json().get("choices") or [{}])[0]
        lp = choice.get("logprobs") or {}
        values = lp.get("token_logprobs") if isinstance(lp, dict) else None
        if not values or len(values) < 3:  # echo: every prompt token, then the generated one
            return Probe(False, f"HTTP 200 without prompt logprobs (choices[0].logprobs: {str(lp)[:200]})")
        return Probe(True, f"HTTP 200: {len(values)} token logprobs for the echoed prompt")
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        return Probe(False, f"{type(exc).__name__}: {exc}")
    finally:
        if own:
            client.close()


@functools.cache
def model_class() -> type:
    """lm-eval's local-completions model whose requests are sent, timed and recorded here (registered once)."""
    from lm_eval.api.registry import register_model
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    class ServedCompletions(LocalCompletionsAPI):
        """local-completions, with each request timed and attributed, and a failed one a failed sample."""

        def __init__(
            self,
            *,
            recorder: Recorder,
            settings: Settings,
            progress: Callable[[int], None] | None = None,
            **kwargs: Any,
        ):
            super().__init__(max_retries=1, **kwargs)  # the retries are this class's (a 4xx is never retried)
            self.recorder, self.settings, self.progress = recorder, settings, progress
            self._keys: list[Any] = []
            self._client = httpx.Client(timeout=settings.request_timeout_s)

        def batch_loglikelihood_requests(self, chunks: Any) -> Any:
            inputs, ctxlens, keys = super().batch_loglikelihood_requests(chunks)
            self._keys = list(keys)
            return inputs, ctxlens, keys

        def model_call(
            self, messages: Any, *, generate: bool = True, gen_kwargs: dict | None = None, **kwargs: Any
        ) -> dict | None:
            key = ("generate", messages[0]) if generate else ("score", tuple(self._keys[0]))
            payload = self._create_payload(
                self.create_message(messages),
                generate=generate,
                gen_kwargs=copy.deepcopy(gen_kwargs),
                seed=self._seed,
                eos=self.eos_string,
                **kwargs,
            )
            out, record = self._send(payload, None if generate else len(messages[0]))
            self.recorder.add(key, record)
            self.recorder.sent += 1
            if self.progress is not None:
                self.progress(self.recorder.sent)
            return out

        def _send(self, payload: dict, prompt_tokens: int | None) -> tuple[dict, RequestRecord]:
            error = None
            for attempt in range(self.settings.max_retries + 1):
                if time.monotonic() >= self.settings.deadline:
                    return _placeholder(), RequestRecord(None, "time budget spent: request not sent")
                t0 = time.perf_counter()
                try:
                    resp = self._client.post(self.base_url, json=payload)
                    latency = time.perf_counter() - t0
                    if resp.status_code == 200:
                        data = resp.json()
                        problem = _answer_problem(data, prompt_tokens)
                        if problem is None:
                            return data, RequestRecord(latency, None)
                        return _placeholder(), RequestRecord(latency, problem)
                    error = _error_text(resp)
                    if resp.status_code < 500:
                        return _placeholder(), RequestRecord(latency, error)
                except httpx.HTTPError as exc:
                    error = f"{type(exc).__name__}: {exc}"
                except ValueError as exc:
                    return _placeholder(), RequestRecord(None, f"answer is not JSON ({exc})")
                if attempt < self.settings.max_retries:
                    time.sleep(min(2.0**attempt, 10.0))
            return _placeholder(), RequestRecord(None, error)

        @staticmethod
        def parse_logprobs(outputs: Any, tokens: Any = None, ctxlens: Any = None, **kwargs: Any) -> list:
            outs = outputs if isinstance(outputs, list) else [outputs]
            res: list = []
            for out, ctxlen in zip(outs, ctxlens or [None] * len(outs)):
                if out.get(FAILED):
                    res.append((float("-inf"), False))
                else:
                    res += LocalCompletionsAPI.parse_logprobs(outputs=[out], tokens=tokens, ctxlens=[ctxlen])
            return res

        def close(self) -> None:
            self._client.close()

    return register_model(MODEL_NAME)(ServedCompletions)


def _placeholder() -> dict:
    return {FAILED: True, "choices": [{"index": 0, "text": "", "logprobs": None}]}


def _answer_problem(data: Any, prompt_tokens: int | None) -> str | None:
    """Why a 200 answer cannot be used (None: it can): no choices; a scoring answer without the prompt's logprobs."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not choices:
        return f"HTTP 200 without choices: {str(data)[:200]}"
    if prompt_tokens is None:
        return None
    lp = choices[0].get("logprobs") or {}
    values = lp.get("token_logprobs") if isinstance(lp, dict) else None
    if not values or len(values) < prompt_tokens or not lp.get("top_logprobs"):
        return f"HTTP 200 without prompt logprobs (choices[0].logprobs: {str(lp)[:200]})"
    return None
