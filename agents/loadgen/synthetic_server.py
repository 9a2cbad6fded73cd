"""A deterministic OpenAI-compatible streaming server with a known truth, for testing the client.

``POST /v1/completions`` and ``/v1/chat/completions`` stream ``max_tokens`` tokens: the
first chunk ``ttft_ms`` after admission, then one chunk every ``itl_ms`` (± a
deterministic jitter), each carrying ``tokens_per_chunk`` tokens. Its "tokenizer"
is whitespace: a prompt of N words is N prompt tokens, each output token is one
word. With ``max_batch`` B at most B requests decode at once; later ones queue
(FIFO) before their TTFT starts, so queueing appears past B streams. With ``burst``
N > 1 the chunks after the first are flushed N at a time, in one write at the time of
the group's last chunk: a coalesced stream, as a starved engine delivers it.

Faults (chosen per request id from a seeded hash, so a run is reproducible):
``http_error`` (HTTP 500), ``malformed`` (an invalid JSON event half-way),
``close`` (the connection closed half-way), ``stall`` (no byte after half the
chunks), ``non_sse`` (a 200 HTML body).

Ground truth: for each request, keyed by its ``X-Request-Id``, the server keeps
when the request's first byte arrived and when it wrote each chunk
(``time.perf_counter_ns()``, the client's clock on one machine): ``GET
/synthetic/log`` returns them, ``POST /synthetic/reset`` clears them. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import zlib
from collections import deque
from dataclasses import dataclass, field
from time import perf_counter_ns, time
from typing import Any

FAULT_KINDS = ("http_error", "malformed", "close", "stall", "non_sse")
OWNED_BY = "neuronpipe-synthetic"


class SyntheticServerConfigError(ValueError):
    """A bad synthetic-server option."""


@dataclass(frozen=True)
class SyntheticConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    model: str = "synthetic"
    ttft_ms: float = 50.0
    itl_ms: float = 10.0
    tokens_per_chunk: int = 1
    jitter_ms: float = 0.0
    error_rate: float = 0.0
    faults: dict[str, float] = field(default_factory=dict)
    max_batch: int = 0  # 0: unlimited
    burst: int = 1  # chunks after the first flushed this many per write (coalesced delivery)
    eos_at: int = 0  # 0: never; else stop after this many tokens unless ignore_eos / min_tokens say otherwise
    seed: int = 0
    keep_log: bool = True

    def __post_init__(self) -> None:
        unknown = sorted(set(self.faults) - set(FAULT_KINDS))
        if unknown:
            raise SyntheticServerConfigError(f"unknown fault(s) {unknown}; valid faults: {', '.join(FAULT_KINDS)}")
        if self.host not in ("127.0.0.1", "localhost", "::1"):
            raise SyntheticServerConfigError(f"the synthetic server binds loopback only, not {self.host!r}")
        if self.tokens_per_chunk < 1:
            raise SyntheticServerConfigError("tokens_per_chunk must be >= 1")
        if self.burst < 1:
            raise SyntheticServerConfigError("burst must be >= 1")

    def fault_for(self, request_id: str) -> str | None:
        """The fault this request id gets (deterministic in seed and id)."""
        if not self.error_rate and not self.faults:
            return None
        u = zlib.crc32(f"{self.seed}:{request_id}".encode()) / 2**32
        edge = self.error_rate
        if u < edge:
            return "http_error"
        for kind in FAULT_KINDS:
            edge += self.faults.get(kind, 0.0)
            if u < edge:
                return kind
        return None

    def chunk_offsets_s(self, request_id: str, n_chunks: int) -> list[float]:
        """Emission times of the chunks after admission (absolute schedule: no drift)."""
        rng = random.Random(zlib.crc32(f"jitter:{self.seed}:{request_id}".encode())) if self.jitter_ms else None
        out, t = [], self.ttft_ms / 1000.0
        for j in range(n_chunks):
            if j:
                t += self.itl_ms / 1000.0
            jit = rng.uniform(-self.jitter_ms, self.jitter_ms) / 1000.0 if rng else 0.0
            out.append(max(0.0, t + jit))
        return out


def count_prompt_tokens(body: dict[str, Any]) -> int:
    prompt = body.get("prompt")
    if body.get("messages") is not None:
        return sum(len(str(m.get("content") or "").split()) for m in body["messages"])
    if isinstance(prompt, list):
        return len(prompt) if not prompt or isinstance(prompt[0], int) else len(" ".join(map(str, prompt)).split())
    return len(str(prompt or "").split())


def planned_output_tokens(config: SyntheticConfig, body: dict[str, Any]) -> int:
    n = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
    if config.eos_at and not body.get("ignore_eos"):
        n = min(n, max(config.eos_at, int(body.get("min_tokens") or 0)))
    return max(n, 0)


class ServerState:
    def __init__(self, config: SyntheticConfig):
        self.config = config
        self.records: list[dict[str, Any]] = []
        self.active = 0
        self.queue: deque = deque()
        self.counter = 0

    def admit(self, start) -> None:
        if self.config.max_batch and self.active >= self.config.max_batch:
            self.queue.append(start)
        else:
            self.active += 1
            start()

    def release(self) -> None:
        self.active -= 1
        while self.queue and (not self.config.max_batch or self.active < self.config.max_batch):
            self.active += 1
            self.queue.popleft()()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class SyntheticProtocol(asyncio.Protocol):
    def __init__(self, state: ServerState):
        self.state = state
        self.config = state.config
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.arrival_ns = 0
        self.busy = False
        self.holds_slot = False  # admitted to a batch slot (a request still queued holds none)
        self.timer: asyncio.TimerHandle | None = None
        self.stream: _Stream | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.busy = False
        if self.holds_slot:  # a queued request that lost its connection gives back no slot it never had
            self.holds_slot = False
            self.state.release()

    def data_received(self, data: bytes) -> None:
        if not self.buf and not self.busy:
            self.arrival_ns = perf_counter_ns()
        self.buf += data
        self._try_request()

    def _try_request(self) -> None:
        if self.busy:
            return
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        length = int(headers.get("content-length", "0"))
        if len(self.buf) < end + 4 + length:
            return
        body = bytes(self.buf[end + 4 : end + 4 + length])
        del self.buf[: end + 4 + length]
        method, path = (lines[0].split(" ") + ["", ""])[:2]
        self.busy = True
        self._route(method, path.split("?")[0], headers, body)

    def _respond(self, status: str, ctype: str, payload: bytes) -> None:
        self.transport.write(
            b"HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s"
            % (status.encode(), ctype.encode(), len(payload), payload)
        )
        self._done_response()

    def _done_response(self) -> None:
        self.busy = False
        if self.buf:
            self.arrival_ns = perf_counter_ns()
            self._try_request()

    def _route(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        if method == "GET" and path in ("/health", "/ping"):
            return self._respond("200 OK", "application/json", b"{}")
        if method == "GET" and path == "/v1/models":
            data = {
                "object": "list",
                "data": [{"id": self.config.model, "object": "model", "owned_by": OWNED_BY, "max_model_len": 1 << 20}],
            }
            return self._respond("200 OK", "application/json", json.dumps(data).encode())
        if method == "GET" and path == "/synthetic/log":
            return self._respond("200 OK", "application/json", json.dumps({"records": self.state.records}).encode())
        if method == "POST" and path == "/synthetic/reset":
            self.state.records = []
            return self._respond("200 OK", "application/json", b"{}")
        if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            try:
                req = json.loads(body or b"{}")
            except ValueError as exc:
                return self._respond(
                    "400 Bad Request",
                    "application/json",
                    json.dumps({"error": {"message": f"invalid JSON: {exc}"}}).encode(),
                )
            return self._generate(path, headers, req)
        return self._respond("404 Not Found", "application/json", b'{"error": {"message": "not found"}}')

    def _generate(self, path: str, headers: dict[str, str], req: dict[str, Any]) -> None:
        state, cfg = self.state, self.config
        state.counter += 1
        rid = headers.get("x-request-id") or f"synthetic-{state.counter}"
        fault = cfg.fault_for(rid)
        n_tokens = planned_output_tokens(cfg, req)
        record = {
            "request_id": rid,
            "arrival_ns": self.arrival_ns,
            "admit_ns": None,
            "fault": fault,
            "prompt_tokens": count_prompt_tokens(req),
            "output_tokens": n_tokens,
            "chunk_write_ns": [],
            "chunk_tokens": [],
        }
        if cfg.keep_log:
            state.records.append(record)
        if fault == "http_error":
            return self._respond(
                "500 Internal Server Error",
                "application/json",
                b'{"error": {"message": "synthetic fault: http_error", "code": 500}}',
            )
        if fault == "non_sse":
            return self._respond("200 OK", "text/html", b"<html><body>synthetic fault: non_sse</body></html>")
        if not req.get("stream"):
            return self._respond(
                "400 Bad Request",
                "application/json",
                b'{"error": {"message": "the synthetic server streams only (stream: true)"}}',
            )
        record["queued"] = bool(cfg.max_batch and state.active >= cfg.max_batch)
        state.admit(lambda: self._start_stream(path, rid, req, record, n_tokens, fault))

    def _start_stream(
        self, path: str, rid: str, req: dict[str, Any], record: dict[str, Any], n_tokens: int, fault: str | None
    ) -> None:
        if self.transport is None or self.transport.is_closing():
            self.state.release()
            return
        cfg = self.config
        self.holds_slot = True
        now_ns = perf_counter_ns()
        record["admit_ns"] = now_ns
        k = cfg.tokens_per_chunk
        sizes = [min(k, n_tokens - i) for i in range(0, n_tokens, k)]
        # The clock starts when the request reached the server (or, when it queued for a batch slot, at its
        # admission), so the server's own parsing is inside the declared TTFT, not added to it.
        start_ns = record["arrival_ns"] if record.get("queued") is False else now_ns
        t0 = self.loop.time() - (now_ns - start_ns) / 1e9
        times = [t0 + off for off in cfg.chunk_offsets_s(rid, len(sizes))]
        chat = path.endswith("chat/completions")
        opts = req.get("stream_options") or {}
        self.transport.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        self.stream = _Stream(
            rid,
            cfg.model,
            chat,
            sizes,
            times,
            record,
            fault,
            bool(opts.get("include_usage")),
            bool(opts.get("continuous_usage_stats")),
            record["prompt_tokens"],
        )
        self._schedule(0)

    def _schedule(self, j: int) -> None:
        s = self.stream
        if j < len(s.sizes):
            self.timer = self.loop.call_at(s.times[j], self._emit, j)
        else:
            self._finish_stream()

    def _emit(self, j: int) -> None:
        self.timer = None
        s = self.stream
        if self.transport is None or self.transport.is_closing():
            return
        half = len(s.sizes) // 2
        if s.fault and j == half and s.fault in ("malformed", "close", "stall"):
            if s.fault == "malformed":
                self.transport.write(_chunk(b'data: {"choices": [{"text": "synthetic fault: malformed\n\n'))
            elif s.fault == "close":
                self.transport.close()
                return
            if s.fault == "stall":
                return  # hold the connection: the client's idle timeout must end it
        s.emitted += s.sizes[j]
        last = j == len(s.sizes) - 1
        data = _chunk(s.event(j)) + (self._tail() if last else b"")  # the last chunk and the end: one write
        s.record["chunk_tokens"].append(s.sizes[j])
        burst = self.config.burst
        if burst > 1 and j > 0 and not last and j % burst:
            s.held += data  # coalesced delivery: held until the group's last chunk
            self._schedule(j + 1)
            return
        data, s.held = bytes(s.held) + data, bytearray()
        stamp = perf_counter_ns()
        s.record["chunk_write_ns"].extend([stamp] * (len(s.record["chunk_tokens"]) - len(s.record["chunk_write_ns"])))
        self.transport.write(data)
        if last:
            self.holds_slot = False
            self.state.release()
            self._done_response()
        else:
            self._schedule(j + 1)

    def _finish_stream(self) -> None:
        """The end of a stream with no chunk at all (max_tokens 0)."""
        self.transport.write(self._tail())
        self.holds_slot = False
        self.state.release()
        self._done_response()

    def _tail(self) -> bytes:
        s = self.stream
        tail = b""
        if s.include_usage:
            u = s.usage()
            tail += _chunk(
                f'data: {s.head}],"usage":{{"prompt_tokens":{u["prompt_tokens"]},'
                f'"completion_tokens":{u["completion_tokens"]},"total_tokens":{u["total_tokens"]}}}}}\n\n'.encode()
            )
        return tail + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


class _Stream:
    def __init__(
        self,
        rid: str,
        model: str,
        chat: bool,
        sizes: list[int],
        times: list[float],
        record: dict,
        fault: str | None,
        include_usage: bool,
        continuous: bool,
        prompt_tokens: int,
    ):
        self.rid, self.model, self.chat, self.sizes, self.times = rid, model, chat, sizes, times
        self.record, self.fault, self.include_usage, self.continuous = record, fault, include_usage, continuous
        self.prompt_tokens = prompt_tokens
        self.emitted = 0
        self.held = bytearray()
        self.object = "chat.completion.chunk" if chat else "text_completion"
        self.created = int(time())
        self.head = (
            f'{{"id":{json.dumps(rid)},"object":"{self.object}","created":{self.created},'
            f'"model":{json.dumps(model)},"choices":['
        )

    def usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.emitted,
            "total_tokens": self.prompt_tokens + self.emitted,
        }

    def event(self, j: int) -> bytes:
        """One SSE event, formatted without json.dumps (the text is ASCII words: nothing to escape)."""
        first = self.emitted - self.sizes[j]
        text = "".join([f" t{i}" for i in range(first, self.emitted)])
        finish = '"length"' if j == len(self.sizes) - 1 else "null"
        usage = ""
        if self.continuous:
            usage = (
                f',"usage":{{"prompt_tokens":{self.prompt_tokens},"completion_tokens":{self.emitted},'
                f'"total_tokens":{self.prompt_tokens + self.emitted}}}'
            )
        if self.chat:
            choice = f'{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":{finish}}}'
        else:
            choice = f'{{"index":0,"text":"{text}","finish_reason":{finish}}}'
        return f"data: {self.head}{choice}]{usage}}}\n\n".encode()


async def serve(config: SyntheticConfig, ready: asyncio.Future | None = None) -> None:
    """Serve until cancelled. ``ready`` gets the bound port."""
    from agents.loadgen.runtime import raise_fd_limit

    raise_fd_limit()
    state = ServerState(config)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SyntheticProtocol(state), config.host, config.port, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    if ready is not None:
        ready.set_result(port)
    print(f"synthetic server listening on http://{config.host}:{port}", flush=True)
    import gc

    gc.freeze()  # the ground-truth log only grows: keep collection pauses off the emission schedule
    gc.set_threshold(100_000, 50, 1000)
    async with server:
        await server.serve_forever()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="loopback only")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port (printed on stdout)")
    p.add_argument("--model", default="synthetic")
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=10.0, help="gap between chunks")
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument("--jitter-ms", type=float, default=0.0, help="uniform ± jitter per chunk, deterministic")
    p.add_argument("--error-rate", type=float, default=0.0, help="fraction of requests answered HTTP 500")
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND:RATE",
        help=f"extra faults, repeatable; KIND in {', '.join(FAULT_KINDS)}",
    )
    p.add_argument("--max-batch", type=int, default=0, help="decode at most B at once; the rest queue (0: unlimited)")
    p.add_argument(
        "--burst",
        type=int,
        default=1,
        help="flush the chunks after the first N at a time (a coalesced stream); 1: every chunk alone",
    )
    p.add_argument("--eos-at", type=int, default=0, help="stop after N tokens unless ignore_eos (0: never)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-log", action="store_true", help="keep no ground-truth log (long runs)")


def config_from_args(args: argparse.Namespace) -> SyntheticConfig:
    faults: dict[str, float] = {}
    for spec in args.fault:
        kind, _, rate = spec.partition(":")
        try:
            faults[kind] = float(rate)
        except ValueError as exc:
            raise SyntheticServerConfigError(f"--fault {spec!r}: expected KIND:RATE") from exc
    return SyntheticConfig(
        host=args.host,
        port=args.port,
        model=args.model,
        ttft_ms=args.ttft_ms,
        itl_ms=args.itl_ms,
        tokens_per_chunk=args.tokens_per_chunk,
        jitter_ms=args.jitter_ms,
        error_rate=args.error_rate,
        faults=faults,
        max_batch=args.max_batch,
        burst=args.burst,
        eos_at=args.eos_at,
        seed=args.seed,
        keep_log=not args.no_log,
    )


def run(config: SyntheticConfig) -> int:
    from agents.loadgen.runtime import run_async

    try:
        run_async(serve(config))
    except KeyboardInterrupt:
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m agents.loadgen.synthetic_server", description=__doc__.splitlines()[0])
    add_arguments(p)
    try:
        return run(config_from_args(p.parse_args(argv)))
    except SyntheticServerConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
