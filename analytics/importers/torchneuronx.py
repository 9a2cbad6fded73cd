"""Import the hand-run torchneuronx harness's results (``trn1/results``, ``inf2/results``) as one run.

Why: its users hold months of results as JSON, CSV and logs in git; the successor must take them in,
through the same contract (``conform``) and commit protocol (``analytics.store``) as any lane, so the
views and the report read them like native results. What cannot be known (the instance a lane ran on,
per-request timings of aggregate-only points) is NULL with the reason in ``lane_runs.config_json``.

Everything is parsed and validated before the first write: bad input leaves the store untouched.
``history=True`` walks git history and commits each lane's superseded versions as earlier attempts of the
same (run, lane), oldest first, so the latest version is what readers see and the rest stays on record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa

from analytics.importers import (
    tnx_encoders,
    tnx_extras,
    tnx_inf2,
    tnx_nki,
    tnx_predictions,
    tnx_rag,
    tnx_training,
    tnx_trn1,
)
from analytics.importers.common import ImportExistsError, ImportInputError, LaneImport, dumps, parse_time
from analytics.importers.source import GitRepo, GitTree, SourceError, Tree, open_tree
from analytics.schema import SchemaMismatchError, conform
from analytics.store import ResultStore

SOURCE_NAME = "torchneuronx"
RESULT_ROOTS = ("trn1/results/", "inf2/results/")
INSTANCE_NOTE = (
    "the source records no instance per lane; specs.txt names the box it was captured on, "
    "which need not be the one this lane ran on"
)


@dataclass
class PlannedAttempt:
    lane: LaneImport
    tree: Tree
    superseded: bool
    tables: dict[str, pa.Table] = field(default_factory=dict)


@dataclass
class ImportSummary:
    run_id: str
    commit: str | None
    attempts: list[tuple[str, str, str, dict[str, int]]]  # (lane, attempt, status, rows per table)
    notes: list[str] = field(default_factory=list)  # "path: why": links not followed, files dropped
    predictions: int = 0  # the source's predicted-vs-observed rows, registered as the run's predictions


def collect(tree: Tree) -> list[LaneImport]:
    """Every lane found in ``tree`` (none: the tree is not this layout)."""
    lanes = tnx_extras.extras(tree, tnx_trn1.lanes(tree) + tnx_inf2.lanes(tree))  # its Phase 2 joins the lanes
    nki = tnx_nki.nki_lane(tree, tree.files(tnx_nki.EXTRAS))  # its NKI kernel's receipts: the nki lane
    lanes += [nki] if nki is not None else []
    encode = tnx_encoders.encode_lane(tree, tree.files(tnx_encoders.EXTRAS))  # Track A's encoders: the encode lane
    lanes += [encode] if encode is not None else []
    rag = tnx_rag.rag_lane(tree, tree.files(tnx_rag.RAG))  # its RAG appliance (§13.10): the rag lane
    lanes += [rag] if rag is not None else []
    lanes = tnx_training.extras(tree, lanes)  # checkpoint saves (sft) and the academic runs (from_scratch)
    merged = {r["path"]: r for li in lanes if li.lane == "merge" for r in li.rows.get("artifacts", [])}
    for li in lanes:
        for r in li.rows.get("artifacts", []):
            if r.get("stage") == "after_copy":  # the copy is checked against the merge's manifest, file by file
                source = merged.get(r["path"])
                r["model"] = source["model"] if source else r.get("model")
                r["expected_sha256"] = source["sha256"] if source else None
                r["roundtrip_verified"] = (r["sha256"] == r["expected_sha256"]) if r["expected_sha256"] else None
    return lanes


def _box_facts(tree: Tree) -> dict[str, dict[str, str | None]]:
    out: dict[str, dict[str, str | None]] = {}
    for role in ("trn1", "inf2"):
        path = f"{role}/results/specs.txt"
        if path in set(tree.files(f"{role}/results/")):
            rows = tnx_trn1.parse_specs(tree.text(path))
            out[role] = {
                "host": tnx_trn1.spec_value(rows, "hostname"),
                "instance_type": tnx_trn1.spec_value(rows, "instance-type"),
                "specs_captured_at": tnx_trn1.spec_value(rows, "specs_captured_at"),
            }
    return out


def lane_runs_row(
    p: PlannedAttempt, boxes: dict[str, dict[str, str | None]], history: bool, forced: bool
) -> dict[str, Any]:
    li, tree = p.lane, p.tree
    box = boxes.get(li.box_role, {})
    ended = li.ended_at or parse_time(tree.committed_at) or datetime.now(timezone.utc)
    started = ended - timedelta(seconds=li.wall_s) if li.wall_s else ended
    null_reasons = {"instance_id": INSTANCE_NOTE, "t_mono_ns": "the source's sampler kept no monotonic clock"}
    if not li.wall_s:
        null_reasons["wall_s"] = "the source records no wall time for this lane; started_at = ended_at"
    if not box.get("host"):
        null_reasons["host"] = "no specs.txt for this box: the host is unknown (stored as 'unrecorded')"
    nulled = {path: fields for path, fields in tree.nulled().items() if path in li.paths}
    if nulled:  # a NaN in the source is no measurement: stored NULL, named here
        null_reasons["source_nan"] = {
            path: f"NaN in the source, stored NULL: {', '.join(fields)}" for path, fields in sorted(nulled.items())
        }
    dropped = {path: why for path, why in sorted(tree.dropped().items()) if path in li.paths}
    if dropped:  # a telemetry CSV that holds no telemetry: no rows, named here
        null_reasons["telemetry_dropped"] = dropped
    config = {
        "imported": {
            "source": SOURCE_NAME,
            "commit": tree.commit,
            "committed_at": tree.committed_at,
            "paths": sorted(set(li.paths)),
            "history": history,
            "superseded": p.superseded,
            "host_from": f"specs.txt captured {box.get('specs_captured_at')}" if box else None,
        },
        "null_reasons": null_reasons,
        **li.config,
    }
    if tree.not_followed():  # links in the SOURCE no file was read through: what no lane could read
        config["imported"]["not_followed"] = [f"{path}: {why}" for path, why in sorted(tree.not_followed().items())]
    return {
        "status": li.status,
        "supersedes": True,
        "started_at": started,
        "ended_at": ended,
        "wall_s": li.wall_s or None,
        "error_type": li.error_type,
        "error_message": li.error_message,
        "backend": "neuron",
        "host": box.get("host") or "unrecorded",
        "box_role": li.box_role,
        "instance_type": box.get("instance_type"),
        "instance_id": None,
        "profile": None,
        "forced": forced,
        "config_json": dumps(config),
        "harness_sha": tree.commit,
        "telemetry_samples": li.row_count("telemetry"),
        "log_uri": None,
    }


def _conform_all(p: PlannedAttempt, boxes: dict[str, dict[str, str | None]], history: bool, forced: bool) -> None:
    """Validate now (nothing is written until every attempt conforms)."""
    keys = {"run_id": "-", "lane": p.lane.lane, "attempt": "-"}
    try:
        for table, rows in p.lane.rows.items():
            if rows:
                p.tables[table] = conform(table, rows, defaults=keys)
        for table, parts in p.lane.tables.items():
            batch = pa.concat_tables([conform(table, t, defaults=keys) for t in parts])
            p.tables[table] = pa.concat_tables([p.tables[table], batch]) if table in p.tables else batch
        p.tables["lane_runs"] = conform("lane_runs", [lane_runs_row(p, boxes, history, forced)], defaults=keys)
    except SchemaMismatchError as exc:
        raise ImportInputError(f"{p.lane.lane} at {p.tree.commit or 'the work tree'}: {exc}") from None


def plan(tree: Tree, repo: GitRepo | None, history: bool) -> list[PlannedAttempt]:
    """Attempts in commit order: each lane's superseded versions (``history``), then the tree's own."""
    head = collect(tree)
    if not head:
        raise SourceError(
            f"no torchneuronx results found under {', '.join(RESULT_ROOTS)} at "
            f"{tree.commit or 'the SOURCE'} (is this the predecessor's repository?)"
        )
    planned: list[PlannedAttempt] = []
    if history:
        if repo is None or tree.commit is None:
            raise SourceError("--history needs a git SOURCE (a checkout or a bare git dir)")
        seen: dict[str, str] = {li.lane: tree.fingerprint(li.paths) for li in head}
        earlier: dict[str, list[tuple[str, PlannedAttempt]]] = {}
        for commit in repo.history(tree.commit, [r.rstrip("/") for r in RESULT_ROOTS]):
            if commit.sha == tree.commit:
                continue
            old = GitTree(repo, commit)
            old.telemetry = False  # superseded versions: the JSON records only (docs/guides/import.md)
            for li in collect(old):
                fp = old.fingerprint(li.paths)
                versions = earlier.setdefault(li.lane, [])
                if fp == seen.get(li.lane) or (versions and versions[-1][0] == fp):
                    continue
                versions.append((fp, PlannedAttempt(li, old, superseded=True)))
        order = [(p.tree.committed_at or "", p.tree.commit or "", p) for v in earlier.values() for _, p in v]
        planned += [p for *_k, p in sorted(order, key=lambda x: (x[0], x[1]))]
    planned += [PlannedAttempt(li, tree, superseded=False) for li in head]
    return planned


def import_torchneuronx(
    source: str,
    store: ResultStore,
    run_id: str | None = None,
    ref: str | None = None,
    history: bool = False,
    force: bool = False,
) -> ImportSummary:
    tree, repo = open_tree(source, ref)
    try:
        run_id = run_id or f"{SOURCE_NAME}-{tree.commit[:7] if tree.commit else 'worktree'}"
        if store.markers(run_id) and not force:
            raise ImportExistsError(
                f"run {run_id} is already in {store.root}: importing twice is refused "
                "(--force adds new attempts; --run-id names another run)"
            )
        attempts = plan(tree, repo, history)
        boxes = _box_facts(tree)
        for p in attempts:
            _conform_all(p, boxes, history, force)
        predicted = tnx_predictions.predictions(tree)  # §13.9, checked before the first write
        if predicted:
            conform("predictions", predicted, defaults={"run_id": "-", "lane": "-", "attempt": "-"})
    finally:
        if repo is not None:
            repo.close()
    notes = sorted(
        {
            f"{path}: {why}"
            for p in attempts
            for path, why in [*p.tree.not_followed().items(), *p.tree.dropped().items()]
        }
    )
    done = []
    for p in attempts:
        writer = store.begin_attempt(run_id, p.lane.lane)
        counts = {}
        for table, data in sorted(p.tables.items()):
            counts[table] = writer.add_rows(table, data.drop_columns(["run_id", "lane", "attempt"]))
        writer.commit(p.lane.status)
        done.append((p.lane.lane, writer.attempt, p.lane.status, counts))
    return ImportSummary(run_id, tree.commit, done, notes, tnx_predictions.commit(store, run_id, predicted))


def every_attempt(store: ResultStore, run_id: str, table: str) -> pa.Table:
    """``table``'s rows from every committed attempt of ``run_id``, superseded ones included (the views
    show only each lane's latest): how ``--history`` results are read back, e.g. the first cold boot."""
    from analytics.store.base import read_parquet_bytes

    parts = []
    for m in store.usable_markers(store.markers(run_id)):
        if table in m.tables:
            parts.append(conform(table, read_parquet_bytes(store.get_bytes(m.tables[table]))))
    return pa.concat_tables(parts) if parts else conform(table, [])
