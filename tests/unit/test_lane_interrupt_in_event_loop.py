"""A SIGTERM that reaches a lane while its load generator's event loop is busy stops the lane.

The runner turns SIGTERM into ``LaneInterrupted`` by raising it from a Python signal handler, and that handler
runs in whatever frame the main thread is executing. Inside a load-generator point that is usually a request's
task step or a done-callback. asyncio and uvloop both re-raise only ``KeyboardInterrupt``/``SystemExit`` from
there; any other exception is stored on the task (or logged by the loop) and the point carries on. That is how
a fresh-clone CI run saw a lane ignore SIGTERM for 60 s. These tests raise the signal from exactly those two
places, so they do not depend on where the OS happens to deliver it.
"""

from __future__ import annotations

import asyncio
import signal
import threading

import pytest

from agents.context import LaneInterrupted
from agents.loadgen.runtime import run_async
from agents.runner import _raise_interrupt


@pytest.fixture
def runner_sigterm():
    assert threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


async def _busy(steps: list[int]) -> None:
    for _ in range(2000):  # bounded: a swallowed interrupt fails the test instead of hanging it
        steps.append(1)
        await asyncio.sleep(0)


async def _point_with_signal_in_a_task(steps: list[int]) -> str:
    async def request() -> None:
        await asyncio.sleep(0)
        signal.raise_signal(signal.SIGTERM)  # the handler runs inside this task's step
        await asyncio.sleep(0.5)

    others = [asyncio.ensure_future(_busy(steps)) for _ in range(3)]
    await asyncio.gather(request(), *others, return_exceptions=True)  # how a point gathers its requests
    return "the point ran to its end"


async def _point_with_signal_in_a_callback(steps: list[int]) -> str:
    done = asyncio.get_running_loop().create_future()
    fut = asyncio.ensure_future(asyncio.sleep(0))
    fut.add_done_callback(lambda _f: (done.set_result(None), signal.raise_signal(signal.SIGTERM)))
    busy = asyncio.ensure_future(_busy(steps))
    await done
    for _ in range(50):
        await asyncio.sleep(0)
    busy.cancel()
    return "the point ran to its end"


def test_lane_interrupted_is_a_keyboard_interrupt():
    assert issubclass(LaneInterrupted, KeyboardInterrupt)


@pytest.mark.parametrize(
    "point",
    [_point_with_signal_in_a_task, _point_with_signal_in_a_callback],
    ids=["in_a_request_task", "in_a_done_callback"],
)
def test_sigterm_inside_the_loop_escapes_it(runner_sigterm, point):
    steps: list[int] = []
    with pytest.raises(LaneInterrupted, match="SIGTERM"):
        run_async(point(steps))
