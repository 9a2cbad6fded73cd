"""A signal ends `neuronpipe` with 128 + its number (SIGINT 130, SIGTERM 143, SIGHUP 129), after its clean-up.

Each case starts a real `neuronpipe` process that blocks — a query on a statement that would take hours, or the
synthetic server — waits until it is blocked where the command does its work, sends one signal and reads the
exit code and the one ``interrupted (SIGNAME)`` line. The query's private spill directory is gone afterwards
(its ``finally`` ran), and the store is unchanged.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from analytics.store import LocalStore
from control_plane.cli import InterruptedBySignalError, SignalExits, exit_code_for

T0 = datetime(2026, 7, 1, 12, tzinfo=timezone.utc)
SLOW = "select sum(hash(i)) from range(1000000000000::bigint) t(i)"
SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]


def _default_sigint() -> None:
    """In the child: SIGINT as a terminal's foreground process has it (a background shell job ignores it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("signals") / "results"
    w = LocalStore(root).begin_attempt("r1", "host_cpu")
    w.add_rows("host_bench", [{"bench": "triad", "threads": 1, "value": 10.0, "unit": "GB/s"}])
    w.add_rows(
        "lane_runs",
        [
            {
                "status": "succeeded",
                "supersedes": True,
                "started_at": T0,
                "ended_at": T0,
                "wall_s": 1.0,
                "backend": "cpu",
                "host": "h",
            }
        ],
    )
    w.commit("succeeded")
    return root


def _wait_for(predicate, proc: subprocess.Popen, what: str, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert proc.poll() is None, f"ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("sig, code", SIGNALS, ids=[s.name for s, _ in SIGNALS])
def test_a_signal_ends_a_blocked_query_with_128_plus_its_number_after_clean_up(tmp_path, results, sig, code):
    spill_root = tmp_path / "tmp"
    spill_root.mkdir()
    before = _tree(results)
    proc = subprocess.Popen(
        [sys.executable, "-m", "control_plane.cli", "query", "--results", str(results), "--timeout", "3600", SLOW],
        env={**os.environ, "TMPDIR": str(spill_root)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    try:
        _wait_for(lambda: any(spill_root.iterdir()), proc, "opened the store")  # the query's spill directory
        time.sleep(0.5)  # into the statement
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert err.splitlines() == [f"interrupted ({sig.name})"] and out == ""
    assert list(spill_root.iterdir()) == []  # the spill directory removed on the way out
    assert _tree(results) == before


@pytest.mark.parametrize("sig, code", SIGNALS, ids=[s.name for s, _ in SIGNALS])
def test_a_signal_ends_the_synthetic_server_with_128_plus_its_number(sig, code):
    proc = subprocess.Popen(
        [sys.executable, "-m", "control_plane.cli", "synthetic-server", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    try:
        assert "listening on" in proc.stdout.readline()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code and err.splitlines() == [f"interrupted ({sig.name})"], err


def test_the_handlers_raise_one_exception_carrying_the_signal_and_are_restored():
    before = {s: signal.getsignal(s) for s in SignalExits.SIGNALS}
    with SignalExits() as signals:
        with pytest.raises(InterruptedBySignalError) as caught:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises here, in the main thread
        assert isinstance(caught.value, KeyboardInterrupt)  # every `except KeyboardInterrupt` clean-up still runs
        assert caught.value.signum == signal.SIGTERM and signals.received == signal.SIGTERM
    assert {s: signal.getsignal(s) for s in SignalExits.SIGNALS} == before
    assert [exit_code_for(s) for s, _ in SIGNALS] == [c for _, c in SIGNALS]


def test_an_ignored_sighup_stays_ignored():
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with SignalExits():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN  # nohup's choice is kept
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, old)
