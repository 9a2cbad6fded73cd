"""Keep-alive connections to one target over :class:`~agents.loadgen.transport.StreamConnection`."""

from __future__ import annotations

import asyncio
import ssl as ssl_lib
from time import perf_counter_ns

from agents.loadgen.transport import ConnectError, Exchange, StreamClosedError, StreamConnection, Target


class ConnectionPool:
    """Keep-alive connections to one target; a stale reused connection is retried once on a new one."""

    def __init__(self, target: Target, loop: asyncio.AbstractEventLoop | None = None, connect_timeout_s: float = 10.0):
        self.target = target
        self.loop = loop or asyncio.get_running_loop()
        self.connect_timeout_s = connect_timeout_s
        self._idle: list[StreamConnection] = []
        self._busy: set[StreamConnection] = set()  # carrying an exchange now (abort_busy closes them)
        self._ssl = ssl_lib.create_default_context() if target.scheme == "https" else None
        self.opened = 0

    async def _connect(self) -> StreamConnection:
        try:
            _, conn = await asyncio.wait_for(
                self.loop.create_connection(
                    lambda: StreamConnection(self.loop), self.target.host, self.target.port, ssl=self._ssl
                ),
                self.connect_timeout_s,
            )
        except (TimeoutError, OSError) as exc:
            raise ConnectError(
                f"cannot connect to {self.target.host}:{self.target.port}: {type(exc).__name__}: {exc}"
            ) from exc
        self.opened += 1
        return conn

    async def prewarm(self, n: int) -> None:
        """Open up to ``n`` idle connections before a point starts (connect time is not measured)."""
        need = max(0, n - len(self._idle))
        results = await asyncio.gather(*(self._connect() for _ in range(need)), return_exceptions=True)
        self._idle.extend(c for c in results if isinstance(c, StreamConnection))

    async def exchange(self, payload: bytes, idle_timeout_s: float, total_timeout_s: float) -> Exchange:
        """Send one pre-encoded request and wait for its response to end. Never raises a TransportError."""
        reused = False
        conn = None
        while self._idle:
            c = self._idle.pop()
            if not c.closed and c.reusable:
                conn, reused = c, True
                break
        for attempt in (0, 1):
            if conn is None:
                try:
                    conn = await self._connect()
                except ConnectError as exc:
                    ex = Exchange(self.loop.create_future())
                    ex.t_sent = ex.t_done = perf_counter_ns()
                    ex.error = exc
                    return ex
            ex = conn.start(payload, idle_timeout_s, total_timeout_s)
            self._busy.add(conn)
            try:
                await ex.future
            finally:
                self._busy.discard(conn)
            stale = reused and ex.bytes_seen == 0 and isinstance(ex.error, StreamClosedError)
            if stale and attempt == 0:
                conn, reused = None, False
                continue
            break
        if conn.reusable and not conn.closed:
            conn.ex = None
            self._idle.append(conn)
        else:
            conn.close()
        return ex

    def abort_busy(self) -> int:
        """Close every connection carrying an exchange (its request then ends as not completed); returns how many."""
        busy = list(self._busy)
        for c in busy:
            c.close()
        return len(busy)

    def close(self) -> None:
        for c in self._idle:
            c.close()
        self._idle.clear()
