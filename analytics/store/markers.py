"""Commit markers: what one attempt committed, in a form a reader can check.

A marker names every file of its attempt and, since the checksummed layout, records
for each file its size and SHA-256 (and, for a table's Parquet file, its row count
and the table's schema fingerprint), so a reader can tell a damaged or foreign file
from the one that was committed. The marker also carries a digest of its own fields
(``digest``) and is written in one canonical form, so any change to its bytes is
caught. Each marker states its ``format``: :data:`MARKER_FORMAT` (2) is the checksummed one,
and every file it names must have a checksum. A marker without a digest (written before these
fields existed, or stripped of them) is read only as the named legacy format
:data:`LEGACY_FORMAT` (1): it is reported ``unchecked (legacy marker format)``, never clean
(``verify`` exits 3 unless ``--allow-legacy-markers``), so removing the checks cannot pass for
passing them. A format-2 marker without its digest is damaged, not legacy.

The attempt order (:func:`attempt_order`) does not trust clocks: a sequence number
claimed from the store at begin (create-only keys make the claim race-safe) decides
which attempt is latest; an attempt without one (written before sequences, or with an
explicit id) sorts by its id before every sequenced one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from pipeline import jsonio

COMMITS = "_commits"
SEQUENCES = "_seq"
QUARANTINE = "_quarantine"
# Where an untrusted writer (a box) puts its marker: the control plane checks it and writes the commit
# (control_plane.commits); readers never read proposals.
PROPOSED = "_proposed"
STATUSES = ("succeeded", "failed", "skipped")
MARKER_FORMAT = 2  # digest + a size/SHA-256 checksum for every file named
LEGACY_FORMAT = 1  # no digest, no checksums: readable, never checked (see the module docstring)
UNCHECKED = "unchecked (legacy marker format)"


class StoreError(Exception):
    """Base class of result-store errors."""


class AlreadyExistsError(StoreError):
    """A create-only write found the key already there (nothing is overwritten)."""


class AttemptClosedError(StoreError):
    """A write or commit after the attempt was committed."""


class ArtifactNotFoundError(StoreError):
    """A file the caller asked for is not in the store."""


class MarkerError(StoreError):
    """A commit marker that cannot be trusted: not JSON, a field missing or of the wrong type, a digest
    that does not match its content, or a marker for another run/lane/attempt than its key says."""


class StoreNotFoundError(StoreError):
    """A results root that does not exist, or is not a directory."""


def schema_fingerprint(schema: pa.Schema) -> str:
    """Names, types and nullability of the columns (no metadata): a file of another table or layout differs."""
    text = ";".join(f"{f.name}:{f.type}:{int(f.nullable)}" for f in schema)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _canonical(raw: dict[str, Any]) -> bytes:
    return json.dumps(raw, sort_keys=True, indent=1).encode()


def _digest(raw: dict[str, Any]) -> str:
    body = {k: v for k, v in raw.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class CommitMarker:
    """What the marker file holds: the attempt's outcome, every file it wrote, and how to check them."""

    run_id: str
    lane: str
    attempt: str
    status: str
    supersedes: bool
    tables: dict[str, str] = field(default_factory=dict)  # table -> key of its parquet file
    files: list[str] = field(default_factory=list)  # other keys written by the attempt
    committed_at: str = ""
    schema_version: int = 1
    sequence: int | None = None  # per-(run, lane) order claimed at begin; None on older markers
    checksums: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> size, sha256[, rows, schema]
    digest: str = ""  # SHA-256 of the other fields; empty on older markers
    format: int = MARKER_FORMAT  # LEGACY_FORMAT: a marker without digest and checksums

    @property
    def legacy(self) -> bool:
        """A legacy-format marker: its files cannot be checked against it (:data:`UNCHECKED`)."""
        return self.format < MARKER_FORMAT

    def keys(self) -> list[str]:
        """Every key the attempt committed (its tables' files first)."""
        return [*sorted(self.tables.values()), *self.files]

    def to_json(self) -> bytes:
        raw = asdict(self)
        raw["digest"] = _digest(raw)
        return _canonical(raw)

    @classmethod
    def from_json(cls, data: bytes, key: str | None = None) -> CommitMarker:
        """Parse and check a marker; :class:`MarkerError` names what is wrong (and ``key`` when given)."""
        where = f"{key}: " if key else ""
        try:
            raw = jsonio.loads(data)
        except jsonio.JsonInputError as exc:
            raise MarkerError(f"{where}not a JSON marker ({len(data)} bytes): {exc}") from None
        if not isinstance(raw, dict):
            raise MarkerError(f"{where}not a JSON object")
        for name, kind in (("run_id", str), ("lane", str), ("attempt", str), ("status", str), ("supersedes", bool)):
            if not isinstance(raw.get(name), kind):
                raise MarkerError(f"{where}field {name!r} missing or not a {kind.__name__}")
        if raw["status"] not in STATUSES:
            raise MarkerError(f"{where}status {raw['status']!r} is not one of {', '.join(STATUSES)}")
        tables, files = raw.get("tables", {}), raw.get("files", [])
        if not isinstance(tables, dict) or not all(isinstance(v, str) for v in tables.values()):
            raise MarkerError(f"{where}field 'tables' is not a mapping of table to key")
        if not isinstance(files, list) or not all(isinstance(v, str) for v in files):
            raise MarkerError(f"{where}field 'files' is not a list of keys")
        seq = raw.get("sequence")
        if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool) or seq < 0):
            raise MarkerError(f"{where}field 'sequence' is not a non-negative integer")
        if not isinstance(raw.get("checksums", {}), dict):
            raise MarkerError(f"{where}field 'checksums' is not a mapping")
        fmt = raw.get("format", MARKER_FORMAT if raw.get("digest") else LEGACY_FORMAT)
        if not isinstance(fmt, int) or isinstance(fmt, bool) or fmt < LEGACY_FORMAT:
            raise MarkerError(f"{where}field 'format' is not a marker format ({LEGACY_FORMAT} or {MARKER_FORMAT})")
        if fmt > MARKER_FORMAT:
            raise MarkerError(f"{where}marker format {fmt} is newer than this reader's ({MARKER_FORMAT})")
        if fmt >= MARKER_FORMAT and not raw.get("digest"):
            raise MarkerError(
                f"{where}format {fmt} marker without its digest (damaged, or stripped to pass as a legacy marker)"
            )
        if raw.get("digest"):
            if raw["digest"] != _digest(raw):
                raise MarkerError(f"{where}digest does not match the marker's content (damaged marker)")
            if _canonical(raw) != bytes(data):
                raise MarkerError(f"{where}bytes differ from the marker's canonical form (damaged marker)")
        if fmt >= MARKER_FORMAT:
            named = [*tables.values(), *files]
            unsummed = [k for k in named if not isinstance(raw.get("checksums", {}).get(k), dict)]
            if unsummed:
                raise MarkerError(
                    f"{where}names {unsummed[0]} without a checksum (a format {fmt} marker checksums every file)"
                )
        fields = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        fields["format"] = fmt
        marker = cls(**fields)
        if key is not None:
            expected = marker_key(marker.run_id, marker.lane, marker.attempt)
            if not key.endswith(expected):
                raise MarkerError(
                    f"{where}marker is for {marker.run_id}/{marker.lane}/{marker.attempt} (a foreign marker)"
                )
        return marker


def marker_key(run_id: str, lane: str, attempt: str, layout: str = "v1") -> str:
    return f"{layout}/{COMMITS}/run_id={run_id}/lane={lane}/{attempt}.json"


def proposal_key(run_id: str, lane: str, attempt: str, layout: str = "v1") -> str:
    """Where a box proposes the marker of its attempt (``v1/_proposed/…``): nothing reads it but the promotion."""
    return f"{layout}/{PROPOSED}/run_id={run_id}/lane={lane}/{attempt}.json"


def parse_marker_key(key: str) -> tuple[str, str, str] | None:
    """(run_id, lane, attempt) from a marker's key, or None when the key is not shaped like one."""
    parts = key.split("/")
    if len(parts) < 4 or not parts[-1].endswith(".json"):
        return None
    run, lane = parts[-3], parts[-2]
    if not run.startswith("run_id=") or not lane.startswith("lane="):
        return None
    return run[len("run_id=") :], lane[len("lane=") :], parts[-1][: -len(".json")]


def attempt_order(m: CommitMarker) -> tuple[int, int, str]:
    """Sort key of attempts of one (run, lane): unsequenced (by id) first, then by sequence."""
    return (0, 0, m.attempt) if m.sequence is None else (1, m.sequence, m.attempt)


def sequenced_attempt_id(sequence: int, stamp: str) -> str:
    """``s<sequence>-<UTC time>-<random>``: sorts as text in sequence order, after every older
    timestamp-only id (digits sort before ``s``), so SQL's ``max(attempt)`` agrees with :func:`attempt_order`."""
    return f"s{sequence:08d}-{stamp}"


def effective_markers(markers: Iterable[CommitMarker]) -> list[CommitMarker]:
    """For each (run, lane), the latest committed attempt that supersedes (what readers see)."""
    latest: dict[tuple[str, str], CommitMarker] = {}
    for m in markers:
        if not m.supersedes:
            continue
        key = (m.run_id, m.lane)
        if key not in latest or attempt_order(m) > attempt_order(latest[key]):
            latest[key] = m
    return sorted(latest.values(), key=lambda m: (m.run_id, m.lane))
