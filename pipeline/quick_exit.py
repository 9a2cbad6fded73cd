"""Process exit without the interpreter's last full garbage collection.

A process that has imported torch and transformers holds about a million objects; at exit the interpreter's final
collections traverse them all, about 0.6 s after ``import torch`` and 1.1-1.3 s once a model has run, on this
project's 2-core VMs. Every lane, server and probe is such a process, and a run starts dozens of them. Moving the
live objects to the collector's permanent generation as the last exit hook skips that traversal; the hooks still
run (logging's flush among them), files are still closed as their references drop, and the operating system
reclaims the rest. What it gives up: cyclic garbage left at exit is not finalized (nothing here leaves work to it).
"""

from __future__ import annotations

import atexit
import gc

_registered = False


def skip_final_collection() -> None:
    """Register, once, :func:`gc.freeze` as an exit hook. Call it first in ``main`` so that it runs last (exit
    hooks run in reverse order of registration)."""
    global _registered
    if not _registered:
        atexit.register(gc.freeze)
        _registered = True
