"""Where a local path stands with respect to results stores: the one test every writer applies.

A directory is a results store when it holds the identity file (:data:`IDENTITY`, written with a store's first
byte) or, for stores written before that file existed, any of the commit protocol's bookkeeping folders
(``v1/_commits``, ``v1/_seq``, ``v1/_quarantine``). :func:`store_relation` says whether a path *is* a store,
is *inside* one (some folder above it is a store), *contains* one (a store below it, searched
:data:`SEARCH_DEPTH` folders deep, at most :data:`SEARCH_DIRS` folders), or is *unrelated*.

Rule 16 (the store protects itself): nothing but a store's own commit protocol writes inside it. A writer
whose target is a store (``run --results``, ``import --results``, ``pull --to``, ``loadgen --results``) may
name a store or a new directory, never a path inside or enclosing another store; a writer of other files
(``report --out``, ``--save-vllm-json``, ``pull --duckdb``) may name none of them. :func:`overlap_problem`
is that rule as one line of text (None when the path is fine).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Literal

from analytics.store.markers import COMMITS, QUARANTINE, SEQUENCES, StoreError

IDENTITY = "neuronpipe-store"  # JSON inside; no .json suffix (a glob for markers must not meet it)
LAYOUT = "v1"
BOOKKEEPING = (COMMITS, SEQUENCES, QUARANTINE)
SEARCH_DEPTH = 4  # folders below a path searched for a store it would enclose
SEARCH_DIRS = 5000  # at most this many folders looked at (a home directory must not stall a command)
_SKIPPED = {"__pycache__", "node_modules"}  # and every hidden folder (.git, .venv): no store lives there
Target = Literal["store", "directory", "file"]


class Relation(str, Enum):
    IS_STORE = "is a store"
    INSIDE = "inside a store"
    CONTAINS = "contains a store"
    UNRELATED = "unrelated"


class StoreOverlapError(StoreError):
    """A write aimed inside, at or around a results store that the commit protocol does not own."""


@dataclass(frozen=True)
class Located:
    kind: Relation
    store_root: Path | None  # the store the path is, is inside, or contains (None: unrelated)


def is_store_root(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a results store's root (see the module docstring)."""
    p = Path(path)
    if (p / IDENTITY).is_file():
        return True
    return any((p / LAYOUT / name).is_dir() for name in BOOKKEEPING)


def write_identity(root: Path) -> None:
    """Create the identity file of a store at ``root`` unless it exists (create-only, atomic)."""
    dest = root / IDENTITY
    if dest.exists():
        return
    body = (
        json.dumps(
            {
                "kind": "neuronpipe results store",
                "layout": LAYOUT,
                "created_at": datetime.now(timezone.utc).isoformat(),
            },
            sort_keys=True,
            indent=1,
        )
        + "\n"
    )
    root.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=root)
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w") as fh:
            fh.write(body)
        os.link(tmp, dest)
    except FileExistsError:
        pass  # another writer made it first: same content but for the time
    finally:
        os.unlink(tmp)


def _absolute(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.abspath(Path(path).expanduser())).resolve(strict=False)


def find_store_below(
    path: str | os.PathLike[str], depth: int = SEARCH_DEPTH, max_dirs: int = SEARCH_DIRS
) -> Path | None:
    """The first store root strictly below ``path`` (breadth first, symlinks not followed), or None."""
    top = _absolute(path)
    level, seen = [top], 0
    for _ in range(depth):
        below: list[Path] = []
        for folder in level:
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False) or entry.name.startswith(".") or entry.name in _SKIPPED:
                    continue
                child = Path(entry.path)
                if is_store_root(child):
                    return child
                seen += 1
                if seen >= max_dirs:
                    return None
                below.append(child)
        level = below
    return None


def store_relation(path: str | os.PathLike[str], stores: Iterable[str | os.PathLike[str] | None] = ()) -> Located:
    """``path``'s relation to results stores: inside one (checked first: a nested store is inside its
    parent), is one, contains one, or unrelated. ``stores``: roots to treat as stores although they may
    not exist yet (the store a command is about to create)."""
    p = _absolute(path)
    extra = [_absolute(s) for s in stores if s and not str(s).startswith("s3://")]
    for parent in p.parents:
        if parent in extra or is_store_root(parent):
            return Located(Relation.INSIDE, parent)
    if p.is_dir() and is_store_root(p):
        return Located(Relation.IS_STORE, p)
    for s in extra:
        if p in s.parents:
            return Located(Relation.CONTAINS, s)
    found = find_store_below(p) if p.is_dir() else None
    if found:
        return Located(Relation.CONTAINS, found)
    return Located(Relation.IS_STORE, p) if p in extra else Located(Relation.UNRELATED, None)


def overlap_problem(
    path: str | os.PathLike[str] | None, flag: str, target: Target, stores: Iterable[str | os.PathLike[str] | None] = ()
) -> str | None:
    """Rule 16 for one command-line path, as the one line to print, or None when the path may be written.

    ``target``: ``store`` (the path becomes or is a store: a store or a new directory is fine), ``directory``
    (a folder of other outputs) or ``file`` (one output file: its folder is judged)."""
    if path is None or not str(path).strip() or str(path).startswith("s3://"):
        return None
    where = Path(path).expanduser().parent if target == "file" else path
    found = store_relation(where, stores)
    root = found.store_root
    if found.kind is Relation.INSIDE or (found.kind is Relation.IS_STORE and target == "file"):
        return (
            f"{flag} {path} is inside the results store {root}: only that store's commit protocol writes "
            "there; give a path outside it"
        )
    if found.kind is Relation.IS_STORE and target == "directory":
        return f"{flag} {path} is the results store {root}: give a directory outside it"
    if found.kind is Relation.CONTAINS and target != "file":
        return (
            f"{flag} {path} contains the results store {root}: give "
            + ("that store itself or " if target == "store" else "")
            + "a directory that holds no store"
        )
    return None


def refuse_overlap(
    path: str | os.PathLike[str] | None, flag: str, target: Target, stores: Iterable[str | os.PathLike[str] | None] = ()
) -> None:
    """:func:`overlap_problem` as :class:`StoreOverlapError`."""
    problem = overlap_problem(path, flag, target, stores)
    if problem:
        raise StoreOverlapError(problem)


def holds_store(store: object) -> bool:
    """Whether an opened store (local or S3) holds a results store at its root (any place; by its keys)."""
    keys = store.list_keys
    return bool(store.exists(IDENTITY) or any(keys(f"{LAYOUT}/{b}/") for b in BOOKKEEPING))


def verify_target_problem(store: object, uri: str) -> tuple[str | None, Path | None]:
    """(why ``verify`` refuses ``uri``, or None; the store it sits inside when it is a nested store)."""
    path = getattr(store, "path", None)
    if path is None:
        return (
            None
            if holds_store(store)
            else f"{uri} is not a results store (nothing under {LAYOUT}/{COMMITS}, {LAYOUT}/{SEQUENCES} or {IDENTITY})"
        ), None
    found = store_relation(path)
    if found.kind is Relation.INSIDE:
        if is_store_root(path):
            return None, found.store_root
        return f"{uri} is inside the results store {found.store_root}, not a store itself: verify that", None
    if found.kind is Relation.CONTAINS:
        return f"{uri} is not a results store (it contains one: {found.store_root})", None
    if found.kind is Relation.UNRELATED:
        return (f"{uri} is not a results store (no {IDENTITY}, {LAYOUT}/{COMMITS} or {LAYOUT}/{SEQUENCES} in it)"), None
    return None, None
