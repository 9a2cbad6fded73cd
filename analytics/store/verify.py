"""`neuronpipe verify`: walk a results store and say what is wrong with it, and (``--repair``) make it safe.

Findings, each with the key and its size:

* ``corrupt``    a committed file whose size, rows, schema or SHA-256 differ from its marker, or a marker
                 that cannot be read or checked (its whole attempt is damaged);
* ``missing``    a file a marker names that is not there;
* ``orphaned``   a file no marker names (an attempt killed before its commit, or one still running);
* ``temp``       an unfinished create (``.tmp-*``) left by a killed writer;
* ``quarantined`` an attempt already quarantined (known damage: readers skip it; not counted as unclean).

``repair`` never deletes or rewrites committed data. It writes one quarantine record per damaged attempt
(``v1/_quarantine/run_id=/lane=/<attempt>.json``, create-only, so append-only), which readers honour without
re-checking, and removes orphaned and temp files older than a safety age (local stores only; younger ones
may belong to a lane that is still running). Sequence claims (``v1/_seq``) are bookkeeping, never removed.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from analytics.store.integrity import check_file
from analytics.store.markers import (COMMITS, QUARANTINE, SEQUENCES, AlreadyExistsError, CommitMarker, MarkerError,
                               marker_key, parse_marker_key)

DEFAULT_SAFETY_AGE_S = 48 * 3600
DATA_PREFIXES = ("v1/", "models/", "logs/")
UNCLEAN = ("corrupt", "missing", "orphaned", "temp")


@dataclass(frozen=True)
class Finding:
    kind: str  # corrupt | missing | orphaned | temp | quarantined
    key: str
    size: int | None
    reason: str
    attempt: tuple[str, str, str] | None = None  # (run, lane, attempt) the finding belongs to
    age_s: float | None = None

    def line(self) -> str:
        size = "-" if self.size is None else f"{self.size:,} bytes"
        owner = f"  [attempt {'/'.join(self.attempt)}]" if self.attempt else ""
        age = f", {self.age_s / 3600:.1f} h old" if self.age_s is not None else ""
        return f"{self.kind:<11} {self.key}  ({size}{age}): {self.reason}{owner}"


@dataclass
class VerifyReport:
    findings: list[Finding] = field(default_factory=list)
    markers: int = 0
    files: int = 0
    bytes: int = 0

    @property
    def clean(self) -> bool:
        return not any(f.kind in UNCLEAN for f in self.findings)

    def damaged_attempts(self) -> dict[tuple[str, str, str], Finding]:
        out: dict[tuple[str, str, str], Finding] = {}
        for f in self.findings:
            if f.kind in ("corrupt", "missing") and f.attempt and f.attempt not in out:
                out[f.attempt] = f
        return out


def _attempt_of(key: str) -> str | None:
    """The attempt id a data key belongs to, from the layout (None when the key is not in it)."""
    parts = key.split("/")
    if parts[0] == "v1" and len(parts) >= 2 and parts[-1].endswith(".parquet"):
        return parts[-1][: -len(".parquet")]
    if parts[0] in ("models", "logs") and len(parts) >= 4:
        return parts[3]
    return None


def verify_store(store: Any, now: float | None = None) -> VerifyReport:
    """Check every marker and every file it names (with SHA-256); list orphaned and temp files."""
    now = time.time() if now is None else now
    report = VerifyReport()
    objects = {o.key: o for o in store.objects("")}
    named: set[str] = set()
    broken_attempts: dict[str, tuple[str, str, str]] = {}  # attempt id -> owner, for unreadable markers
    quarantined = store.quarantined()
    commits = f"v1/{COMMITS}/"
    for key, obj in sorted(objects.items()):
        if obj.temp or not key.startswith(commits) or not key.endswith(".json"):
            continue
        report.markers += 1
        owner = parse_marker_key(key)
        try:
            marker = CommitMarker.from_json(store.get_bytes(key), key=key)
        except MarkerError as exc:
            if owner:
                broken_attempts[owner[2]] = owner
            kind = "quarantined" if owner in quarantined else "corrupt"
            report.findings.append(Finding(kind, key, obj.size, f"unreadable marker: {exc}".replace(f"{key}: ", ""),
                                           owner))
            continue
        owner = (marker.run_id, marker.lane, marker.attempt)
        table_keys = set(marker.tables.values())
        for fkey in marker.keys():
            named.add(fkey)
            record = marker.checksums.get(fkey)
            obj_f = objects.get(fkey)
            reason = check_file(store, fkey, record, hashes=True, sizes={fkey: obj_f.size} if obj_f else {},
                                table=fkey in table_keys)
            if reason is None and fkey in table_keys and not (record and "sha256" in record):
                reason = _read_whole_parquet(store, fkey)  # an older marker: page checksums are the check
            report.files += 1
            report.bytes += obj_f.size if obj_f else 0
            if reason is None:
                continue
            kind = "quarantined" if owner in quarantined else ("missing" if reason == "missing" else "corrupt")
            report.findings.append(Finding(kind, fkey, obj_f.size if obj_f else None, reason, owner))
    bookkeeping = (f"v1/{SEQUENCES}/", f"v1/{QUARANTINE}/", commits)
    for key, obj in sorted(objects.items()):
        age = max(0.0, now - obj.mtime)
        if obj.temp:
            report.findings.append(Finding("temp", key, obj.size, "unfinished write (a killed writer's leftover)",
                                           age_s=age))
            continue
        if key in named or key.startswith(bookkeeping) or not key.startswith(DATA_PREFIXES):
            continue
        attempt = _attempt_of(key)
        if attempt in broken_attempts:
            continue  # a file of an attempt whose marker is damaged: that finding covers it
        report.findings.append(Finding("orphaned", key, obj.size, "never committed (no marker names it)",
                                       age_s=age))
    return report


def _read_whole_parquet(store: Any, key: str) -> str | None:
    import io

    import pyarrow.parquet as pq

    try:
        pq.read_table(io.BytesIO(store.get_bytes(key)), page_checksum_verification=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is damage
        return f"unreadable Parquet ({type(exc).__name__}: {exc})"
    return None


@dataclass
class RepairSummary:
    quarantined: list[str] = field(default_factory=list)  # keys of the records written
    removed: list[str] = field(default_factory=list)
    kept_young: list[str] = field(default_factory=list)  # leftovers younger than the safety age
    kept_remote: list[str] = field(default_factory=list)  # leftovers on a store this command does not delete from


def repair(store: Any, report: VerifyReport, safety_age_s: float = DEFAULT_SAFETY_AGE_S) -> RepairSummary:
    """Quarantine damaged attempts (append-only records); remove uncommitted leftovers older than the safety age."""
    summary = RepairSummary()
    for (run, lane, attempt), finding in sorted(report.damaged_attempts().items()):
        key = f"v1/{QUARANTINE}/run_id={run}/lane={lane}/{attempt}.json"
        body = json.dumps({"run_id": run, "lane": lane, "attempt": attempt, "key": finding.key,
                           "reason": f"{finding.kind}: {finding.key}: {finding.reason}",
                           "quarantined_at": datetime.now(timezone.utc).isoformat()}, sort_keys=True, indent=1)
        try:
            store.put_bytes(key, body.encode())
            summary.quarantined.append(key)
        except AlreadyExistsError:
            pass
    removable = getattr(store, "remove_leftover", None)
    committed = {k for m in store.markers() for k in m.keys()}  # listed again: a commit may have landed since
    committed |= {marker_key(m.run_id, m.lane, m.attempt) for m in store.markers()}
    for f in report.findings:
        if f.kind not in ("orphaned", "temp") or f.key in committed:
            continue
        if (f.age_s or 0.0) < safety_age_s:
            summary.kept_young.append(f.key)
        elif removable is None:
            summary.kept_remote.append(f.key)
        else:
            removable(f.key)
            summary.removed.append(f.key)
    return summary
