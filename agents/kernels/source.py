"""Where the nki lane's kernels come from: the bundled directory, a local directory, or an s3:// prefix copied into
the lane's work directory (through the contained download every box fetch uses), then read and checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.containment import PathEscapeError
from pipeline.kernels import KernelSpec, KernelSpecError, read_kernel_dir
from pipeline.lane_configs.nki import BUNDLED_KERNELS


def kernel_directory(kernel_dir: str | None, dest: Path, client: Any = None) -> Path:
    """The local directory of ``kernel_dir`` (None: the bundled one); an s3:// prefix is copied under ``dest``
    first. A prefix with no objects, or a key that would land outside ``dest``: :class:`KernelSpecError`."""
    if kernel_dir is None:
        return BUNDLED_KERNELS
    if not kernel_dir.startswith("s3://"):
        return Path(kernel_dir)
    bucket, _, prefix = kernel_dir[len("s3://") :].partition("/")
    prefix = prefix.rstrip("/") + "/" if prefix else ""
    if client is None:
        import boto3

        client = boto3.client("s3")
    from agents.s3_prefix import download_prefix

    out = dest / "kernels"
    try:
        found = download_prefix(client, bucket, prefix, out)
    except PathEscapeError as exc:
        raise KernelSpecError(f"{kernel_dir}: kernel_dir: {exc}") from None
    if found == 0:
        raise KernelSpecError(f"{kernel_dir}: kernel_dir: no objects under this prefix")
    return out


def load_specs(kernel_dir: str | None, names: list[str] | None, dest: Path, client: Any = None) -> list[KernelSpec]:
    """The kernels to run, checked (the plan checked a local directory already; an s3:// one is checked here)."""
    return read_kernel_dir(kernel_directory(kernel_dir, dest, client), names)
