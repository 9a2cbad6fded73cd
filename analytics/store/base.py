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
  "Latest" is the attempt's sequence number claimed at begin, not a clock
  (``analytics.store.markers.attempt_order``).
* Each marker records every file's size and SHA-256 (Parquet: rows, schema);
  readers leave a damaged attempt out with one warning (``analytics.store.integrity``),
  and ``neuronpipe verify`` checks everything (``analytics.store.verify``).
  See docs/reference/results-store.md.
"""

from __future__ import annotations

import hashlib
import io
import json
import secrets
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from analytics.schema import LAYOUT_PREFIX, TABLES, conform, empty_table, schema_for
from analytics.store.markers import (
    COMMITS,
    QUARANTINE,
    SEQUENCES,
    AlreadyExistsError,
    ArtifactNotFoundError,
    AttemptClosedError,
    CommitMarker,
    MarkerError,
    attempt_order,
    marker_key,
    parse_marker_key,
    proposal_key,
    schema_fingerprint,
    sequenced_attempt_id,
)
from analytics.store.markers import effective_markers as _effective
from pipeline.names import run_id_problem

FILE_MODE = 0o644  # committed files: readable by the group (and others), like any file under umask 022


def new_attempt_id(now: datetime | None = None) -> str:
    """Sortable attempt id: UTC time to the microsecond, then randomness."""
    now = now or datetime.now(timezone.utc)
    return now.strftime("%Y%m%dT%H%M%S%fZ") + "-" + secrets.token_hex(3)


def validate_component(name: str, value: str) -> str:
    if not value or "/" in value or value.startswith(".") or "=" in value or any(c.isspace() for c in value):
        raise ValueError(f"invalid {name} {value!r}: use letters, digits, '-', '_' and '.' (no '/', '=', spaces)")
    if name == "run_id" and (problem := run_id_problem(value)):  # the control plane's rule (pipeline.names)
        raise ValueError(f"invalid run_id {value!r}: {problem}")
    return value


@dataclass(frozen=True)
class ObjectInfo:
    """One stored object as a listing sees it (``verify`` reports sizes and ages of leftovers)."""

    key: str
    size: int
    mtime: float  # seconds since the epoch
    temp: bool = False  # an unfinished create (LocalStore's ``.tmp-*``)


def _sha256_stream(fh: Any) -> str:
    h = hashlib.sha256()
    for block in iter(lambda: fh.read(1 << 20), b""):
        h.update(block)
    return h.hexdigest()


class ResultStore(ABC):
    """All commit logic; subclasses implement create-only byte I/O on keys.

    ``proposes``: this writer may not commit (a box on AWS: ``NEURONPIPE_COMMITS=propose``, which the plan's
    scripts export); its attempts' markers go to ``v1/_proposed/`` and the control plane commits them after the
    lane's callback (``control_plane.commits``). Everything else of the protocol is the same."""

    root: str
    proposes: bool = False

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
    def size_of(self, key: str) -> int | None:
        """The object's size in bytes; None when it does not exist."""

    @abstractmethod
    def uri(self, key: str) -> str:
        """A URI (local path or s3://) for ``key``."""

    def objects(self, prefix: str = "") -> list[ObjectInfo]:
        """Every object under ``prefix`` with its size and age (temp files included where the store has them)."""
        raise NotImplementedError

    def sha256(self, key: str) -> str:
        """SHA-256 of ``key``'s bytes (streamed by subclasses that can)."""
        return hashlib.sha256(self.get_bytes(key)).hexdigest()

    # ---- commit protocol -------------------------------------------------------------
    def begin_attempt(self, run_id: str, lane: str, attempt: str | None = None) -> AttemptWriter:
        """Start an attempt. Without an explicit id it claims the next sequence number of (run, lane)
        from the store, so the attempt order never depends on a clock (see :func:`attempt_order`)."""
        run_id, lane = validate_component("run_id", run_id), validate_component("lane", lane)
        if attempt is not None:
            return AttemptWriter(self, run_id, lane, attempt)
        stamp = new_attempt_id()
        seq = self._claim_sequence(run_id, lane, stamp)
        return AttemptWriter(self, run_id, lane, sequenced_attempt_id(seq, stamp), sequence=seq)

    def _claim_sequence(self, run_id: str, lane: str, stamp: str) -> int:
        """The next free number under ``_seq/run_id=/lane=/``; a create-only key makes two claims distinct."""
        prefix = f"{LAYOUT_PREFIX}/{SEQUENCES}/run_id={run_id}/lane={lane}/"
        taken = [int(k[len(prefix) :]) for k in self.list_keys(prefix) if k[len(prefix) :].isdigit()]
        seq = max(taken, default=0) + 1
        body = json.dumps({"claimed_at": datetime.now(timezone.utc).isoformat(), "stamp": stamp}).encode()
        while True:
            try:
                self.put_bytes(f"{prefix}{seq:08d}", body)
                return seq
            except AlreadyExistsError:
                seq += 1

    def markers(self, run_id: str | None = None, lane: str | None = None) -> list[CommitMarker]:
        """Every readable commit marker (in attempt order). An unreadable one is left out with one warning
        line naming its key and why (see ``analytics.store.integrity``); it never stops the listing."""
        from analytics.store.integrity import Exclusion, warn_excluded

        prefix = f"{LAYOUT_PREFIX}/{COMMITS}/"
        if run_id:
            prefix += f"run_id={run_id}/"
            if lane:
                prefix += f"lane={lane}/"
        out = []
        quarantine: dict[tuple[str, str, str], str] | None = None
        self.unreadable_markers: list[Exclusion] = []
        for key in self.list_keys(prefix):
            if not key.endswith(".json"):
                continue
            try:
                out.append(CommitMarker.from_json(self.get_bytes(key), key=key))
            except (MarkerError, ArtifactNotFoundError) as exc:
                run, ln, att = parse_marker_key(key) or ("?", "?", "?")
                quarantine = self.quarantined() if quarantine is None else quarantine
                if (run, ln, att) in quarantine:
                    ex = Exclusion(run, ln, att, key, f"quarantined: {quarantine[run, ln, att]}", kind="quarantined")
                else:
                    ex = Exclusion(
                        run, ln, att, key, f"unreadable marker: {str(exc).removeprefix(key + ': ')}", kind="marker"
                    )
                self.unreadable_markers.append(ex)
                warn_excluded(ex)
        out.sort(key=lambda m: (m.run_id, m.lane, attempt_order(m)))
        return out

    def quarantined(self) -> dict[tuple[str, str, str], str]:
        """(run, lane, attempt) -> reason, for attempts ``verify --repair`` quarantined (readers skip them)."""
        prefix = f"{LAYOUT_PREFIX}/{QUARANTINE}/"
        out = {}
        for key in self.list_keys(prefix):
            parsed = parse_marker_key(key)
            if parsed is None:
                continue
            try:
                reason = str(json.loads(self.get_bytes(key)).get("reason", "quarantined"))
            except (ValueError, AttributeError, ArtifactNotFoundError):
                reason = "quarantined (record unreadable)"
            out[parsed] = reason
        return out

    def usable_markers(self, markers: list[CommitMarker] | None = None) -> list[CommitMarker]:
        """Readable markers less quarantined attempts (each skipped with one warning line, not re-checked)."""
        from analytics.store.integrity import Exclusion, warn_excluded

        every = self.markers() if markers is None else markers
        quarantine = self.quarantined()
        if not quarantine:
            return every
        out = []
        for m in every:
            reason = quarantine.get((m.run_id, m.lane, m.attempt))
            if reason is None:
                out.append(m)
            else:
                warn_excluded(
                    Exclusion(
                        m.run_id,
                        m.lane,
                        m.attempt,
                        marker_key(m.run_id, m.lane, m.attempt),
                        f"quarantined: {reason}",
                        kind="quarantined",
                    )
                )
        return out

    def effective_markers(self, run_ids: Iterable[str] | None = None) -> list[CommitMarker]:
        """For each (run, lane), the latest committed attempt that supersedes earlier ones."""
        wanted = set(run_ids) if run_ids else None
        return _effective([m for m in self.usable_markers() if wanted is None or m.run_id in wanted])

    def latest_committed(self, run_id: str, lane: str) -> CommitMarker | None:
        found = [m for m in self.usable_markers(self.markers(run_id, lane)) if m.supersedes]
        return max(found, key=attempt_order) if found else None

    def run_ids(self) -> list[str]:
        return sorted({m.run_id for m in self.markers()})

    def visible_keys(
        self, table: str, run_ids: Iterable[str] | None = None, markers: list[CommitMarker] | None = None
    ) -> list[str]:
        """Parquet keys of ``table`` that readers see. ``lane_runs`` shows every committed attempt.

        Pass ``markers`` (from one :meth:`markers` call) to resolve many tables with one listing.
        Files are not checked here; ``analytics.store.integrity.plan_reads`` checks them.
        """
        schema_for(table)
        wanted = set(run_ids) if run_ids else None
        every = self.usable_markers() if markers is None else markers
        if wanted is not None:
            every = [m for m in every if m.run_id in wanted]
        chosen = every if table == "lane_runs" else _effective(every)
        return [m.tables[table] for m in chosen if table in m.tables]

    def visible_keys_by_table(self, run_ids: Iterable[str] | None = None) -> dict[str, list[str]]:
        """Every table's visible keys from a single listing of the commit markers."""
        markers = self.usable_markers()
        return {t: self.visible_keys(t, run_ids, markers) for t in sorted(TABLES)}

    def read_table(self, table: str, run_ids: Iterable[str] | None = None, keys: list[str] | None = None) -> pa.Table:
        """The visible rows of ``table``; without ``keys``, damaged attempts are left out (with a warning)."""
        if keys is None:
            from analytics.store.integrity import plan_reads

            keys = plan_reads(self, run_ids).keys_by_table.get(table, [])
        parts = [read_parquet_bytes(self.get_bytes(k), page_checksum_verification=True) for k in keys]
        if not parts:
            return empty_table(table)
        return pa.concat_tables([conform(table, p) for p in parts])


def read_parquet_bytes(data: bytes, **kwargs: Any) -> pa.Table:
    """Parquet bytes as a table, read from a buffer Arrow owns (one copy).

    Not from ``io.BytesIO`` or the ``bytes`` object itself: Arrow would wrap a Python buffer, and its dataset
    reader's read-ahead can drop the last reference to that buffer on one of Arrow's own threads after
    ``read_table`` has returned. Releasing a Python buffer takes the GIL; at interpreter exit CPython ends any
    thread that asks for it with ``pthread_exit``, which unwinds through Arrow's C++ frames and aborts the
    process ("terminate called without an active exception", exit -6) after the command has done its work: a
    ``neuronpipe plan --history`` did that about one run in eight on a loaded 2-core machine."""
    sink = pa.BufferOutputStream()
    sink.write(data)
    return pq.read_table(pa.BufferReader(sink.getvalue()), **kwargs)


class AttemptWriter:
    """Writes one attempt's rows and files, then commits them with a marker written last."""

    def __init__(self, store: ResultStore, run_id: str, lane: str, attempt: str, sequence: int | None = None):
        self.store = store
        self.run_id = run_id
        self.lane = lane
        self.attempt = attempt
        self.sequence = sequence
        self._checksums: dict[str, dict[str, Any]] = {}
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

    def add_rows(self, table: str, rows: pa.Table | Iterable[Mapping[str, Any]], failure_record: bool = False) -> int:
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
        self._tables = {
            t: (parts if t in whole else self._failure_records.get(t, [])) for t, parts in self._tables.items()
        }
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
        local_path = Path(local_path)
        with local_path.open("rb") as fh:
            digest = _sha256_stream(fh)
        self.store.put_file(key, local_path)
        self._checksums[key] = {"size": local_path.stat().st_size, "sha256": digest}
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
        checksums = dict(self._checksums)
        for table in sorted(self._tables):
            data = pa.concat_tables(self._tables[table])
            buf = io.BytesIO()
            pq.write_table(data, buf, compression="zstd", write_page_checksum=True)
            body = buf.getvalue()
            key = self.table_key(table)
            self.store.put_bytes(key, body)
            written[table] = key
            checksums[key] = {
                "size": len(body),
                "sha256": hashlib.sha256(body).hexdigest(),
                "rows": data.num_rows,
                "schema": _stored_fingerprint(body),
            }
        marker = CommitMarker(
            run_id=self.run_id,
            lane=self.lane,
            attempt=self.attempt,
            status=status,
            supersedes=supersedes,
            tables=written,
            files=list(self._files),
            committed_at=datetime.now(timezone.utc).isoformat(),
            sequence=self.sequence,
            checksums=checksums,
        )
        key = (proposal_key if self.store.proposes else marker_key)(self.run_id, self.lane, self.attempt, LAYOUT_PREFIX)
        self.store.put_bytes(key, marker.to_json())
        self._committed = True
        return marker


def _stored_fingerprint(body: bytes) -> str:
    """The schema fingerprint as a reader will see it (Parquet renames list items; compare like with like)."""
    with pq.ParquetFile(pa.BufferReader(body)) as pf:  # synchronous metadata read: no read-ahead thread
        return schema_fingerprint(pf.schema_arrow)
