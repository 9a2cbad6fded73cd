"""Dispatch: closed-loop streams or an open-loop schedule over the raw transport.

Requests are pre-encoded (bodies JSON-encoded once before the point; only the
request id is spliced in at dispatch) and every stamp is ``perf_counter_ns()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

from agents.loadgen.pool import ConnectionPool
from agents.loadgen.records import RawRequest
from agents.loadgen.transport import Target


@dataclass(frozen=True)
class Timeouts:
    idle_s: float = 60.0  # no byte for this long: StallTimeoutError
    total_s: float = 1800.0  # the whole request: RequestTimeoutError


class RequestFactory:
    """Pre-encoded HTTP/1.1 requests: a constant head, one pre-encoded body per prompt."""

    def __init__(
        self,
        target: Target,
        path: str,
        bodies: list[bytes],
        prompt_tokens: list[int],
        point_id: str,
        api_key: str | None = None,
    ):
        if not bodies:
            raise ValueError("no request bodies")
        auth = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
        self.prefix = (
            f"POST {target.base_path}{path} HTTP/1.1\r\nHost: {target.host_header}\r\n"
            f"Content-Type: application/json\r\nAccept: text/event-stream\r\n{auth}X-Request-Id: "
        ).encode()
        self.tails = [b"\r\nContent-Length: %d\r\n\r\n%s" % (len(b), b) for b in bodies]
        self.prompt_tokens = prompt_tokens
        self.point_id = point_id

    def request_id(self, index: int, warmup: bool) -> str:
        return f"{self.point_id}-{'w' if warmup else ''}{index}"

    def payload(self, index: int, request_id: str) -> bytes:
        return self.prefix + request_id.encode() + self.tails[index % len(self.tails)]

    def payload_for(self, body: bytes, request_id: str) -> bytes:
        """A request whose body is built at run time (a session's turn), with the same head."""
        return self.prefix + request_id.encode() + b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    def tokens(self, index: int) -> int:
        return self.prompt_tokens[index % len(self.prompt_tokens)]


class Dispatcher:
    """Runs one phase (warm-up or measured) of a point and collects :class:`RawRequest` records."""

    def __init__(
        self,
        pool: ConnectionPool,
        factory: RequestFactory,
        timeouts: Timeouts,
        progress: Callable[[int], None] | None = None,
        phase_hook: Callable[[str], None] | None = None,
    ):
        self.pool = pool
        self.phase_hook = phase_hook  # told "first_sent" once, as the first measured request goes out
        self._first_sent = False
        self.factory = factory
        self.timeouts = timeouts
        self.results: list[RawRequest] = []
        self.progress = progress
        self.stop_reason: str | None = None  # why a bounded open loop stopped dispatching early
        self.aborted: set[int] = set()  # request indices still in flight when the grace ran out

    async def _one(
        self, index: int, warmup: bool, t_scheduled: int, body: bytes | None = None, tokens: int | None = None
    ) -> int:
        """Send request ``index`` (its pre-encoded body, or ``body`` built at run time: a session's turn)."""
        f = self.factory
        rid = f.request_id(index, warmup)
        if not warmup and not self._first_sent:
            self._first_sent = True
            if self.phase_hook is not None:
                self.phase_hook("first_sent")
        payload = f.payload(index, rid) if body is None else f.payload_for(body, rid)
        ex = await self.pool.exchange(payload, self.timeouts.idle_s, self.timeouts.total_s)
        self.results.append(
            RawRequest(index, rid, warmup, f.tokens(index) if tokens is None else tokens, t_scheduled, ex)
        )
        return ex.t_done

    async def sessions(
        self,
        sessions: list[Any],
        turn: Callable[[Any, int, list[str]], tuple[bytes, int] | None],
        reply: Callable[[Any], str | None],
        *,
        streams: int | None = None,
        offsets_s: list[float] | None = None,
        think_time_s: float = 0.0,
        warmup: bool = False,
        first_index: int = 0,
        on_request: Callable[[int, Any, int], None] | None = None,
    ) -> None:
        """Multi-turn sessions: each runs its turns in order, a turn sent when the previous one has ended (plus
        ``think_time_s``), its body built from the conversation so far (``turn(session, t, replies)``; None: the
        session stops, e.g. its context is full). Closed loop: ``streams`` sessions at once, each stream taking
        the next session when its own ends; open loop: a session starts at each of ``offsets_s``. A failed turn
        ends its session. ``on_request(index, session, t)`` records which turn a request index carried."""
        counter = iter(range(first_index, first_index + 10**9))
        loop = asyncio.get_running_loop()

        async def run(session: Any, t_start: int) -> None:
            replies: list[str] = []
            t_sched = t_start
            for t in range(len(session.user_texts)):
                built = turn(session, t, replies)
                if built is None:
                    return
                index = next(counter)
                if on_request is not None:
                    on_request(index, session, t)
                await self._one(index, warmup, t_sched, built[0], built[1])
                text = reply(next(r.exchange for r in reversed(self.results) if r.index == index))
                if text is None:
                    return  # the turn failed: its session ends here, recorded
                replies.append(text)
                if think_time_s:
                    await asyncio.sleep(think_time_s)
                t_sched = perf_counter_ns()

        if offsets_s is None:
            queue = iter(sessions)

            async def stream() -> None:
                while (s := next(queue, None)) is not None:
                    await run(s, perf_counter_ns())

            await self._with_progress(asyncio.gather(*(stream() for _ in range(max(1, streams or 1)))))
            return

        async def dispatch() -> None:
            t0 = perf_counter_ns()
            tasks = []
            for s, off in zip(sessions, offsets_s):
                t_sched = await _sleep_until(t0, off)
                tasks.append(loop.create_task(run(s, t_sched)))
            await asyncio.gather(*tasks)

        await self._with_progress(dispatch())

    async def closed_loop(
        self,
        concurrency: int,
        count: int | None,
        warmup: bool = False,
        stop_at_ns: int | None = None,
        first_index: int = 0,
        stream_starts_s: list[float] | None = None,
    ) -> None:
        """``concurrency`` streams; the next request is scheduled when a stream's previous one ends.
        Stops after ``count`` requests (None: no limit) or, when ``stop_at_ns`` is set, sends none after it.
        ``stream_starts_s``: when each stream starts (a closed-loop ramp; one stream per entry), its first request
        scheduled then."""
        counter = iter(range(first_index, first_index + count) if count is not None else _forever(first_index))

        t0 = perf_counter_ns()

        async def stream(start_s: float) -> None:
            t_free = await _sleep_until(t0, start_s) if start_s else perf_counter_ns()
            while stop_at_ns is None or t_free < stop_at_ns:
                index = next(counter, None)
                if index is None:
                    return
                t_free = await self._one(index, warmup, t_free)

        starts = stream_starts_s if stream_starts_s is not None else [0.0] * concurrency
        await self._with_progress(asyncio.gather(*(stream(s) for s in starts)))

    async def open_loop(
        self,
        offsets_s: list[float],
        max_concurrency: int | None,
        first_index: int = 0,
        saturation: Callable[[int, float], str | None] | None = None,
        grace_s: float | None = None,
    ) -> None:
        """Dispatch at precomputed absolute times; with a cap, a request waits for a free slot (client queue).

        ``saturation(in_flight, elapsed_s)`` is asked before each arrival: a reason ends the dispatch early
        (:attr:`stop_reason`). ``grace_s``: after the last arrival, requests still in flight get this long, then
        their connections are closed and they are recorded as not completed (:attr:`aborted`)."""
        if saturation is not None or grace_s is not None:
            await self._with_progress(self._bounded_open_loop(offsets_s, first_index, saturation, grace_s))
            return
        loop = asyncio.get_running_loop()
        sem = asyncio.Semaphore(max_concurrency) if max_concurrency else None
        tasks: list[asyncio.Task] = []

        async def capped(index: int, t_sched: int) -> None:
            try:
                await self._one(index, False, t_sched)
            finally:
                sem.release()

        async def dispatch() -> None:
            t0 = perf_counter_ns()
            for k, off in enumerate(offsets_s):
                t_sched = await _sleep_until(t0, off)
                if sem is not None:
                    await sem.acquire()
                    tasks.append(loop.create_task(capped(first_index + k, t_sched)))
                else:
                    tasks.append(loop.create_task(self._one(first_index + k, False, t_sched)))
            await asyncio.gather(*tasks)

        await self._with_progress(dispatch())

    async def _bounded_open_loop(
        self,
        offsets_s: list[float],
        first_index: int,
        saturation: Callable[[int, float], str | None] | None,
        grace_s: float | None,
    ) -> None:
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task] = []
        finished = 0  # tasks done, counted as they end: in flight = sent - finished, without a scan per arrival

        def count_done(_: asyncio.Task) -> None:
            nonlocal finished
            finished += 1

        t0 = perf_counter_ns()
        for k, off in enumerate(offsets_s):
            t_sched = await _sleep_until(t0, off)
            if saturation is not None:
                reason = saturation(len(tasks) - finished, (perf_counter_ns() - t0) / 1e9)
                if reason:
                    self.stop_reason = reason
                    break
            tasks.append(loop.create_task(self._one(first_index + k, False, t_sched)))
            tasks[-1].add_done_callback(count_done)
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace_s)
        if pending:
            self.aborted = {first_index + i for i, t in enumerate(tasks) if t in pending}
            self.pool.abort_busy()
            await asyncio.gather(*pending)

    async def _with_progress(self, aw) -> None:
        if self.progress is None:
            await aw
            return

        async def tick() -> None:
            while True:
                await asyncio.sleep(5.0)
                self.progress(len(self.results))

        ticker = asyncio.get_running_loop().create_task(tick())
        try:
            await aw
        finally:
            ticker.cancel()
        self.progress(len(self.results))


async def _sleep_until(t0: int, offset_s: float) -> int:
    """Wait until ``offset_s`` after ``t0`` (perf_counter_ns) on the arrival schedule; return that scheduled time."""
    t_sched = t0 + int(offset_s * 1e9)
    delay = (t_sched - perf_counter_ns()) / 1e9
    if delay > 0:
        await asyncio.sleep(delay)
    return t_sched


def _forever(start: int):
    i = start
    while True:
        yield i
        i += 1
