"""A signal stops registered native work even when the exception it raises cannot reach it.

A fresh-clone run saw `neuronpipe query` keep running a DuckDB statement after SIGINT until the test killed it:
the handler's exception had not ended the statement. The handler now also calls every registered stopper
(``control_plane.interrupts``) before it raises; the query registers ``con.interrupt``. Here the stopper path
is driven directly, with no exception reaching the statement at all.
"""

from __future__ import annotations

import signal
import threading

import duckdb
import pytest

from control_plane.cli import InterruptedBySignalError, SignalExits
from control_plane.commands.query import _with_timeout
from control_plane.interrupts import on_interrupt, stop_registered_work

SLOW = "select sum(hash(i)) from range(1000000000000::bigint) t(i)"


def test_the_handler_calls_every_stopper_then_raises():
    called: list[str] = []

    def broken() -> None:
        raise RuntimeError("cannot stop")

    with (
        SignalExits() as signals,
        on_interrupt(lambda: called.append("a")),
        on_interrupt(broken),
        on_interrupt(lambda: called.append("b")),
    ):
        with pytest.raises(InterruptedBySignalError):
            signals._raise(signal.SIGINT, None)
    assert called == ["a", "b"] and signals.received == signal.SIGINT
    stop_registered_work()  # nothing registered any more: a no-op
    assert called == ["a", "b"]


def test_a_stopped_statement_ends_as_an_interrupt_not_an_error():
    con = duckdb.connect()
    timer = threading.Timer(0.5, stop_registered_work)  # what the handler does, from wherever it ran
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt, match="interrupted by a signal"):
            _with_timeout(con, 3600, lambda: con.execute(SLOW).fetchall())
    finally:
        timer.cancel()
        con.close()
