"""An append-only local mirror of committed results, and a DuckDB file for the plain `duckdb` CLI.

``pull(source, mirror)`` copies, for every commit marker in ``source`` that the
mirror lacks, each file the marker names, then the marker last: the mirror
follows the same commit protocol as the store, so a pull killed half-way
leaves the new attempt invisible, and the next pull completes it. Nothing in
the mirror is ever deleted or overwritten; a file that exists locally with
different bytes is a conflict and stops the pull. Uncommitted files in the
source (no marker names them) are never copied. Model weights (``models/``)
are copied only when asked: they are large and the tables do not need them.

Every key an attempt names (its marker's own key included) becomes a mirror path only through
:func:`pipeline.containment.contained`, all of them before the attempt's first copy: one that would land
outside the mirror (absolute, a ``..``, an empty or ``.`` part) leaves the attempt out, as damage does.

Every file copied is checked against the SHA-256 (and size) its marker records
before it is linked into the mirror. An attempt with a damaged or missing file,
or an unreadable marker, is not mirrored: one warning line names the file and
the reason, the pull goes on with the other attempts, and the summary counts it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from analytics.schema import LAYOUT_PREFIX, TABLES
from analytics.store import COMMITS, FILE_MODE, ArtifactNotFoundError, CommitMarker, LocalStore, ResultStore
from analytics.store.integrity import Exclusion, warn_excluded
from pipeline.containment import PathEscapeError, contained


class MirrorConflictError(RuntimeError):
    """A key exists in the mirror with bytes that differ from the source (the mirror never overwrites)."""


class SourceDamageError(RuntimeError):
    """A file of the source does not match what its marker records (its attempt is not mirrored)."""


@dataclass
class PullSummary:
    markers_copied: int = 0
    markers_present: int = 0
    files_copied: int = 0
    files_present: int = 0
    bytes_copied: int = 0
    models_skipped: int = 0
    run_ids: list[str] = field(default_factory=list)
    damaged: list[Exclusion] = field(default_factory=list)  # source attempts left out: damaged or unreadable


def marker_key(m: CommitMarker) -> str:
    return f"{LAYOUT_PREFIX}/{COMMITS}/run_id={m.run_id}/lane={m.lane}/{m.attempt}.json"


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _mirror_path(dest_root: Path, key: str) -> Path:
    try:
        return contained(dest_root, key)
    except PathEscapeError as exc:
        raise SourceDamageError(f"the key leaves the mirror ({exc})") from None


def _copy_create_only(source: ResultStore, key: str, dest_root: Path, record: dict | None = None) -> int:
    """Copy ``key`` into the mirror atomically and create-only; return bytes copied (0 if already identical).

    ``record`` (the marker's size and SHA-256 of the file): the copy is checked before it is linked in."""
    dest = _mirror_path(dest_root, key)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".tmp-", dir=dest.parent)
    os.fchmod(fd, FILE_MODE)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        try:
            source.download(key, tmp)
        except ArtifactNotFoundError:
            raise SourceDamageError("missing") from None
        if record and "size" in record and tmp.stat().st_size != record["size"]:
            raise SourceDamageError(f"size {tmp.stat().st_size} bytes, the marker says {record['size']}")
        if record and "sha256" in record and _sha256_file(tmp) != record["sha256"]:
            raise SourceDamageError("SHA-256 differs from the marker (damaged bytes)")
        if dest.exists():
            if _sha256_file(dest) != _sha256_file(tmp):
                raise MirrorConflictError(
                    f"{dest} exists with different bytes than {source.uri(key)}; the mirror never overwrites"
                )
            return 0
        try:
            os.link(tmp, dest)
        except FileExistsError:  # a concurrent pull won the race; same check as above
            if _sha256_file(dest) != _sha256_file(tmp):
                raise MirrorConflictError(f"{dest} appeared with different bytes") from None
            return 0
        return tmp.stat().st_size
    finally:
        tmp.unlink(missing_ok=True)


def pull(
    source: ResultStore, mirror: LocalStore, run_ids: Iterable[str] | None = None, with_models: bool = False
) -> PullSummary:
    """Copy every committed attempt of ``source`` (restricted to ``run_ids``) the mirror lacks."""
    wanted = set(run_ids) if run_ids else None
    summary = PullSummary()
    root = Path(mirror.root)
    runs: set[str] = set()
    markers = source.markers()
    summary.damaged += [e for e in getattr(source, "unreadable_markers", []) if wanted is None or e.run_id in wanted]
    for m in markers:
        if wanted is not None and m.run_id not in wanted:
            continue
        runs.add(m.run_id)
        mk = marker_key(m)
        try:
            for key in [mk, *m.keys()]:  # every key checked before the first copy
                try:
                    _mirror_path(root, key)
                except SourceDamageError as exc:
                    raise SourceDamageError(key, str(exc)) from None
            if mirror.exists(mk):
                summary.markers_present += 1
                continue
            for key in m.keys():
                if key.startswith("models/") and not with_models:
                    summary.models_skipped += 1
                    continue
                try:
                    n = _copy_create_only(source, key, root, m.checksums.get(key))
                except SourceDamageError as exc:
                    raise SourceDamageError(key, str(exc)) from None
                if n:
                    summary.files_copied += 1
                    summary.bytes_copied += n
                else:
                    summary.files_present += 1
        except SourceDamageError as exc:
            key, reason = exc.args
            ex = Exclusion(m.run_id, m.lane, m.attempt, key, reason)
            warn_excluded(ex)
            summary.damaged.append(ex)
            continue  # the marker is not copied: the mirror never sees a damaged attempt
        _copy_create_only(source, mk, root)  # the marker last: only now does the mirror see the attempt
        summary.markers_copied += 1
    summary.run_ids = sorted(runs)
    return summary


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def write_duckdb_file(store: ResultStore, path: str | Path, run_ids: Iterable[str] | None = None) -> Path:
    """A DuckDB database holding every table and derived view, for `duckdb FILE` from the shell.

    On a local store (a mirror) the table views name the committed parquet files, so the file stays small;
    elsewhere (S3 without httpfs) the visible rows are copied into tables. The file is derived, not a
    result: it is rebuilt whole (written beside, then renamed) and reflects the commits at build time.
    """
    from analytics.atomic import OUTPUT_MODE
    from analytics.store.integrity import plan_reads
    from analytics.views import create_derived_views, missing_columns

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".tmp-", suffix=".duckdb", dir=path.parent)
    os.close(fd)
    os.unlink(tmp_name)  # duckdb creates the file itself
    run_ids = list(run_ids) if run_ids else None
    plan = plan_reads(store, run_ids)  # damaged attempts left out, as every reader does
    con = duckdb.connect(tmp_name)
    try:
        for table in sorted(TABLES):
            keys = plan.keys_by_table[table]
            if keys and isinstance(store, LocalStore):
                files = ", ".join(_quote(store.uri(k)) for k in keys)
                source = f"read_parquet([{files}], union_by_name=true)"
                con.execute(f"CREATE VIEW {table} AS SELECT *{missing_columns(con, table, source)} FROM {source}")
            else:
                data = store.read_table(table, run_ids, keys=keys)
                con.register("__pull_data", data)
                con.execute(f"CREATE TABLE {table} AS SELECT * FROM __pull_data")
                con.unregister("__pull_data")
        create_derived_views(con)
        con.execute("CHECKPOINT")
        con.close()
    except BaseException:
        con.close()
        Path(tmp_name).unlink(missing_ok=True)
        raise
    os.chmod(tmp_name, OUTPUT_MODE)
    os.replace(tmp_name, path)
    return path
