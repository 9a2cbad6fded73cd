"""`neuronpipe`: one entry point for a person.

Each subcommand lives in its own module under ``control_plane.commands`` with
``register(subparsers)``, which adds its parser and sets ``func(args) -> int``.
Heavy imports happen inside ``func``, so ``neuronpipe --help`` stays fast.
A signal ends a command with 128 + its number once its clean-up has run: SIGINT 130, SIGTERM 143, SIGHUP 129.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import threading
from types import FrameType
from typing import Any

COMMAND_MODULES = [
    "control_plane.commands.lanes",
    "control_plane.commands.run",
    "control_plane.commands.query",
    "control_plane.commands.report",
    "control_plane.commands.compare",
    "control_plane.commands.pull",
    "control_plane.commands.demo",
    "control_plane.commands.plan",
    "control_plane.commands.schema",
    "control_plane.commands.status",
    "control_plane.commands.loadgen",
    "control_plane.commands.synthetic_server",
    "control_plane.commands.verify",
    "control_plane.commands.import_cmd",
    "control_plane.commands.trend",
]
# Commands that live with an optional package (registered when it is installed): the rehearsal is its own
# top-level package, and its command lives inside it.
OPTIONAL_COMMAND_MODULES = [
    "rehearsal.command",
]


def _optional(module: str) -> bool:
    try:
        importlib.import_module(module)
        return True
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return False
        raise


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="neuronpipe", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    for module in OPTIONAL_COMMAND_MODULES:
        if _optional(module):
            importlib.import_module(module).register(sub)
    return parser


class InterruptedBySignalError(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP arrived: raised in the main thread wherever it is, so every ``finally`` and
    every ``except KeyboardInterrupt`` clean-up runs (a lane's process group stopped, a temporary directory
    removed); the CLI then exits 128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code_for(signum: int) -> int:
    """The shell's convention: 128 + the signal's number (SIGINT 130, SIGTERM 143, SIGHUP 129)."""
    return 128 + int(signum)


class SignalExits:
    """While the command runs, :data:`SIGNALS` raise :class:`InterruptedBySignalError`; the first one received
    is kept (``received``), so the exit code follows the signal even when a library turns the exception into
    its own (DuckDB: ``RuntimeError: Query interrupted``) or a command treats the interrupt as a normal end.
    A signal that is ignored when the command starts (``nohup``'s SIGHUP) stays ignored; the old handlers are
    restored on exit (the CLI also runs in-process, in tests)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.received: int | None = None
        self._old: dict[int, Any] = {}

    def _raise(self, signum: int, _frame: FrameType | None) -> None:
        from control_plane.interrupts import stop_registered_work

        if self.received is None:
            self.received = signum
        stop_registered_work()  # native work told to stop too: the exception below may not reach it
        raise InterruptedBySignalError(signum)

    def __enter__(self) -> SignalExits:
        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                if signal.getsignal(s) is not signal.SIG_IGN:
                    self._old[s] = signal.signal(s, self._raise)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)


def _interrupted(signum: int) -> int:
    print(f"interrupted ({signal.Signals(signum).name})", file=sys.stderr)
    return exit_code_for(signum)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    with SignalExits() as signals:
        try:
            code = int(args.func(args) or 0)
        except KeyboardInterrupt as exc:
            signum = getattr(exc, "signum", None) or signals.received or signal.SIGINT
        except BaseException:
            if signals.received is None:
                raise
            signum = signals.received  # the interrupt came back as a library's own error
        else:
            signum = signals.received  # None, or the command took the interrupt as its end (a server stopping)
    return code if signum is None else _interrupted(signum)


if __name__ == "__main__":
    sys.exit(main())
