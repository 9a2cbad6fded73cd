"""Atomic output files: written to a temp name beside the destination, then renamed over it.

A failure part-way (a full disk, a kill) leaves the previous file whole and at most a
``.tmp-*`` file beside it; a reader never sees half a file. Used for REPORT.md,
comparison.json, the plots, the DuckDB file of ``pull`` and loadgen's ``--save-vllm-json``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

OUTPUT_MODE = 0o644


def write_atomic(path: str | os.PathLike[str], data: bytes | str, encoding: str = "utf-8") -> Path:
    """Replace ``path`` with ``data`` in one step; return the path."""
    body = data.encode(encoding) if isinstance(data, str) else data
    return write_atomic_with(path, lambda fh: fh.write(body))


def write_atomic_with(path: str | os.PathLike[str], write: Callable[[IO[bytes]], object]) -> Path:
    """Like :func:`write_atomic`, with ``write(fh)`` producing the bytes (e.g. matplotlib's ``savefig``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{path.name}-", dir=path.parent)
    try:
        os.fchmod(fd, OUTPUT_MODE)
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
