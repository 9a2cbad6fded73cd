"""Copy every object under an S3 prefix into a local directory: the one loop the box's fetches share (a workload's
dataset directory, a LoRA adapter directory, an accuracy task's dataset copy)."""
from __future__ import annotations

from pathlib import Path
from typing import Any


def download_prefix(client: Any, bucket: str, prefix: str, dest: Path) -> int:
    """Download ``s3://bucket/prefix*`` to ``dest/<key relative to prefix>``; returns the number of objects copied
    (0: none under the prefix; the caller words that). The prefix's own "directory" markers (keys ending in ``/``)
    are skipped; a key that would land outside ``dest`` (a ``..`` part) raises ValueError naming it. S3 errors
    propagate for the caller to word."""
    count = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(prefix):]
            if not rel or rel.endswith("/"):
                continue
            if ".." in Path(rel).parts:
                raise ValueError(f"s3://{bucket}/{obj['Key']}: the key leaves the directory it is copied into")
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, obj["Key"], str(target))
            count += 1
    return count
