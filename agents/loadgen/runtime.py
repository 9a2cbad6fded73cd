"""Event loop plumbing shared by the client and the synthetic server (uvloop when available)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


def raise_fd_limit() -> None:
    """Lift the soft open-file limit to the hard one: 1,024 streams need more than the usual default."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))
    except (ImportError, ValueError, OSError):
        pass


def loop_kind() -> str:
    try:
        import uvloop  # noqa: F401 - imported to learn whether it is installed

        return "uvloop"
    except ImportError:
        return "asyncio"


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a fresh uvloop (or the default loop where uvloop is absent)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "the load generator runs its own event loop; call it from synchronous code "
            "(or await the async API inside a running loop)"
        )
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


@contextmanager
def quiet_gc(threshold0: int = 50_000) -> Iterator[None]:
    """During a measured phase: freeze what exists (gen-2 passes skip it) and collect less often, so a
    collection pause does not land on a chunk's receive stamp. Restored afterwards. The young generations are
    collected before the freeze, not the whole heap: with torch and transformers loaded a full pass takes 0.2-0.5 s
    on 2 cores at every point, and what it would find in the old generation is frozen like the rest (scanned by no
    pass during the phase, collected by the ordinary passes after it)."""
    old = gc.get_threshold()
    gc.collect(1)
    gc.freeze()
    gc.set_threshold(threshold0, old[1], old[2])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
