"""The load generator against servers that misbehave or are unknown (issues 15 and 17).

A stdlib HTTP server in a thread plays "some other OpenAI-compatible server": it answers
``/v1/models`` in a chosen shape and streams a chosen body, and counts the completions it was asked
for, so a refusal can be shown to have measured nothing.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agents.loadgen.adapters import (
    ServerResponseShapeError,
    UnconfirmedExtensionError,
    confirm_auto_kind,
    detect_server_kind,
)
from agents.loadgen.records import ClockAnchor, RawRequest, request_row
from agents.loadgen.transport import Exchange
from control_plane.cli import main
from tests.functional.test_loadgen_synthetic import Server, server  # noqa: F401 - the fixture

GOOD_CHUNK = b'data: {"choices":[{"index":0,"text":" a","finish_reason":null}]}\n\n'


class FakeOpenAI:
    """``models``: the JSON body of GET /v1/models; ``stream``: the raw SSE body of every POST."""

    def __init__(self, models, stream: bytes = GOOD_CHUNK + b"data: [DONE]\n\n"):
        self.posts = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                body = json.dumps(models).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                outer.posts += 1
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.write(stream)
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def loadgen(url: str, *extra: str) -> int:
    return main(
        [
            "loadgen",
            "--base-url",
            url,
            "--concurrency",
            "1",
            "--input-len",
            "4",
            "--output-len",
            "3",
            "--num-prompts",
            "2",
            "--warmup",
            "0",
            "--idle-timeout",
            "5",
            *extra,
        ]
    )


def test_auto_refuses_a_server_that_is_neither_vllm_nor_ours(capsys):
    fake = FakeOpenAI({"object": "list", "data": [{"id": "m", "owned_by": "acme-llm"}]})
    try:
        rc = loadgen(fake.url)
        err = capsys.readouterr().err
        assert rc == 2 and fake.posts == 0  # nothing measured
        assert err.count("\n") == 1 and "Traceback" not in err
        assert "ignore_eos/min_tokens cannot be confirmed" in err and "acme-llm" in err
        assert "--server-kind vllm" in err and "--server-kind openai" in err
        # the user's explicit choice is honoured: max_tokens only, lengths still checked
        assert loadgen(fake.url, "--server-kind", "openai", "--model", "m") == 0 and fake.posts == 2
    finally:
        fake.stop()


def test_auto_kind_detection_rules():
    assert confirm_auto_kind({"data": [{"id": "x", "owned_by": "vllm"}]}, 8) == "vllm"
    assert confirm_auto_kind({"data": [{"id": "x", "owned_by": "neuronpipe-synthetic"}]}, 8) == "synthetic"
    with pytest.raises(UnconfirmedExtensionError, match="none listed"):
        confirm_auto_kind({"data": []}, 8)
    for bad in ([{"id": "x"}], {"data": "x"}, {"data": [1]}, "models"):
        with pytest.raises(ServerResponseShapeError):
            detect_server_kind(bad)


def test_models_list_shape_is_one_clear_error(capsys):
    fake = FakeOpenAI([{"id": "m", "owned_by": "vllm"}])  # a JSON list, not {"data": [...]}
    try:
        rc = loadgen(fake.url)
        err = capsys.readouterr().err
        assert rc == 2 and fake.posts == 0 and "Traceback" not in err
        assert "GET /v1/models returned a JSON list" in err
    finally:
        fake.stop()


def _row(events: list[bytes], done: bool):
    ex = Exchange(None)
    ex.t_sent, ex.t_done, ex.status = 1_000, 9_000, 200
    ex.events = [(2_000 + i, e) for i, e in enumerate(events)]
    ex.done_marker = done
    texts: dict[str, str] = {}
    row = request_row(
        RawRequest(0, "r0", False, 4, 1_000, ex),
        point_id="p",
        model="m",
        server_config=None,
        endpoint="/v1/completions",
        input_len=4,
        output_len=2,
        anchor=ClockAnchor.now(),
        tokenizer=None,
        texts_out=texts,
    )
    return row, texts


def test_response_shapes_fail_the_request_with_a_reason():
    cases = {
        "choices_str": [b'data: {"choices": "abc"}'],
        "choices_obj": [b'data: {"choices": {"text": "a"}}'],
        "choice_int": [b'data: {"choices": [7]}'],
        "delta_str": [b'data: {"choices": [{"delta": "x"}]}'],
        "usage_list": [b'data: {"choices": [{"text": "a"}], "usage": [1]}'],
        "tokens_text": [b'data: {"choices": [{"text": "a"}], "usage": {"completion_tokens": "many"}}'],
    }
    for name, events in cases.items():
        row, _ = _row(events, done=True)
        assert row["success"] is False and row["error_type"] == "MalformedEventError", (name, row["error"])
        assert row["error"].startswith("event 0:"), name


def test_a_stream_without_done_or_finish_reason_is_failed():
    row, _ = _row([GOOD_CHUNK.strip()], done=False)
    assert row["success"] is False and row["error_type"] == "TruncatedStreamError"
    assert "without [DONE] or a finish reason" in row["error"]
    # a finish reason alone (no [DONE]) is a complete answer; so is [DONE] alone
    fin = b'data: {"choices":[{"index":0,"text":" b","finish_reason":"length"}]}'
    row, texts = _row([GOOD_CHUNK.strip(), fin], done=False)
    assert row["success"] is True and texts == {"r0": " a b"}
    assert _row([GOOD_CHUNK.strip()], done=True)[0]["success"] is True


def test_a_truncated_stream_on_the_wire_fails_the_point_and_the_command(tmp_path, capsys):
    from analytics.store import open_store

    fake = FakeOpenAI({"data": [{"id": "m", "owned_by": "vllm"}]}, stream=GOOD_CHUNK * 3)  # no [DONE], no finish
    try:
        rc = loadgen(fake.url, "--results", str(tmp_path / "res"), "--run-id", "lgfail")
        out, err = capsys.readouterr()
        assert rc == 1 and fake.posts == 2
        assert "no request succeeded" in err and "TruncatedStreamError" in out
        assert "(failed)" in out and "valid                  False" in out
    finally:
        fake.stop()
    assert [m.status for m in open_store(tmp_path / "res").markers("lgfail", "loadgen")] == ["failed"]


@pytest.mark.parametrize("server", [("--ttft-ms", "5", "--itl-ms", "3", "--burst", "4")], indirect=True)
def test_a_coalesced_stream_is_flagged(server, capsys):
    """The synthetic server flushes 4 chunks per write: 4 decode tokens per read > the bound 2."""
    rc = main(
        [
            "loadgen",
            "--base-url",
            server.url,
            "--concurrency",
            "2",
            "--input-len",
            "4",
            "--output-len",
            "9",
            "--num-prompts",
            "4",
            "--warmup",
            "0",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "coalesced              True" in out and "delivery rate, not decode speed" in out
    assert "decode_tokens_per_read 4.000" in out and "max_decode_burst_tokens 4" in out


@pytest.mark.parametrize("server", [("--ttft-ms", "5", "--itl-ms", "20")], indirect=True)
def test_a_token_by_token_stream_is_not_flagged(server):
    """20 ms between tokens: a read would have to stall that long for two tokens to share it (at 3 ms a loaded
    2-core CI box did that often enough to lift tokens per read to 1.52)."""
    from agents.loadgen.point import SweepPoint, run_point

    r = run_point(
        SweepPoint(
            base_url=server.url,
            model="synthetic",
            input_len=4,
            output_len=9,
            num_prompts=4,
            concurrency=2,
            server_kind="synthetic",
            warmup_requests=0,
        )
    )
    m = r.metrics
    assert m["coalesced"] is False and m["tpot_itl_meaning"] == "decode speed" and m["burst_note"] is None
    # token by token: about one token per read (a busy 2-core box may let two tokens share one read now and then,
    # which is what the bound tolerates; the burst server's test shows a whole burst per read)
    assert m["decode_tokens_per_read"] < 1.5 and m["max_decode_burst_tokens"] <= 2
    assert m["zero_itl_gaps"] <= 4 and m["network_reads"] >= 4 * 9 - 4
    assert m["max_concurrent_requests"] >= 1 and m["max_output_tokens_per_s"] > 0
