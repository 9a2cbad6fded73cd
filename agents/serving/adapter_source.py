"""A PEFT adapter handed in from outside a run (the S3 ``adapters/`` trigger): fetched, hashed, unpacked.

``uri`` is a ``.tar.gz``/``.tgz`` archive of an adapter directory, or a directory (a local path or an
``s3://bucket/prefix/`` ending in ``/``). An archive is unpacked only when every member is a plain file or
directory whose name lands inside the unpack directory (:func:`archive_members`); a link of either kind, a device
or a FIFO, an absolute name or a ``..`` refuses it whole, one line naming the member, before anything is written,
and tarfile's ``data`` filter still guards the extraction itself. The base model is the catalogue model named by
the key's first component under ``adapters/`` (``adapters/<model>/<name>.tar.gz``) when it is one, else the lane's
first model.
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pipeline.containment import PathEscapeError, contained

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")


class AdapterSourceError(ValueError):
    """The adapter URI cannot be fetched or holds no adapter."""


def _s3_download(uri: str, dest: Path, client: Any = None) -> Path:
    if client is None:
        import boto3

        client = boto3.client("s3")
    parsed = urlparse(uri)
    bucket, key = parsed.netloc, parsed.path.lstrip("/")
    if key.endswith("/") or not key:
        from agents.s3_prefix import download_prefix

        out = dest / "adapter"
        try:
            found = download_prefix(client, bucket, key, out)
        except ValueError as exc:
            raise AdapterSourceError(str(exc)) from exc
        if not found:
            raise AdapterSourceError(f"no objects under {uri}")
        return out
    try:
        target = contained(dest, key.rsplit("/", 1)[-1])
    except PathEscapeError as exc:
        raise AdapterSourceError(f"{uri}: the key names no file to download ({exc})") from exc
    try:
        client.download_file(bucket, key, str(target))
    except Exception as exc:  # botocore ClientError: 404/403 with the service's words
        raise AdapterSourceError(f"cannot download {uri}: {exc}") from exc
    return target


def _member_refusal(member: tarfile.TarInfo, out: Path) -> str | None:
    """Why ``member`` may not be unpacked into ``out`` (None: a plain file or directory that lands inside)."""
    if member.issym():
        return f"a symbolic link (to {member.linkname!r}); adapter archives hold no links"
    if member.islnk():
        return f"a hard link (to {member.linkname!r}); adapter archives hold no links"
    if member.isdev():
        return "a device or FIFO"
    if not (member.isfile() or member.isdir()):
        return f"not a plain file or directory (tar type {member.type!r})"
    name = member.name
    while name.startswith("./"):
        name = name[2:]  # `tar -C adapter -czf a.tgz .` names its members ./...: the archive's own root
    if name in ("", "."):
        return None if member.isdir() else "a file named for the directory itself"
    try:
        contained(out, name.rstrip("/") if member.isdir() else name)
    except PathEscapeError as exc:
        return str(exc)
    return None


def archive_members(tar: tarfile.TarFile, out: Path, uri: str) -> list[tarfile.TarInfo]:
    """Every member of ``tar``, each checked before any is written; AdapterSourceError names the first refused."""
    members = tar.getmembers()
    for member in members:
        why = _member_refusal(member, out)
        if why is not None:
            raise AdapterSourceError(f"adapter archive {uri}: member {member.name!r} is refused: {why}")
    return members


def fetch_adapter(uri: str, dest: Path, s3_client: Any = None) -> Path:
    """The adapter as a local directory (downloaded and unpacked as needed)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if uri.startswith("s3://"):
        local = _s3_download(uri, dest, s3_client)
    else:
        local = Path(uri).expanduser()
        if not local.exists():
            raise AdapterSourceError(f"adapter {uri} does not exist")
    if local.is_file():
        if not local.name.endswith(ARCHIVE_SUFFIXES):
            raise AdapterSourceError(
                f"adapter {uri}: expected a directory or a {' / '.join(ARCHIVE_SUFFIXES)} archive of one"
            )
        out = dest / "unpacked"
        try:
            with tarfile.open(local, "r:gz") as tar:
                tar.extractall(out, members=archive_members(tar, out, uri), filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise AdapterSourceError(f"adapter archive {uri} cannot be unpacked: {exc}") from exc
        return out
    if not uri.startswith("s3://"):
        out = dest / "adapter"
        shutil.copytree(local, out, dirs_exist_ok=True)
        return out
    return local


def base_model_for(uri: str, known: list[str], default: str) -> str:
    """``adapters/<model>/...`` names the base model when <model> is a catalogue name."""
    path = urlparse(uri).path if uri.startswith("s3://") else uri
    parts = [p for p in path.split("/") if p]
    if "adapters" in parts:
        i = parts.index("adapters")
        if i + 1 < len(parts) and parts[i + 1] in known:
            return parts[i + 1]
    return default
