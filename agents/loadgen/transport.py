"""The measured path: HTTP/1.1 streaming over a raw asyncio protocol, pre-encoded requests.

Chosen by measurement (docs/dev/benchmarks.md, the load generator's fidelity): on this class of machine httpx fell
behind at 64 streams and aiohttp added 1-6 ms of ITL error at 256, while a raw
protocol with pre-built request bytes and uvloop kept read lag and ITL error
well under a millisecond at 0.03 CPU s per 1,000 tokens. So the hot path does
as little as possible: ``data_received`` stamps ``perf_counter_ns()`` once,
undoes HTTP chunking, cuts SSE events at their blank line and appends
``(stamp, event bytes)``. JSON is parsed only after the point ends
(:mod:`agents.loadgen.records`). Everything off the measured path may use httpx.

A response ends as: complete, or failed with one of the ``TransportError``
classes below; a bad server never raises out of :meth:`ConnectionPool.exchange`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from time import perf_counter_ns
from urllib.parse import urlsplit

_HEAD, _CHUNKED, _LENGTH, _UNTIL_CLOSE, _DONE, _TRAILER = range(6)
_BODY_CAP = 65536  # bytes of a non-SSE/error body kept for the error message


class TransportError(Exception):
    """Base of the ways one request can fail on the wire (the request becomes a failed row)."""


class ConnectError(TransportError):
    """The TCP (or TLS) connection could not be opened."""


class HttpStatusError(TransportError):
    """The server answered with a non-200 status."""


class NonSseBodyError(TransportError):
    """A 200 answer that is not ``text/event-stream``."""


class StreamClosedError(TransportError):
    """The connection closed before the response ended."""


class StallTimeoutError(TransportError):
    """No byte arrived for longer than the idle timeout."""


class RequestTimeoutError(TransportError):
    """The whole request took longer than its total timeout."""


class HttpProtocolError(TransportError):
    """The response could not be parsed as HTTP/1.1."""


@dataclass(frozen=True)
class Target:
    """Where requests go: parsed once from a base URL such as ``http://127.0.0.1:8000/v1``."""

    scheme: str
    host: str
    port: int
    base_path: str

    @classmethod
    def from_url(cls, base_url: str) -> Target:
        parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"unsupported scheme {parts.scheme!r} in {base_url!r}: http | https")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        path = parts.path.rstrip("/")
        if path.endswith("/v1"):
            path = path[:-3]
        return cls(parts.scheme, parts.hostname or "127.0.0.1", port, path)

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        return self.host if self.port == default else f"{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.host_header}{self.base_path}{path}"


class Exchange:
    """One request and its response as recorded on the measured path."""

    __slots__ = (
        "t_sent",
        "t_done",
        "last_rx",
        "status",
        "headers",
        "events",
        "body",
        "error",
        "future",
        "bytes_seen",
        "done_marker",
    )

    def __init__(self, future: asyncio.Future):
        self.t_sent = 0
        self.t_done = 0
        self.last_rx = 0
        self.status = 0
        self.headers: dict[str, str] = {}
        self.events: list[tuple[int, bytes]] = []
        self.body = bytearray()
        self.error: TransportError | None = None
        self.future = future
        self.bytes_seen = 0
        self.done_marker = False


class StreamConnection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; carries one exchange at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = True
        self.ex: Exchange | None = None
        self._buf = bytearray()
        self._sse = bytearray()
        self._sep = b""
        self._state = _DONE
        self._left = 0
        self._sse_body = False
        self._timer: asyncio.TimerHandle | None = None
        self._idle_ns = 0
        self._total_ns = 0

    # ---- asyncio.Protocol ---------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ex = self.ex
        if ex is None or ex.future.done():
            return
        if self._state == _UNTIL_CLOSE:
            self._state = _DONE
            self._finish(perf_counter_ns())
        else:
            why = f": {type(exc).__name__}: {exc}" if exc else ""
            self._fail(
                StreamClosedError(
                    f"connection closed before the response ended, after "
                    f"{len(ex.events)} events and {ex.bytes_seen} bytes{why}"
                )
            )

    def data_received(self, data: bytes) -> None:
        t = perf_counter_ns()
        if self._state == _TRAILER:  # the CRLF after the last chunk of a finished response
            self._buf += data
            if len(self._buf) >= 2:
                if self._buf[:2] != b"\r\n" or len(self._buf) > 2:
                    self.reusable = False  # trailers or stray bytes: do not reuse
                self._buf.clear()
                self._state = _DONE
            return
        ex = self.ex
        if ex is None or ex.future.done():
            self.reusable = False  # bytes nobody asked for: never reuse this connection
            return
        ex.last_rx = t
        ex.bytes_seen += len(data)
        self._buf += data
        try:
            if self._state == _HEAD:
                self._parse_head(t)
            if self._state == _CHUNKED:
                self._feed_chunked(t)
            elif self._state == _LENGTH:
                take = min(self._left, len(self._buf))
                self._payload(bytes(self._buf[:take]), t)
                del self._buf[:take]
                self._left -= take
                if self._left == 0:
                    self._finish(t)
            elif self._state == _UNTIL_CLOSE:
                self._payload(bytes(self._buf), t)
                self._buf.clear()
        except (ValueError, IndexError) as exc:
            self._fail(HttpProtocolError(f"unparseable HTTP response: {type(exc).__name__}: {exc}"))

    # ---- request ------------------------------------------------------------------
    def start(self, payload: bytes, idle_timeout_s: float, total_timeout_s: float) -> Exchange:
        ex = Exchange(self.loop.create_future())
        self.ex = ex
        if self.closed or self.transport is None or self.transport.is_closing():
            ex.t_sent = ex.last_rx = perf_counter_ns()
            self._fail(StreamClosedError("connection was already closed when the request was sent"))
            return ex
        self._buf.clear()
        self._sse.clear()
        self._sep = b""
        self._state = _HEAD
        self._left = 0
        self._idle_ns = int(idle_timeout_s * 1e9)
        self._total_ns = int(total_timeout_s * 1e9)
        ex.t_sent = ex.last_rx = perf_counter_ns()
        self.transport.write(payload)
        self._timer = self.loop.call_later(min(idle_timeout_s, total_timeout_s), self._check_timeouts)
        return ex

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()
        self.closed = True

    # ---- parsing ------------------------------------------------------------------
    def _parse_head(self, t: int) -> None:
        while self._buf[:2] == b"\r\n":  # a late CRLF from the previous response
            del self._buf[:2]
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > 65536:
                raise ValueError("response head larger than 64 KiB")
            return
        ex = self.ex
        lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
        del self._buf[: end + 4]
        version, _, rest = lines[0].partition(" ")
        ex.status = int(rest[:3])
        headers = ex.headers
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if version == "HTTP/1.0" or headers.get("connection", "").lower() == "close":
            self.reusable = False
        self._sse_body = ex.status == 200 and headers.get("content-type", "").startswith("text/event-stream")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = _CHUNKED
        elif "content-length" in headers:
            self._left = int(headers["content-length"])
            self._state = _LENGTH
            if self._left == 0:
                self._finish(t)
        else:
            self._state = _UNTIL_CLOSE
            self.reusable = False

    def _feed_chunked(self, t: int) -> None:
        buf = self._buf
        pos = 0
        n = len(buf)
        while pos < n:
            if self._left == 0:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                if eol == pos:  # the CRLF that ends a chunk's data
                    pos += 2
                    continue
                size = int(bytes(buf[pos:eol]).split(b";", 1)[0], 16)
                pos = eol + 2
                if size == 0:
                    rest = bytes(buf[pos:])
                    buf.clear()
                    if rest == b"\r\n":
                        self._state = _DONE
                    elif rest in (b"", b"\r"):
                        self._state = _TRAILER  # the final CRLF is still on its way
                        buf += rest
                    else:
                        self.reusable = False  # trailers or stray bytes: do not reuse
                    self._finish(t)
                    return
                self._left = size
            take = min(self._left, n - pos)
            self._payload(bytes(buf[pos : pos + take]), t)
            pos += take
            self._left -= take
        del buf[:pos]

    def _payload(self, data: bytes, t: int) -> None:
        if not self._sse_body:
            ex = self.ex
            if len(ex.body) < _BODY_CAP:
                ex.body += data[: _BODY_CAP - len(ex.body)]
            return
        sse = self._sse
        sse += data
        sep = self._sep
        if not sep:
            nl = sse.find(b"\n")
            if nl < 0:
                return
            sep = self._sep = b"\r\n\r\n" if nl > 0 and sse[nl - 1] == 13 else b"\n\n"
        start = 0
        events = self.ex.events
        while True:
            end = sse.find(sep, start)
            if end < 0:
                break
            event = bytes(sse[start:end])
            start = end + len(sep)
            if event.startswith(b"data: [DONE]") or event.startswith(b"data:[DONE]"):
                self.ex.done_marker = True
            elif event and event[0] != 58:  # ':' starts an SSE comment (keep-alive ping)
                events.append((t, event))
        if start:
            del sse[:start]

    # ---- outcomes -----------------------------------------------------------------
    def _finish(self, t: int) -> None:
        ex = self.ex
        if self._state != _TRAILER:
            self._state = _DONE
        if ex.future.done():
            return
        if ex.status != 200:
            body = bytes(ex.body[:500]).decode("utf-8", "replace")
            self._fail(HttpStatusError(f"HTTP {ex.status}: {body}"), t)
            return
        if not self._sse_body:
            body = bytes(ex.body[:200]).decode("utf-8", "replace")
            self._fail(
                NonSseBodyError(f"content-type {ex.headers.get('content-type')!r}, not text/event-stream: {body!r}"), t
            )
            return
        ex.t_done = t
        self._cancel_timer()
        ex.future.set_result(None)

    def _fail(self, error: TransportError, t: int | None = None) -> None:
        ex = self.ex
        if ex is None or ex.future.done():
            return
        ex.error = error
        ex.t_done = t or perf_counter_ns()
        self.reusable = False
        self._state = _DONE
        self._cancel_timer()
        self.close()
        ex.future.set_result(None)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check_timeouts(self) -> None:
        ex = self.ex
        self._timer = None
        if ex is None or ex.future.done():
            return
        now = perf_counter_ns()
        if now - ex.t_sent >= self._total_ns:
            self._fail(
                RequestTimeoutError(
                    f"no complete response within {self._total_ns / 1e9:g} s ({len(ex.events)} events received)"
                ),
                now,
            )
            return
        if now - ex.last_rx >= self._idle_ns:
            self._fail(StallTimeoutError(f"no byte for {self._idle_ns / 1e9:g} s after {len(ex.events)} events"), now)
            return
        wait_ns = min(self._idle_ns - (now - ex.last_rx), self._total_ns - (now - ex.t_sent))
        self._timer = self.loop.call_later(wait_ns / 1e9, self._check_timeouts)
