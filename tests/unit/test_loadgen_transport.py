"""The measured path without sockets: HTTP/SSE parsing on a fake transport, then rows from what it recorded."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone

import pytest

from agents.loadgen.records import ClockAnchor, RawRequest, request_row
from agents.loadgen.transport import (
    HttpStatusError,
    NonSseBodyError,
    StallTimeoutError,
    StreamClosedError,
    StreamConnection,
    Target,
)

SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


class FakeTransport:
    def __init__(self):
        self.written = b""
        self.closed = False

    def write(self, data):
        self.written += data

    def is_closing(self):
        return self.closed

    def close(self):
        self.closed = True


def chunked(*payloads: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in payloads) + b"0\r\n\r\n"


def event(text, cum=None, usage_only=None, sep=b"\n\n"):
    if usage_only is not None:
        obj = {"choices": [], "usage": usage_only}
    else:
        obj = {"choices": [{"index": 0, "text": text}]}
        if cum is not None:
            obj["usage"] = {"prompt_tokens": 4, "completion_tokens": cum}
    return b"data: " + json.dumps(obj).encode() + sep


@pytest.fixture
def loop():
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


def feed(loop, parts, lost=None, idle=30.0):
    conn = StreamConnection(loop)
    tr = FakeTransport()
    conn.connection_made(tr)
    ex = conn.start(b"POST / HTTP/1.1\r\n\r\n", idle, 60.0)
    for p in parts:
        conn.data_received(p)
    if lost is not None:
        conn.connection_lost(lost)
    return conn, ex, tr


def split_every(data: bytes, n: int) -> list[bytes]:
    return [data[i : i + n] for i in range(0, len(data), n)]


@pytest.mark.parametrize("piece", [1, 3, 7, 10_000])
@pytest.mark.parametrize("sep", [b"\n\n", b"\r\n\r\n"])
def test_chunked_sse_parsed_across_any_split(loop, piece, sep):
    body = chunked(
        event(" a", 1, sep=sep) + event(" b", 3, sep=sep),
        b": ping" + sep,
        event(None, usage_only={"prompt_tokens": 4, "completion_tokens": 3}, sep=sep),
        b"data: [DONE]" + sep,
    )
    conn, ex, _ = feed(loop, split_every(SSE_HEAD + body, piece))
    assert ex.future.done() and ex.error is None
    assert len(ex.events) == 3 and ex.done_marker
    assert conn.reusable and ex.t_done >= ex.t_sent


def test_rows_from_multi_token_usage_chunks(loop):
    _, ex, _ = feed(
        loop,
        [
            SSE_HEAD,
            chunked(
                event(" a", 1),
                event(" b c", 3),
                event(None, usage_only={"prompt_tokens": 4, "completion_tokens": 3}),
                b"data: [DONE]\n\n",
            ),
        ],
    )
    ex.events = [(ex.t_sent + (i + 1) * 10_000_000, e) for i, (_, e) in enumerate(ex.events)]
    row = request_row(
        RawRequest(0, "p-0", False, 4, ex.t_sent - 1000, ex),
        point_id="p",
        model="m",
        server_config=None,
        endpoint="/v1/completions",
        input_len=4,
        output_len=3,
        anchor=ClockAnchor(ex.t_sent, datetime(2026, 1, 1, tzinfo=timezone.utc)),
        tokenizer=None,
    )
    assert row["success"] and row["chunk_tokens"] == [1, 2] and row["chunk_tokens_source"] == "usage"
    assert row["chunk_times_s"] == pytest.approx([0.01, 0.02])  # the usage-only event is not a chunk
    assert row["ttft_s"] == pytest.approx(0.01) and row["e2el_s"] == pytest.approx(0.02)
    assert (row["output_tokens"], row["tokens_source"], row["prompt_tokens"]) == (3, "usage", 4)
    assert row["client_queue_s"] == pytest.approx(1e-6)
    assert row["sent_at"] == datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_rows_without_usage_retokenize(loop):
    class Words:
        name = "words"

        def encode(self, text, add_special_tokens):
            return text.split()

    _, ex, _ = feed(loop, [SSE_HEAD, chunked(event(" a b"), event(" c"), b"data: [DONE]\n\n")])
    row = request_row(
        RawRequest(0, "p-0", False, 4, ex.t_sent, ex),
        point_id="p",
        model="m",
        server_config=None,
        endpoint="/v1/completions",
        input_len=4,
        output_len=3,
        anchor=ClockAnchor.now(),
        tokenizer=Words(),
    )
    assert row["chunk_tokens"] == [1, 1] and row["chunk_tokens_source"] == "assumed_one"
    assert (row["output_tokens"], row["tokens_source"]) == (3, "retokenized")
    assert (row["prompt_tokens"], row["prompt_tokens_source"]) == (4, "built")


@pytest.mark.parametrize(
    "parts, lost, error, needle",
    [
        (
            [b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 9\r\n\r\n", b"overload!"],
            None,
            HttpStatusError,
            "HTTP 500: overload!",
        ),
        (
            [b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 6\r\n\r\n<html>"],
            None,
            NonSseBodyError,
            "text/html",
        ),
        (
            [SSE_HEAD, b"a\r\n" + event(" a")[:10] + b"\r\n"],
            ConnectionResetError("reset"),
            StreamClosedError,
            "after 0 events",
        ),
    ],
)
def test_bad_responses_fail_the_request_not_the_run(loop, parts, lost, error, needle):
    conn, ex, tr = feed(loop, parts, lost)
    assert ex.future.done() and isinstance(ex.error, error) and needle in str(ex.error)
    assert not conn.reusable
    row = request_row(
        RawRequest(0, "p-0", False, 4, ex.t_sent, ex),
        point_id="p",
        model="m",
        server_config=None,
        endpoint="/v1/completions",
        input_len=4,
        output_len=3,
        anchor=ClockAnchor.now(),
        tokenizer=None,
    )
    assert row["success"] is False and row["error_type"] == error.__name__ and needle in row["error"]


@pytest.mark.parametrize(
    "payload, error_type",
    [
        (b"data: {not json\n\n", "MalformedEventError"),
        (b'data: {"error": {"message": "engine dead"}}\n\n', "ServerErrorEventError"),
        (b"data: [DONE]\n\n", "EmptyStreamError"),
    ],
)
def test_bad_events_become_failed_rows(loop, payload, error_type):
    _, ex, _ = feed(loop, [SSE_HEAD, chunked(payload)])
    assert ex.error is None
    row = request_row(
        RawRequest(0, "p-0", False, 4, ex.t_sent, ex),
        point_id="p",
        model="m",
        server_config=None,
        endpoint="/v1/completions",
        input_len=4,
        output_len=3,
        anchor=ClockAnchor.now(),
        tokenizer=None,
    )
    assert row["success"] is False and row["error_type"] == error_type


def test_stall_times_out(loop):
    conn = StreamConnection(loop)
    conn.connection_made(FakeTransport())

    async def go():
        ex = conn.start(b"x", 0.05, 10.0)
        conn.data_received(SSE_HEAD)
        await asyncio.wait_for(ex.future, 5)
        return ex

    ex = loop.run_until_complete(go())
    assert isinstance(ex.error, StallTimeoutError)


def test_target_from_url():
    t = Target.from_url("http://127.0.0.1:8000/v1")
    assert (t.host, t.port, t.base_path, t.host_header) == ("127.0.0.1", 8000, "", "127.0.0.1:8000")
    assert Target.from_url("https://h/prefix").url("/v1/models") == "https://h/prefix/v1/models"
    with pytest.raises(ValueError, match="unsupported scheme"):
        Target.from_url("ftp://h")
