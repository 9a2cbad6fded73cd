"""The one way the CLI builds a rich console: whole lines off a terminal, the terminal's width on one.

Off a terminal (a pipe, a file, a CI log, a test's subprocess) nothing is wrapped, cropped or ellipsised: the
console is far wider and taller than any line or table it prints (``COLUMNS`` / ``LINES`` do not narrow it),
and it prints plain text with no colours or cursor codes, so a path or a table cell survives copy-paste, ``grep``
and ``tail`` whole. On a terminal tables fit the terminal's width; plain lines are soft-wrapped (the terminal
folds them for display, a copy still gets one line).
"""

from __future__ import annotations

import sys
from typing import IO

from rich.console import Console

#: Width and height of a console off a terminal: larger than any line the CLI prints, so nothing is cut. Rich
#: pads nothing the CLI prints to the console's width, so the size costs nothing.
OFF_TTY_SIZE = 1_000_000


def stream_is_terminal(stream: IO[str] | None) -> bool:
    """Whether ``stream`` is a terminal (a closed or odd stream is not)."""
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def make_console(stderr: bool = False, file: IO[str] | None = None) -> Console:
    """A console on stdout (``stderr=True``: stderr; ``file``: that stream) that never wraps or cuts off a terminal.

    The stream is looked up when printing, as rich's own default does, so a redirected ``sys.stdout`` is honoured."""
    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    if stream_is_terminal(stream):
        return Console(stderr=stderr, file=file, soft_wrap=True)
    return Console(
        stderr=stderr,
        file=file,
        soft_wrap=True,
        width=OFF_TTY_SIZE,
        height=OFF_TTY_SIZE,
        force_terminal=False,
        no_color=True,
    )
