"""The result store: one commit protocol (:mod:`.base`), two places (:mod:`.local`, :mod:`.s3`), the integrity
checks readers apply (:mod:`.integrity`), commit markers (:mod:`.markers`) and ``neuronpipe verify``
(:mod:`.verify`). The factory lives here; see docs/reference/results-store.md."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from analytics.store.base import FILE_MODE, AttemptWriter, ObjectInfo, ResultStore, new_attempt_id, validate_component
from analytics.store.local import LocalStore
from analytics.store.markers import (
    COMMITS,
    QUARANTINE,
    SEQUENCES,
    AlreadyExistsError,
    ArtifactNotFoundError,
    AttemptClosedError,
    CommitMarker,
    MarkerError,
    StoreError,
    StoreNotFoundError,
    attempt_order,
)
from analytics.store.s3 import S3Store

__all__ = [
    "COMMITS",
    "QUARANTINE",
    "SEQUENCES",
    "FILE_MODE",
    "AlreadyExistsError",
    "ArtifactNotFoundError",
    "AttemptClosedError",
    "CommitMarker",
    "MarkerError",
    "StoreError",
    "StoreNotFoundError",
    "ResultStore",
    "LocalStore",
    "S3Store",
    "AttemptWriter",
    "ObjectInfo",
    "open_store",
    "open_existing_store",
    "new_attempt_id",
    "attempt_order",
    "validate_component",
]


def open_existing_store(uri: str | os.PathLike[str], s3_client: Any = None) -> ResultStore:
    """Like :func:`open_store`, for readers: a local root must exist and be a directory (a typo is not an
    empty store). :class:`StoreNotFoundError` names the path."""
    text = str(uri)
    if not text.strip():
        raise StoreNotFoundError("the results root is empty: give a directory or s3://bucket/prefix")
    if text.startswith("s3://"):
        if not text[5:].split("/", 1)[0]:
            raise StoreNotFoundError(f"{text!r} names no bucket: use s3://bucket/prefix")
        return S3Store(text, client=s3_client)
    if "://" in text:
        raise StoreNotFoundError(f"{text!r}: only local directories and s3:// URIs are results stores")
    path = Path(text).expanduser()
    if not path.exists():
        raise StoreNotFoundError(f"results store {text} does not exist")
    if not path.is_dir():
        raise StoreNotFoundError(f"results store {text} is not a directory")
    return LocalStore(path)


def open_store(uri: str | os.PathLike[str], s3_client: Any = None) -> ResultStore:
    """A local directory path or an ``s3://bucket/prefix`` URI."""
    text = str(uri)
    if text.startswith("s3://"):
        return S3Store(text, client=s3_client)
    return LocalStore(text)
