"""The live TTFT streamer against a loopback SSE server."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from control_plane.commands.demo import StreamProtocolError, parse_sse, stream_answer

WORDS = ["Compile", " time", " is", " paid", " once", "."]


class Sse(BaseHTTPRequestHandler):
    mode = "good"

    def log_message(self, *args):
        return

    def do_GET(self):
        body = json.dumps({"data": [{"id": "tiny-llama"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if self.server.mode == "garbage":
            self.wfile.write(b"<html>oops</html>\n")
            return
        for i, w in enumerate(WORDS):
            time.sleep(0.01)
            event = {"choices": [{"delta": {"content": w}}], "usage": {"completion_tokens": i + 1}}
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
        usage = {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": len(WORDS)}}
        self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Sse)
    srv.mode = "good"
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()


def test_stream_counts_tokens_and_ttft(server):
    url = f"http://127.0.0.1:{server.server_port}"
    seen = []
    with httpx.Client() as client:
        stats = stream_answer(client, url, "tiny-llama", "hi", 16, on_update=lambda s, p: seen.append(p))
    assert "".join(stats.text) == "".join(WORDS) and seen == WORDS
    assert stats.tokens == len(WORDS) and stats.chunks == len(WORDS)
    assert 0 < stats.ttft_s <= stats.t_last - stats.t_sent
    assert stats.tokens_per_s(stats.t_last) > 0


def test_non_sse_body_is_a_clear_error(server):
    server.mode = "garbage"
    with httpx.Client() as client, pytest.raises(StreamProtocolError, match="not an SSE data line"):
        stream_answer(client, f"http://127.0.0.1:{server.server_port}", "m", "hi", 4)


def test_parse_sse_rejects_malformed_json():
    with pytest.raises(StreamProtocolError, match="malformed event"):
        list(parse_sse(["data: {nope"]))


def test_demo_command_prints_the_answer_and_says_when_no_report(server, tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "control_plane.cli",
            "demo",
            "--base-url",
            f"http://127.0.0.1:{server.server_port}",
            "--report",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "Compile time is paid once." in out.stdout and "TTFT" in out.stdout
    assert "no report" in out.stdout


def test_headline_tables_come_from_a_real_report(tmp_path):
    from analytics.report import write_report
    from analytics.store import LocalStore
    from analytics.views import connect
    from control_plane.commands.demo import headline_tables
    from tests.support.synthetic import SyntheticRun, write_synthetic_run

    store = LocalStore(tmp_path / "results")
    write_synthetic_run(store, SyntheticRun(run_id="run-a", seed=1))
    write_report(connect(store), None, tmp_path / "report")
    tables = {title: (cols, rows) for title, cols, rows in headline_tables(tmp_path / "report")}
    assert {"Compile / boot", "Training", "Serving (headline points)"} <= set(tables)
    cols, rows = tables["Serving (headline points)"]
    assert rows and all(r[cols.index("median_ttft_ms")] is not None for r in rows)
