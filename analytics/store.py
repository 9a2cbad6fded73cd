"""The result store: one commit protocol, two places (a local directory, S3).

Layout under the root::

    v1/<table>/run_id=<id>/lane=<lane>/<attempt>.parquet
    v1/_commits/run_id=<id>/lane=<lane>/<attempt>.json      (the commit marker, written last)
    models/<run_id>/<model>/<attempt>/...                     (adapters, merged weights)
    logs/<run_id>/<lane>/<attempt>/...                        (server and lane logs)

Rules the base class enforces for both places:

* An attempt's files become visible only when its marker exists; the marker is
  written last, after every file it names. A process killed mid-lane leaves
  files without a marker: invisible, and never cleaned up (append-only).
* Nothing is overwritten: every write is create-only; a second write to an
  existing key raises :class:`AlreadyExistsError`.
* Readers see, for each (run, lane), the latest committed attempt whose marker
  says ``supersedes`` (a resume "skip" is committed but supersedes nothing).
"""
from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import tempfile
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from analytics.schema import LAYOUT_PREFIX, TABLES, conform, empty_table, schema_for

if TYPE_CHECKING:  # pragma: no cover
    from mypy_boto3_s3 import S3Client

COMMITS = "_commits"


class StoreError(Exception):
    """Base class of result-store errors."""


class AlreadyExistsError(StoreError):
    """A create-only write found the key already there (nothing is overwritten)."""


class AttemptClosedError(StoreError):
    """A write or commit after the attempt was committed."""


class ArtifactNotFoundError(StoreError):
    """A file the caller asked for is not in the store."""


def new_attempt_id(now: datetime | None = None) -> str:
    """Sortable attempt id: UTC time to the microsecond, then randomness."""
    now = now or datetime.now(timezone.utc)
    return now.strftime("%Y%m%dT%H%M%S%fZ") + "-" + secrets.token_hex(3)


def _validate_component(name: str, value: str) -> str:
    if not value or "/" in value or value.startswith(".") or "=" in value or any(c.isspace() for c in value):
        raise ValueError(f"invalid {name} {value!r}: use letters, digits, '-', '_' and '.' (no '/', '=', spaces)")
    return value


@dataclass(frozen=True)
class CommitMarker:
    """What the marker file holds: the attempt's outcome and every file it wrote."""

    run_id: str
    lane: str
    attempt: str
    status: str
    supersedes: bool
    tables: dict[str, str] = field(default_factory=dict)  # table -> key of its parquet file
    files: list[str] = field(default_factory=list)  # other keys written by the attempt
    committed_at: str = ""
    schema_version: int = 1

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "CommitMarker":
        raw = json.loads(data)
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})


class ResultStore(ABC):
    """All commit logic; subclasses implement create-only byte I/O on keys."""

    root: str

    # ---- I/O primitives (subclasses) -------------------------------------------------
    @abstractmethod
    def put_bytes(self, key: str, data: bytes) -> None:
        """Create ``key`` with ``data``; raise AlreadyExistsError if it exists. Atomic for readers."""

    @abstractmethod
    def put_file(self, key: str, local_path: Path) -> None:
        """Create ``key`` from a local file (create-only)."""

    @abstractmethod
    def get_bytes(self, key: str) -> bytes:
        """Read ``key``; raise ArtifactNotFoundError if absent."""

    @abstractmethod
    def download(self, key: str, local_path: Path) -> None:
        """Copy ``key`` to a local file."""

    @abstractmethod
    def list_keys(self, prefix: str) -> list[str]:
        """Every key under ``prefix`` (recursive), sorted."""

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def uri(self, key: str) -> str:
        """A URI (local path or s3://) for ``key``."""

    # ---- commit protocol -------------------------------------------------------------
    def begin_attempt(self, run_id: str, lane: str, attempt: str | None = None) -> "AttemptWriter":
        return AttemptWriter(self, _validate_component("run_id", run_id), _validate_component("lane", lane),
                             attempt or new_attempt_id())

    def markers(self, run_id: str | None = None, lane: str | None = None) -> list[CommitMarker]:
        prefix = f"{LAYOUT_PREFIX}/{COMMITS}/"
        if run_id:
            prefix += f"run_id={run_id}/"
            if lane:
                prefix += f"lane={lane}/"
        out = []
        for key in self.list_keys(prefix):
            if key.endswith(".json"):
                out.append(CommitMarker.from_json(self.get_bytes(key)))
        out.sort(key=lambda m: (m.run_id, m.lane, m.attempt))
        return out

    def effective_markers(self, run_ids: Iterable[str] | None = None) -> list[CommitMarker]:
        """For each (run, lane), the latest committed attempt that supersedes earlier ones."""
        wanted = set(run_ids) if run_ids else None
        return _effective([m for m in self.markers() if wanted is None or m.run_id in wanted])

    def latest_committed(self, run_id: str, lane: str) -> CommitMarker | None:
        found = [m for m in self.markers(run_id, lane) if m.supersedes]
        return max(found, key=lambda m: m.attempt) if found else None

    def run_ids(self) -> list[str]:
        return sorted({m.run_id for m in self.markers()})

    def visible_keys(self, table: str, run_ids: Iterable[str] | None = None,
                     markers: list[CommitMarker] | None = None) -> list[str]:
        """Parquet keys of ``table`` that readers see. ``lane_runs`` shows every committed attempt.

        Pass ``markers`` (from one :meth:`markers` call) to resolve many tables with one listing.
        """
        schema_for(table)
        wanted = set(run_ids) if run_ids else None
        every = self.markers() if markers is None else markers
        if wanted is not None:
            every = [m for m in every if m.run_id in wanted]
        chosen = every if table == "lane_runs" else _effective(every)
        return [m.tables[table] for m in chosen if table in m.tables]

    def visible_keys_by_table(self, run_ids: Iterable[str] | None = None) -> dict[str, list[str]]:
        """Every table's visible keys from a single listing of the commit markers."""
        markers = self.markers()
        return {t: self.visible_keys(t, run_ids, markers) for t in sorted(TABLES)}

    def read_table(self, table: str, run_ids: Iterable[str] | None = None,
                   keys: list[str] | None = None) -> pa.Table:
        keys = self.visible_keys(table, run_ids) if keys is None else keys
        parts = [pq.read_table(io.BytesIO(self.get_bytes(k))) for k in keys]
        if not parts:
            return empty_table(table)
        return pa.concat_tables([conform(table, p) for p in parts])


def _effective(markers: Iterable[CommitMarker]) -> list[CommitMarker]:
    latest: dict[tuple[str, str], CommitMarker] = {}
    for m in markers:
        if not m.supersedes:
            continue
        key = (m.run_id, m.lane)
        if key not in latest or m.attempt > latest[key].attempt:
            latest[key] = m
    return sorted(latest.values(), key=lambda m: (m.run_id, m.lane))


class AttemptWriter:
    """Writes one attempt's rows and files, then commits them with a marker written last."""

    def __init__(self, store: ResultStore, run_id: str, lane: str, attempt: str):
        self.store = store
        self.run_id = run_id
        self.lane = lane
        self.attempt = attempt
        self._tables: dict[str, list[pa.Table]] = {}
        self._failure_records: dict[str, list[pa.Table]] = {}  # batches a failed attempt keeps
        self._files: list[str] = []
        self._committed = False

    @property
    def keys(self) -> dict[str, str]:
        return {"run_id": self.run_id, "lane": self.lane, "attempt": self.attempt}

    def _check_open(self) -> None:
        if self._committed:
            raise AttemptClosedError(f"attempt {self.attempt} of {self.run_id}/{self.lane} is already committed")

    def add_rows(self, table: str, rows: pa.Table | Iterable[Mapping[str, Any]],
                 failure_record: bool = False) -> int:
        """Validate rows now (fail fast, naming table and column); they are written at commit.

        ``failure_record``: the rows stand even if the attempt fails (see :meth:`keep_failure_records`).
        """
        self._check_open()
        t = conform(table, rows, defaults=self.keys)
        self._tables.setdefault(table, []).append(t)
        if failure_record:
            self._failure_records.setdefault(table, []).append(t)
        return t.num_rows

    def keep_failure_records(self, tables: Iterable[str] = ()) -> None:
        """A failed attempt: drop every staged row except whole ``tables`` and batches added as failure
        records, so no success-shaped row is committed. Uploaded files stay named (they exist)."""
        self._check_open()
        whole = set(tables)
        self._tables = {t: (parts if t in whole else self._failure_records.get(t, []))
                        for t, parts in self._tables.items()}
        self._tables = {t: parts for t, parts in self._tables.items() if parts}

    def table_key(self, table: str) -> str:
        return f"{LAYOUT_PREFIX}/{table}/run_id={self.run_id}/lane={self.lane}/{self.attempt}.parquet"

    def model_key(self, model: str, relpath: str) -> str:
        """``models/<run_id>/<model>/<attempt>/<relpath>``: the attempt level keeps a retry after a kill
        from colliding with the killed attempt's orphaned uploads (nothing is ever overwritten)."""
        return f"models/{self.run_id}/{model}/{self.attempt}/{relpath}"

    def log_key(self, relpath: str) -> str:
        return f"logs/{self.run_id}/{self.lane}/{self.attempt}/{relpath}"

    def add_file(self, key: str, local_path: Path) -> str:
        """Upload a file now (create-only) and name it in the marker. Returns its URI."""
        self._check_open()
        self.store.put_file(key, Path(local_path))
        self._files.append(key)
        return self.store.uri(key)

    def add_tree(self, key_prefix: str, local_dir: Path) -> list[str]:
        local_dir = Path(local_dir)
        keys = []
        for p in sorted(local_dir.rglob("*")):
            if p.is_file():
                key = f"{key_prefix.rstrip('/')}/{p.relative_to(local_dir).as_posix()}"
                self.add_file(key, p)
                keys.append(key)
        return keys

    def commit(self, status: str, supersedes: bool = True) -> CommitMarker:
        """Write every table's parquet file, then the marker. Only now do readers see the attempt."""
        self._check_open()
        if status not in ("succeeded", "failed", "skipped"):
            raise ValueError(f"invalid lane status {status!r}: succeeded | failed | skipped")
        written: dict[str, str] = {}
        for table in sorted(self._tables):
            data = pa.concat_tables(self._tables[table])
            buf = io.BytesIO()
            pq.write_table(data, buf, compression="zstd")
            key = self.table_key(table)
            self.store.put_bytes(key, buf.getvalue())
            written[table] = key
        marker = CommitMarker(run_id=self.run_id, lane=self.lane, attempt=self.attempt, status=status,
                              supersedes=supersedes, tables=written, files=list(self._files),
                              committed_at=datetime.now(timezone.utc).isoformat())
        self.store.put_bytes(f"{LAYOUT_PREFIX}/{COMMITS}/run_id={self.run_id}/lane={self.lane}/{self.attempt}.json",
                             marker.to_json())
        self._committed = True
        return marker


class LocalStore(ResultStore):
    """A directory on this machine."""

    def __init__(self, root: str | os.PathLike[str]):
        self.path = Path(root).expanduser().resolve()
        self.root = str(self.path)

    def _p(self, key: str) -> Path:
        p = (self.path / key).resolve()
        if self.path not in p.parents:
            raise ValueError(f"key {key!r} escapes the store root")
        return p

    def _create(self, key: str, write: Callable[[Any], None]) -> None:
        """Write into a temp file beside the destination, then link it into place: create-only and atomic."""
        dest = self._p(key)
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=dest.parent)
        try:
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
        base = self.path / prefix
        start = base if base.is_dir() else base.parent
        if not start.exists():
            return []
        out = []
        for p in start.rglob("*"):
            if p.is_file() and not p.name.startswith(".tmp-"):
                key = p.relative_to(self.path).as_posix()
                if key.startswith(prefix):
                    out.append(key)
        return sorted(out)

    def exists(self, key: str) -> bool:
        return self._p(key).exists()

    def uri(self, key: str) -> str:
        return str(self._p(key))


class S3Store(ResultStore):
    """``s3://bucket/prefix`` through boto3 (client injected; created only when absent)."""

    def __init__(self, uri: str, client: "S3Client | None" = None):
        if not uri.startswith("s3://"):
            raise ValueError(f"not an s3:// URI: {uri!r}")
        rest = uri[5:]
        self.bucket, _, prefix = rest.partition("/")
        self.prefix = prefix.strip("/")
        self.root = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        if client is None:
            import boto3

            client = boto3.client("s3")
        self.client = client

    def _k(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def put_bytes(self, key: str, data: bytes) -> None:
        from botocore.exceptions import ClientError

        try:
            # Conditional create (S3 If-None-Match): the service refuses to overwrite.
            self.client.put_object(Bucket=self.bucket, Key=self._k(key), Body=data, IfNoneMatch="*")
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise AlreadyExistsError(f"{self.uri(key)} exists; results are never overwritten") from exc
            raise

    def put_file(self, key: str, local_path: Path) -> None:
        if self.exists(key):
            raise AlreadyExistsError(f"{self.uri(key)} exists; results are never overwritten")
        self.client.upload_file(str(local_path), self.bucket, self._k(key))

    def get_bytes(self, key: str) -> bytes:
        from botocore.exceptions import ClientError

        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._k(key))["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise ArtifactNotFoundError(f"{self.uri(key)} not found") from exc
            raise

    def download(self, key: str, local_path: Path) -> None:
        local_path = Path(local_path)
        local_path.parent.mkdir(parents=True, exist_ok=True)
        if not self.exists(key):
            raise ArtifactNotFoundError(f"{self.uri(key)} not found")
        self.client.download_file(self.bucket, self._k(key), str(local_path))

    def list_keys(self, prefix: str) -> list[str]:
        out = []
        strip = len(self.prefix) + 1 if self.prefix else 0
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self._k(prefix)):
            for obj in page.get("Contents", []):
                out.append(obj["Key"][strip:])
        return sorted(out)

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._k(key))
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._k(key)}"


def open_store(uri: str | os.PathLike[str], s3_client: Any = None) -> ResultStore:
    """A local directory path or an ``s3://bucket/prefix`` URI."""
    text = str(uri)
    if text.startswith("s3://"):
        return S3Store(text, client=s3_client)
    return LocalStore(text)
