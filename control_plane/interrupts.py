"""Work a signal must stop even when the exception it raises cannot reach it.

The CLI turns SIGINT/SIGTERM/SIGHUP into an exception raised in the main thread (control_plane.cli.SignalExits).
That stops Python code, but not always native work: an exception raised while the interpreter runs a finalizer
or a library's callback is reported and dropped, and a library may clear it. Work that can be told to stop
registers how (``with on_interrupt(con.interrupt): ...``); the CLI's handler calls every registered stopper
before it raises, so a DuckDB statement ends on the signal whichever frame the handler ran in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)
_STOPPERS: list[Callable[[], None]] = []


@contextmanager
def on_interrupt(stop: Callable[[], None]) -> Iterator[None]:
    """While the block runs, a signal the CLI handles also calls ``stop()``."""
    _STOPPERS.append(stop)
    try:
        yield
    finally:
        _STOPPERS.remove(stop)


def stop_registered_work() -> None:
    """Call every registered stopper (the CLI's signal handler does, before it raises); never raises."""
    for stop in list(_STOPPERS):
        try:
            stop()
        except Exception as exc:  # noqa: BLE001 - a stopper that fails must not keep the others from running
            log.warning("stopping work on a signal failed: %s: %s", type(exc).__name__, exc)
