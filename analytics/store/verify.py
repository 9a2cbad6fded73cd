"""`neuronpipe verify`: walk a results store and say what is wrong with it, and (``--repair``) make it safe.

Findings, each with the key and its size:

* ``corrupt``    a committed file whose size, rows, schema or SHA-256 differ from its marker, or a marker
                 that cannot be read or checked (its whole attempt is damaged);
* ``missing``    a file a marker names that is not there;
* ``orphaned``   a file no marker names (an attempt killed before its commit, or one still running);
* ``temp``       an unfinished create (``.tmp-*``) left by a killed writer;
* ``nested``     another results store inside this one (rule 16): left alone, never checked or removed;
* ``stray`` / ``malformed`` a file under ``v1/_seq`` that is not a well-formed claim (``analytics.store.sequences``);
* ``unchecked``  a legacy-format marker (no digest, no checksums): its files exist and read, nothing more is
                 known; never clean (exit 3 unless ``--allow-legacy-markers``);
* ``quarantined`` an attempt already quarantined (known damage: readers skip it; not counted as unclean);
* ``unused``     a sequence claim nothing explains (information).

``repair`` never deletes or rewrites committed data. It writes one quarantine record per damaged attempt
(``v1/_quarantine/run_id=/lane=/<attempt>.json``, create-only, so append-only), which readers honour without
re-checking, and removes orphaned and temp files older than a safety age (local stores only; younger ones
may belong to a lane that is still running). It never removes a file that any commit marker anywhere below the
root names (a nested store's included), nor anything inside a nested store. Sequence claims (``v1/_seq``) are
bookkeeping, never removed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from analytics.store.integrity import check_file
from analytics.store.locate import BOOKKEEPING, IDENTITY
from analytics.store.markers import (
    COMMITS,
    QUARANTINE,
    UNCHECKED,
    AlreadyExistsError,
    CommitMarker,
    MarkerError,
    marker_key,
    parse_marker_key,
)
from analytics.store.sequences import PREFIX as SEQ_PREFIX
from analytics.store.sequences import check_claims

DEFAULT_SAFETY_AGE_S = 48 * 3600
DATA_PREFIXES = ("v1/", "models/", "logs/")
UNCLEAN = ("corrupt", "missing", "orphaned", "temp", "nested", "stray", "malformed")
EXIT_CLEAN, EXIT_PROBLEMS, EXIT_UNCHECKED = 0, 1, 3  # 2 is bad input (the CLI's)


@dataclass(frozen=True)
class Finding:
    kind: str  # see the module docstring
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
    nested: list[str] = field(default_factory=list)  # roots (keys) of stores found inside this one

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.kind in UNCLEAN]

    @property
    def unchecked(self) -> list[Finding]:
        """Legacy-format markers: read, never checked."""
        return [f for f in self.findings if f.kind == "unchecked"]

    @property
    def clean(self) -> bool:
        """Nothing wrong and everything checked (a legacy marker is never clean)."""
        return not self.problems and not self.unchecked

    def exit_code(self, allow_legacy: bool = False) -> int:
        if self.problems:
            return EXIT_PROBLEMS
        return EXIT_UNCHECKED if self.unchecked and not allow_legacy else EXIT_CLEAN

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


def nested_roots(keys: list[str]) -> list[str]:
    """Roots (keys relative to this store) of results stores below it: a folder holding the identity file or
    ``v1/<bookkeeping>``. The outermost one wins (a store inside a nested store is part of it)."""
    found: set[str] = set()
    for key in keys:
        parts = key.split("/")
        if len(parts) > 1 and parts[-1] == IDENTITY:
            found.add("/".join(parts[:-1]))
        for i in range(1, len(parts) - 2):
            if parts[i] == "v1" and parts[i + 1] in BOOKKEEPING:
                found.add("/".join(parts[:i]))
    return sorted(r for r in found if not any(r.startswith(o + "/") for o in found if o != r))


def _under(key: str, roots: list[str]) -> str | None:
    return next((r for r in roots if key.startswith(r + "/")), None)


def verify_store(store: Any, now: float | None = None) -> VerifyReport:
    """Check every marker and every file it names (with SHA-256) and every sequence claim; list orphaned and
    temp files and nested stores (left alone)."""
    now = time.time() if now is None else now
    report = VerifyReport()
    every = {o.key: o for o in store.objects("")}
    report.nested = nested_roots(sorted(every))
    objects = every
    named: set[str] = set()
    broken_attempts: dict[str, tuple[str, str, str]] = {}  # attempt id -> owner, for unreadable markers
    committed_seq: dict[tuple[str, str, int], str] = {}
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
            report.findings.append(
                Finding(kind, key, obj.size, f"unreadable marker: {exc}".replace(f"{key}: ", ""), owner)
            )
            continue
        owner = (marker.run_id, marker.lane, marker.attempt)
        _check_sequence(marker, key, obj.size, committed_seq, report)
        if marker.legacy:
            report.findings.append(
                Finding(
                    "unchecked",
                    key,
                    obj.size,
                    f"{UNCHECKED}: no digest or checksums, "
                    f"so its {len(marker.keys())} file(s) cannot be checked against it",
                    owner,
                )
            )
        table_keys = set(marker.tables.values())
        for fkey in marker.keys():
            named.add(fkey)
            record = marker.checksums.get(fkey)
            obj_f = objects.get(fkey)
            reason = check_file(
                store, fkey, record, hashes=True, sizes={fkey: obj_f.size} if obj_f else {}, table=fkey in table_keys
            )
            if reason is None and fkey in table_keys and not (record and "sha256" in record):
                reason = _read_whole_parquet(store, fkey)  # a legacy marker: page checksums are all there is
            report.files += 1
            report.bytes += obj_f.size if obj_f else 0
            if reason is None:
                continue
            kind = "quarantined" if owner in quarantined else ("missing" if reason == "missing" else "corrupt")
            report.findings.append(Finding(kind, fkey, obj_f.size if obj_f else None, reason, owner))
    seen = {a for k in objects if (a := _attempt_of(k))} | set(broken_attempts)
    seen |= {p[2] for k in objects if k.startswith(commits) and (p := parse_marker_key(k))}
    claims = [k for k, o in sorted(objects.items()) if k.startswith(SEQ_PREFIX) and not o.temp]
    for c in check_claims(store, claims, committed_seq, seen):
        report.findings.append(Finding(c.kind, c.key, objects[c.key].size, c.reason, c.attempt))
    bookkeeping = (SEQ_PREFIX, f"v1/{QUARANTINE}/", commits)
    for key, obj in sorted(objects.items()):
        age = max(0.0, now - obj.mtime)
        if obj.temp and _under(key, report.nested) is None:
            report.findings.append(
                Finding("temp", key, obj.size, "unfinished write (a killed writer's leftover)", age_s=age)
            )
            continue
        if key in named or key.startswith(bookkeeping) or not key.startswith(DATA_PREFIXES):
            continue
        if _under(key, report.nested) is not None:
            continue  # a nested store's file: its finding covers it, nothing of it is removed
        attempt = _attempt_of(key)
        if attempt in broken_attempts:
            continue  # a file of an attempt whose marker is damaged: that finding covers it
        report.findings.append(Finding("orphaned", key, obj.size, "never committed (no marker names it)", age_s=age))
    for i, root in enumerate(report.nested):  # listed first: every other finding is about this store alone
        inside = [o for k, o in every.items() if k.startswith(root + "/") and k not in named]
        report.findings.insert(
            i,
            Finding(
                "nested",
                root,
                sum(o.size for o in inside),
                f"nested store at {root}: left alone ({len(inside)} file(s); a store "
                "inside a store breaks rule 16: move it out)",
            ),
        )
    return report


def _check_sequence(
    m: CommitMarker, key: str, size: int, committed: dict[tuple[str, str, int], str], report: VerifyReport
) -> None:
    """A marker's sequence agrees with its attempt id and no other committed attempt holds it."""
    if m.sequence is None:
        return
    owner = (m.run_id, m.lane, m.attempt)
    if not m.attempt.startswith(f"s{m.sequence:08d}-"):
        report.findings.append(
            Finding("corrupt", key, size, f"sequence {m.sequence} does not match the attempt id", owner)
        )
    other = committed.setdefault((m.run_id, m.lane, m.sequence), m.attempt)
    if other != m.attempt:
        report.findings.append(
            Finding("corrupt", key, size, f"sequence {m.sequence} is also held by committed attempt {other}", owner)
        )


def _read_whole_parquet(store: Any, key: str) -> str | None:
    from analytics.store.base import read_parquet_bytes

    try:
        read_parquet_bytes(store.get_bytes(key), page_checksum_verification=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is damage
        return f"unreadable Parquet ({type(exc).__name__}: {exc})"
    return None


@dataclass
class RepairSummary:
    quarantined: list[str] = field(default_factory=list)  # keys of the records written
    removed: list[str] = field(default_factory=list)
    kept_young: list[str] = field(default_factory=list)  # leftovers younger than the safety age
    kept_remote: list[str] = field(default_factory=list)  # leftovers on a store this command does not delete from
    kept_named: list[str] = field(default_factory=list)  # leftovers some marker somewhere names after all
    nested: list[str] = field(default_factory=list)  # nested stores left alone


def named_anywhere(store: Any, keys: list[str]) -> set[str]:
    """Every key that any commit marker below the root names, the markers themselves included, whatever
    store they belong to (a marker at ``X/v1/_commits/...`` names keys relative to ``X``)."""
    out: set[str] = set()
    for key in keys:
        parts = key.split("/")
        if COMMITS not in parts or not key.endswith(".json"):
            continue
        i = parts.index(COMMITS)
        base = "/".join(parts[: i - 1] if i >= 1 and parts[i - 1] == "v1" else parts[:i])
        out.add(key)
        try:
            raw = json.loads(store.get_bytes(key))
        except (ValueError, UnicodeDecodeError):
            continue
        if not isinstance(raw, dict):
            continue
        tables = raw.get("tables") if isinstance(raw.get("tables"), dict) else {}
        files = raw.get("files") if isinstance(raw.get("files"), list) else []
        for named in [*tables.values(), *files]:
            if isinstance(named, str):
                out.add(f"{base}/{named}" if base else named)
    return out


def repair(store: Any, report: VerifyReport, safety_age_s: float = DEFAULT_SAFETY_AGE_S) -> RepairSummary:
    """Quarantine damaged attempts (append-only records); remove uncommitted leftovers older than the safety
    age, except what any marker anywhere names and anything inside a nested store."""
    summary = RepairSummary(nested=list(report.nested))
    for (run, lane, attempt), finding in sorted(report.damaged_attempts().items()):
        key = f"v1/{QUARANTINE}/run_id={run}/lane={lane}/{attempt}.json"
        body = json.dumps(
            {
                "run_id": run,
                "lane": lane,
                "attempt": attempt,
                "key": finding.key,
                "reason": f"{finding.kind}: {finding.key}: {finding.reason}",
                "quarantined_at": datetime.now(timezone.utc).isoformat(),
            },
            sort_keys=True,
            indent=1,
        )
        try:
            store.put_bytes(key, body.encode())
            summary.quarantined.append(key)
        except AlreadyExistsError:
            pass
    removable = getattr(store, "remove_leftover", None)
    listing = sorted(o.key for o in store.objects(""))  # listed again: a commit may have landed since
    nested = nested_roots(listing)
    committed = {k for m in store.markers() for k in m.keys()}
    committed |= {marker_key(m.run_id, m.lane, m.attempt) for m in store.markers()}
    committed |= named_anywhere(store, listing)
    for f in report.findings:
        if f.kind not in ("orphaned", "temp"):
            continue
        if f.key in committed or _under(f.key, nested) is not None:
            summary.kept_named.append(f.key)
        elif (f.age_s or 0.0) < safety_age_s:
            summary.kept_young.append(f.key)
        elif removable is None:
            summary.kept_remote.append(f.key)
        else:
            removable(f.key)
            summary.removed.append(f.key)
    return summary
