"""The CPU server's wire format and the quality client's parsing, without a model or a socket."""

from __future__ import annotations

import httpx
import pytest

from agents.serving.cpu_engine import EngineStats
from agents.serving.openai_protocol import (
    ProtocolError,
    chat_chunk,
    completion_chunk,
    final_usage_chunk,
    parse_sampling,
    prometheus_text,
)
from agents.serving.quality import ask, load_prompts, mean_logprob
from agents.telemetry.prometheus import parse_prometheus_text


def test_sampling_accepts_vllm_extensions():
    sp = parse_sampling(
        {
            "max_tokens": 8,
            "min_tokens": 8,
            "ignore_eos": True,
            "temperature": 0,
            "seed": 0,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "logprobs": 2,
        },
        chat=False,
        prompt_len=10,
        max_model_len=64,
    )
    assert (sp.max_tokens, sp.min_tokens, sp.ignore_eos, sp.temperature, sp.seed) == (8, 8, True, 0.0, 0)
    assert sp.include_usage and sp.continuous_usage and sp.logprobs and sp.top_logprobs == 2
    chat = parse_sampling(
        {"max_completion_tokens": 4, "logprobs": True, "top_logprobs": 0}, chat=True, prompt_len=5, max_model_len=64
    )
    assert chat.max_tokens == 4 and chat.logprobs and chat.top_logprobs == 0


@pytest.mark.parametrize(
    "body,needle",
    [
        ({"max_tokens": 60}, "maximum context length is 64 tokens"),
        ({"max_tokens": 4, "min_tokens": 5}, "min_tokens"),
        ({"max_tokens": 0}, "max_tokens must be an integer >= 1"),
        ({"stream_options": {"include_usage": True}}, "only be defined when `stream=True`"),
        ({"temperature": -1}, "temperature"),
    ],
)
def test_sampling_refusals(body, needle):
    with pytest.raises(ProtocolError) as exc:
        parse_sampling(body, chat=False, prompt_len=10, max_model_len=64)
    assert needle in exc.value.message and exc.value.status == 400
    assert exc.value.body()["error"]["message"] == exc.value.message


def test_truncate_prompt_tokens_counts_against_the_context():
    sp = parse_sampling({"max_tokens": 30, "truncate_prompt_tokens": 30}, chat=False, prompt_len=100, max_model_len=64)
    assert sp.truncate_prompt_tokens == 30


def test_chunks_follow_vllm_shapes():
    c = completion_chunk(
        "id", 1, "m", "hi", None, None, {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    )
    assert c["choices"][0]["text"] == "hi" and c["usage"]["completion_tokens"] == 1
    first = chat_chunk("id", 1, "m", "a", None, None, None, first=True)
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": "a"} and "usage" not in first
    assert chat_chunk("id", 1, "m", "b", "stop", None, None, first=False)["choices"][0]["delta"] == {"content": "b"}
    final = final_usage_chunk("id", 1, "m", True, {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3})
    assert final["choices"] == [] and final["usage"]["total_tokens"] == 3


def test_prometheus_text_round_trips_through_the_scraper():
    stats = EngineStats(running=2, waiting=3, kv_tokens=64, kv_capacity_tokens=256, preemptions_total=0)
    samples = parse_prometheus_text(prometheus_text(stats, 'tiny "llama"'))
    assert samples["vllm:num_requests_running"] == 2 and samples["vllm:num_requests_waiting"] == 3
    assert samples["vllm:kv_cache_usage_perc"] == 0.25 and samples["vllm:num_preemptions_total"] == 0


def test_quality_prompts_are_sixteen_unique():
    prompts = load_prompts()
    assert len(prompts) == 16 and len({p.id for p in prompts}) == 16 and all(p.prompt for p in prompts)


def test_mean_logprob_and_missing_logprobs():
    mean, note = mean_logprob({"logprobs": {"content": [{"logprob": -1.0}, {"logprob": -3.0}]}})
    assert mean == -2.0 and note is None
    mean, note = mean_logprob({"logprobs": None})
    assert mean is None and "no logprobs" in note


def _client(handler):
    return httpx.Client(transport=httpx.MockTransport(handler))


def test_ask_keeps_the_servers_verbatim_refusal_and_retries_without_logprobs():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        import json

        body = json.loads(request.content)
        seen.append(body)
        if body.get("logprobs"):
            return httpx.Response(400, json={"error": {"message": "logprobs is not supported on this backend"}})
        return httpx.Response(
            200,
            json={
                "choices": [{"message": {"content": "hello"}, "finish_reason": "stop"}],
                "usage": {"completion_tokens": 2},
            },
        )

    with _client(handler) as client:
        a = ask(client, "http://x", "m", "hi", 8)
    assert a.text == "hello" and a.output_tokens == 2 and a.mean_logprob is None
    assert a.logprob_note == "HTTP 400: logprobs is not supported on this backend"
    assert seen[0]["temperature"] == 0.0 and seen[0]["seed"] == 0 and "logprobs" not in seen[1]


def test_ask_failure_is_an_error_not_an_exception():
    with _client(lambda r: httpx.Response(503, text="overloaded")) as client:
        a = ask(client, "http://x", "m", "hi", 8)
    assert a.text is None and a.error == "HTTP 503: overloaded"


def test_a_server_that_breaks_on_logprobs_is_asked_again_without_them():
    """The predecessor's NxDI answered HTTP 500 ("list index out of range") to a logprobs request: the prompt is
    asked again without logprobs, and the 500 is the logprob note, not the answer's error."""

    def handler(request: httpx.Request) -> httpx.Response:
        import json

        if json.loads(request.content).get("logprobs"):
            return httpx.Response(500, json={"error": {"message": "list index out of range"}})
        return httpx.Response(
            200,
            json={
                "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                "usage": {"completion_tokens": 1},
            },
        )

    with _client(handler) as client:
        a = ask(client, "http://x", "m", "hi", 8)
    assert a.text == "ok" and a.error is None and a.logprob_note == "HTTP 500: list index out of range"


def test_echo_is_refused_and_stop_strings_are_parsed():
    from agents.serving.openai_protocol import ECHO_REFUSAL, parse_stop, stop_index

    with pytest.raises(ProtocolError) as info:
        parse_sampling({"max_tokens": 1, "echo": True, "logprobs": 1}, chat=False, prompt_len=4, max_model_len=64)
    assert info.value.status == 400 and info.value.message == ECHO_REFUSAL
    sp = parse_sampling({"max_tokens": 4, "stop": ["\n", "", "Question:"]}, chat=False, prompt_len=4, max_model_len=64)
    assert sp.stop == ("\n", "Question:") and parse_stop("x") == ("x",) and parse_stop(None) == ()
    with pytest.raises(ProtocolError, match="stop must be a string or a list of strings"):
        parse_stop([1])
    assert stop_index("42\nQuestion: 7", ("Question:", "\n")) == 2 and stop_index("42", ("\n",)) is None
