"""Readers that isolate damage: each committed attempt is checked before its files reach a view.

A damaged, missing or foreign file, or an unreadable marker, takes only its own attempt
out of what readers see, with one warning line naming the file and the reason; every
other attempt reads as before (a lane whose latest attempt is excluded shows its
previous one, and the exclusion says so). ``verify --repair`` quarantines a damaged
attempt so later readers skip it without re-checking.

Checks on every read (cheap): the file exists, its size is the marker's, and for local
files the Parquet footer opens with the row count and schema fingerprint the marker
records. SHA-256 of every file read is checked when hashes are on:

* ``NEURONPIPE_VERIFY_HASHES=1`` (or ``--verify`` on ``query``/``report``): always;
* ``NEURONPIPE_VERIFY_HASHES=0``: never;
* unset (``auto``): for a local store (DuckDB does not check Parquet page checksums, and
  one flipped byte can change a number silently; hashing local files costs about what
  reading them does), not for S3 (it would download every file twice).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow.parquet as pq

from analytics.schema import TABLES
from analytics.store.markers import UNCHECKED, ArtifactNotFoundError, CommitMarker, StoreError, schema_fingerprint

log = logging.getLogger("analytics.store.integrity")
VERIFY_ENV = "NEURONPIPE_VERIFY_HASHES"
_WARNED: set[tuple[str, str]] = set()


class VerifySettingError(StoreError):
    """An unknown value of NEURONPIPE_VERIFY_HASHES."""


@dataclass(frozen=True)
class Exclusion:
    """One attempt left out of the views: which, the file that caused it, and why."""

    run_id: str
    lane: str
    attempt: str
    key: str
    reason: str
    kind: str = "damaged"  # damaged | marker | quarantined

    def line(self) -> str:
        return f"excluded attempt {self.run_id}/{self.lane}/{self.attempt}: {self.key}: {self.reason}"


def warn_unchecked(m: CommitMarker) -> None:
    """One warning line per legacy-format marker per process: read, but nothing of it could be checked."""
    key = f"v1/_commits/run_id={m.run_id}/lane={m.lane}/{m.attempt}.json"
    if (key, UNCHECKED) not in _WARNED:
        _WARNED.add((key, UNCHECKED))
        log.warning(
            "attempt %s/%s/%s read %s: %s has no digest or checksums", m.run_id, m.lane, m.attempt, UNCHECKED, key
        )


def warn_excluded(ex: Exclusion) -> None:
    """One warning line per (file, reason) per process, however many readers meet it."""
    if (ex.key, ex.reason) not in _WARNED:
        _WARNED.add((ex.key, ex.reason))
        log.warning("%s", ex.line())


def reset_warnings() -> None:
    """Forget which exclusions were announced (a long-lived process re-reading a changed store; tests)."""
    _WARNED.clear()


def hashes_wanted(store: Any, verify: bool | None = None) -> bool:
    """Whether readers check SHA-256 (see the module docstring)."""
    if verify:
        return True
    value = os.environ.get(VERIFY_ENV, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    if value not in ("", "auto"):
        raise VerifySettingError(f"{VERIFY_ENV}={value!r}: use 1, 0 or auto")
    return hasattr(store, "path")  # a LocalStore


def check_file(
    store: Any,
    key: str,
    record: dict[str, Any] | None,
    *,
    hashes: bool,
    sizes: dict[str, int] | None = None,
    table: bool = False,
) -> str | None:
    """Why ``key`` is not the file its marker committed, or None when it is (as far as the checks go)."""
    record = record or {}
    local = getattr(store, "path", None) is not None
    if local:
        path = store._p(key)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return "missing"
    else:
        if sizes is None or key not in sizes:
            return "missing"
        size = sizes[key]
    if "size" in record and size != record["size"]:
        return f"size {size} bytes, the marker says {record['size']}"
    if table and local:
        try:
            with pq.ParquetFile(path) as pf:
                meta, schema = pf.metadata, pf.schema_arrow  # the Arrow schema stored with the file
        except Exception as exc:  # noqa: BLE001 - any unreadable footer is damage
            return f"unreadable Parquet footer ({type(exc).__name__}: {exc})"
        if "rows" in record and meta.num_rows != record["rows"]:
            return f"{meta.num_rows} rows, the marker says {record['rows']}"
        if "schema" in record and schema_fingerprint(schema) != record["schema"]:
            return "schema differs from the committed table's (a foreign file?)"
    if hashes and "sha256" in record:
        try:
            if store.sha256(key) != record["sha256"]:
                return "SHA-256 differs from the marker (damaged bytes)"
        except ArtifactNotFoundError:
            return "missing"
    return None


@dataclass
class ReadPlan:
    """What readers see: healthy markers, each table's visible keys, and what was excluded."""

    markers: list[CommitMarker]
    keys_by_table: dict[str, list[str]]
    exclusions: list[Exclusion] = field(default_factory=list)
    unchecked: list[CommitMarker] = field(default_factory=list)  # legacy-format markers read without checks


def plan_reads(store: Any, run_ids: Iterable[str] | None = None, verify: bool | None = None) -> ReadPlan:
    """The visible keys of every table with damaged attempts left out.

    Every attempt's ``lane_runs`` file is checked (that table shows every attempt); other tables' files are
    checked for the attempts that would be visible; an attempt with any damaged file is excluded whole and
    the choice of latest attempt is made again without it.
    """
    from analytics.store.markers import effective_markers as _effective

    hashes = hashes_wanted(store, verify)
    wanted = set(run_ids) if run_ids else None
    every = store.markers()
    exclusions = [e for e in getattr(store, "unreadable_markers", []) if wanted is None or e.run_id in wanted]
    every = [m for m in store.usable_markers(every) if wanted is None or m.run_id in wanted]
    sizes = None if getattr(store, "path", None) is not None else {o.key: o.size for o in store.objects("v1/")}
    checked: dict[str, str | None] = {}

    def damage(m: CommitMarker, tables: Iterable[str]) -> tuple[str, str] | None:
        for table in tables:
            key = m.tables.get(table)
            if key is None:
                continue
            if key not in checked:
                checked[key] = check_file(store, key, m.checksums.get(key), hashes=hashes, sizes=sizes, table=True)
            if checked[key] is not None:
                return key, checked[key]
        return None

    healthy = list(every)
    while True:
        effective = {id(m) for m in _effective(healthy)}
        bad = None
        for m in healthy:
            found = damage(m, sorted(m.tables) if id(m) in effective else ["lane_runs"])
            if found:
                bad = (m, found)
                break
        if bad is None:
            break
        m, (key, reason) = bad
        ex = Exclusion(m.run_id, m.lane, m.attempt, key, reason)
        warn_excluded(ex)
        exclusions.append(ex)
        healthy = [h for h in healthy if h is not m]
    keys = {t: store.visible_keys(t, None, healthy) for t in sorted(TABLES)}
    unchecked = [m for m in healthy if m.legacy]
    for m in unchecked:
        warn_unchecked(m)
    return ReadPlan(healthy, keys, exclusions, unchecked)
