"""The result store in a local directory: create-only writes by linking a finished temp file into place."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from analytics.store.base import FILE_MODE, ObjectInfo, ResultStore, _sha256_stream
from analytics.store.markers import AlreadyExistsError, ArtifactNotFoundError


class LocalStore(ResultStore):
    """A directory on this machine."""

    def __init__(self, root: str | os.PathLike[str]):
        self.path = Path(root).expanduser().resolve()
        self.root = str(self.path)
        self._claimed = False  # the first write checks where the root is and marks it a store

    def _claim_root(self) -> None:
        """Before the first write: refuse a root inside or around another store (rule 16, one line naming
        it), then lay down the identity file that marks this root a store (``analytics.store.locate``)."""
        if self._claimed:
            return
        from analytics.store.locate import refuse_overlap, write_identity

        refuse_overlap(self.path, "results root", "store")
        write_identity(self.path)
        self._claimed = True

    def _p(self, key: str) -> Path:
        p = (self.path / key).resolve()
        if self.path not in p.parents:
            raise ValueError(f"key {key!r} escapes the store root")
        return p

    def _create(self, key: str, write: Callable[[Any], None]) -> None:
        """Write into a temp file beside the destination, then link it into place: create-only and atomic."""
        dest = self._p(key)
        self._claim_root()
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=dest.parent)
        try:
            os.fchmod(fd, FILE_MODE)  # mkstemp makes 0600; committed results are for the group to read
            with os.fdopen(fd, "wb") as fh:
                write(fh)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.link(tmp, dest)  # fails if dest exists
            except FileExistsError:
                raise AlreadyExistsError(f"{dest} exists; results are never overwritten") from None
        finally:
            os.unlink(tmp)

    def put_bytes(self, key: str, data: bytes) -> None:
        self._create(key, lambda fh: fh.write(data))

    def put_file(self, key: str, local_path: Path) -> None:
        """Streamed, not read into memory: merged weights run to many GB."""

        def copy(fh: Any) -> None:
            with open(local_path, "rb") as src:
                shutil.copyfileobj(src, fh, 16 * 2**20)

        self._create(key, copy)

    def get_bytes(self, key: str) -> bytes:
        try:
            return self._p(key).read_bytes()
        except FileNotFoundError:
            raise ArtifactNotFoundError(f"{self._p(key)} not found") from None

    def download(self, key: str, local_path: Path) -> None:
        local_path = Path(local_path)
        local_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(self._p(key), local_path)
        except FileNotFoundError:
            raise ArtifactNotFoundError(f"{self._p(key)} not found") from None

    def list_keys(self, prefix: str) -> list[str]:
        return [o.key for o in self.objects(prefix) if not o.temp]

    def exists(self, key: str) -> bool:
        return self._p(key).exists()

    def size_of(self, key: str) -> int | None:
        p = self._p(key)
        return p.stat().st_size if p.is_file() else None

    def uri(self, key: str) -> str:
        return str(self._p(key))

    def objects(self, prefix: str = "") -> list[ObjectInfo]:
        base = self.path / prefix
        start = base if base.is_dir() else base.parent
        if not start.exists():
            return []
        out = []
        for p in start.rglob("*"):
            if not p.is_file():
                continue
            key = p.relative_to(self.path).as_posix()
            if key.startswith(prefix):
                try:
                    st = p.stat()
                except FileNotFoundError:  # a concurrent writer renamed its temp file (or a repair removed one)
                    continue
                out.append(ObjectInfo(key, st.st_size, st.st_mtime, temp=p.name.startswith(".tmp-")))
        return sorted(out, key=lambda o: o.key)

    def sha256(self, key: str) -> str:
        try:
            with self._p(key).open("rb") as fh:
                return _sha256_stream(fh)
        except FileNotFoundError:
            raise ArtifactNotFoundError(f"{self._p(key)} not found") from None

    def remove_leftover(self, key: str) -> None:
        """Delete one uncommitted leftover (``verify --repair`` only; it checks no marker names the key).
        Bookkeeping (markers, sequence claims, quarantine records, any store's) is never removed here."""
        from analytics.store.locate import BOOKKEEPING, IDENTITY

        parts = key.split("/")
        temp = parts[-1].startswith(".tmp-")  # an unfinished create, wherever it is, is no one's record
        if not temp and (any(part in BOOKKEEPING for part in parts) or parts[-1] == IDENTITY):
            raise ValueError(f"{key!r} is store bookkeeping: verify --repair never removes it")
        self._p(key).unlink(missing_ok=True)
