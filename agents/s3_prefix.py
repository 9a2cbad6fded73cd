"""Copy every object under an S3 prefix into a local directory: the one loop the box's fetches share (a workload's
dataset directory, a LoRA adapter directory, an accuracy task's dataset copy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.containment import PathEscapeError, contained


def download_prefix(client: Any, bucket: str, prefix: str, dest: Path) -> int:
    """Download ``s3://bucket/prefix*`` to ``dest/<key relative to prefix>``; returns the number of objects copied
    (0: none under the prefix; the caller words that). The prefix's own "directory" markers (keys ending in ``/``)
    are skipped. Every key is checked before the first is copied: one whose part after the prefix is not a plain
    relative name (:func:`pipeline.containment.contained`: absolute, as ``prefix//x`` makes it, an empty, ``.`` or
    ``..`` part, a NUL) raises PathEscapeError (a ValueError) naming it, and nothing is written. S3 errors
    propagate for the caller to word."""
    planned: list[tuple[str, Path]] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(prefix) :]
            if not rel or rel.endswith("/"):
                continue
            try:
                planned.append((obj["Key"], contained(dest, rel)))
            except PathEscapeError as exc:
                raise PathEscapeError(
                    f"s3://{bucket}/{obj['Key']}: the key leaves the directory it is copied into ({exc})"
                ) from exc
    for key, target in planned:
        target.parent.mkdir(parents=True, exist_ok=True)
        client.download_file(bucket, key, str(target))
    return len(planned)
