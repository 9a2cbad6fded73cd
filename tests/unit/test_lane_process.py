"""The pieces of control_plane.lane_process that need no child: interrupts at safe points, a log's error line."""

from __future__ import annotations

import os
import signal

import pytest

from control_plane.lane_process import InterruptGuard, last_log_line


def test_sigterm_is_a_keyboard_interrupt_deferred_to_the_end_of_a_critical_section():
    before = signal.getsignal(signal.SIGTERM)
    with InterruptGuard() as guard:
        reached_end = False
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            with guard.critical():
                os.kill(os.getpid(), signal.SIGTERM)
                reached_end = True  # the signal arrived, the section still finished
        assert reached_end
        guard.requested = None
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before  # restored


def test_an_ignored_sighup_stays_ignored():
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with InterruptGuard():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old)


def test_last_log_line_is_the_tracebacks_last_line_not_the_json_result(tmp_path):
    log = tmp_path / "lane.log"
    log.write_text(
        'INFO starting\nTraceback (most recent call last):\n  File "x", line 1\n'
        'ModuleNotFoundError: No module named \'nope\'\n\n{"status": "interrupted"}\n'
    )
    assert last_log_line(log) == "ModuleNotFoundError: No module named 'nope'"
    log.write_text("x" * 500 + "\n")
    assert len(last_log_line(log, limit=300)) == 300
    assert last_log_line(tmp_path / "missing.log") is None and last_log_line(None) is None
