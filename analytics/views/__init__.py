"""DuckDB views over the committed results: the one place docs/reference/metrics.md becomes SQL.

``connect(store)`` creates one view per table over the visible attempts (the
latest committed attempt per (run, lane); every attempt for ``lane_runs``),
then runs the derived-metric SQL files in ``sql/`` in the order
:data:`VIEW_FILES` declares (one family of views per file). Each SQL file
holds ``CREATE OR REPLACE VIEW`` statements only, over the table views and
earlier files' views.

Damage is isolated here (``analytics.store.integrity.plan_reads``): an attempt with a
damaged, missing or foreign file, an unreadable marker, or a quarantine record is
left out with one warning line, and listed in the ``store_exclusions`` table
(run_id, lane, attempt, kind, subject, reason) that the report's exclusions read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from importlib import resources
from typing import Any, Literal
from urllib.parse import urlparse

import duckdb

from analytics.schema import TABLES, empty_table, schema_for
from analytics.store import LocalStore, ResultStore, S3Store

# How S3 results are read when DuckDB's httpfs is absent:
#   arrow  pyarrow's S3 filesystem: a lazy dataset over exactly the committed files (scans push down to S3)
#   boto3  the store's own client: each visible file read whole into memory
#   auto   arrow when the client points at an explicit endpoint (MinIO, LocalStack, a moto server), else boto3.
# The environment variable NEURONPIPE_S3_READER overrides auto (e.g. arrow on AWS for large results).
S3Reader = Literal["auto", "arrow", "boto3"]
S3_READER_ENV = "NEURONPIPE_S3_READER"


class S3ReaderError(ValueError):
    """An unknown S3 reader name."""


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _has_httpfs(con: duckdb.DuckDBPyConnection) -> bool:
    try:
        con.execute("LOAD httpfs")
        return True
    except duckdb.Error:
        return False


def _is_aws_endpoint(endpoint: str | None) -> bool:
    return not endpoint or (urlparse(endpoint).hostname or "").endswith(".amazonaws.com")


def resolve_s3_reader(store: ResultStore, reader: S3Reader | None = None) -> S3Reader:
    choice = reader or os.environ.get(S3_READER_ENV) or "auto"
    if choice not in ("auto", "arrow", "boto3"):
        raise S3ReaderError(f"unknown S3 reader {choice!r} (from {S3_READER_ENV}); valid: auto, arrow, boto3")
    if choice != "auto":
        return choice
    client = getattr(store, "client", None)
    endpoint = getattr(getattr(client, "meta", None), "endpoint_url", None)
    return "boto3" if _is_aws_endpoint(endpoint) else "arrow"


def arrow_s3_filesystem(client: Any) -> Any:
    """pyarrow's S3 filesystem configured like a boto3 S3 client: region, endpoint and credentials."""
    import pyarrow.fs as pafs

    kwargs: dict[str, Any] = {"region": client.meta.region_name}
    endpoint = client.meta.endpoint_url
    if not _is_aws_endpoint(endpoint):
        parsed = urlparse(endpoint)
        kwargs.update(endpoint_override=parsed.netloc, scheme=parsed.scheme or "https")
    signer = getattr(client, "_request_signer", None)
    credentials = getattr(signer, "_credentials", None)
    if credentials is not None:
        frozen = credentials.get_frozen_credentials()
        kwargs.update(access_key=frozen.access_key, secret_key=frozen.secret_key, session_token=frozen.token)
    return pafs.S3FileSystem(**kwargs)


def _arrow_s3_dataset(store: S3Store, table: str, keys: list[str], filesystem: Any) -> Any:
    """A lazy dataset over exactly ``keys`` (the committed files), with the table's schema."""
    import pyarrow.dataset as ds

    paths = [store.uri(k)[len("s3://") :] for k in keys]
    return ds.dataset(paths, schema=schema_for(table), format="parquet", filesystem=filesystem)


STORE_EXCLUSIONS = "store_exclusions"
# Tables also registered over every healthy committed attempt, superseded ones included, as <table>_every_attempt
# (the plain view shows each lane's latest): a cold compile paid by an attempt a re-run superseded was still paid.
EVERY_ATTEMPT_TABLES = ("compiles",)
EVERY_ATTEMPT_SUFFIX = "_every_attempt"


def register_tables(
    con: duckdb.DuckDBPyConnection,
    store: ResultStore,
    run_ids: Iterable[str] | None = None,
    s3_reader: S3Reader | None = None,
    verify: bool | None = None,
) -> list[str]:
    """One view per table over the visible attempts; returns the files the views read by path (local stores)."""
    from analytics.store.integrity import plan_reads

    run_ids = list(run_ids) if run_ids else None
    use_paths = isinstance(store, LocalStore) or (store.root.startswith("s3://") and _has_httpfs(con))
    filesystem = None
    if not use_paths and isinstance(store, S3Store) and resolve_s3_reader(store, s3_reader) == "arrow":
        filesystem = arrow_s3_filesystem(store.client)
    plan = plan_reads(store, run_ids, verify=verify)  # one listing of the markers; damaged attempts left out
    visible = plan.keys_by_table
    _register_exclusions(con, plan.exclusions)
    paths: list[str] = []
    for table in sorted(TABLES):
        keys = visible[table]
        paths += _register_keys(con, store, table, table, keys, use_paths, filesystem, run_ids)
    for table in EVERY_ATTEMPT_TABLES:
        paths += _register_keys(
            con,
            store,
            table,
            f"{table}{EVERY_ATTEMPT_SUFFIX}",
            _every_attempt_keys(store, plan, table, verify),
            use_paths,
            filesystem,
            run_ids,
        )
    return paths


def _register_keys(
    con: duckdb.DuckDBPyConnection,
    store: ResultStore,
    table: str,
    name: str,
    keys: list[str],
    use_paths: bool,
    filesystem: Any,
    run_ids: list[str] | None,
) -> list[str]:
    if not keys:
        _register_arrow(con, name, empty_table(table))
    elif use_paths:
        uris = [store.uri(k) for k in keys]
        source = f"read_parquet([{', '.join(map(_quote, uris))}], union_by_name=true, hive_partitioning=false)"
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT *{missing_columns(con, table, source)} FROM {source}")
        return uris
    elif filesystem is not None:
        _register_arrow(con, name, _arrow_s3_dataset(store, table, keys, filesystem))
    else:
        _register_arrow(con, name, store.read_table(table, run_ids, keys=keys))
    return []


def missing_columns(con: duckdb.DuckDBPyConnection, table: str, source: str) -> str:
    """``, CAST(NULL AS T) AS c`` for each column of ``table``'s schema that the files in ``source`` lack:
    files written before a nullable column was added read it as NULL, as ``conform`` fills it (plain SQL, so a
    view in a DuckDB file keeps working after the connection closes)."""
    have = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    lacking = [c for c in schema_for(table).names if c not in have]
    if not lacking:
        return ""
    con.register("__schema_probe", empty_table(table))
    try:
        types = {r[0]: r[1] for r in con.execute("DESCRIBE SELECT * FROM __schema_probe").fetchall()}
    finally:
        con.unregister("__schema_probe")
    return "".join(f', CAST(NULL AS {types[c]}) AS "{c}"' for c in lacking)


def _every_attempt_keys(store: ResultStore, plan: Any, table: str, verify: bool | None) -> list[str]:
    """``table``'s files from every healthy committed attempt, superseded ones included; a superseded attempt's
    file is checked here (plan_reads checks only the visible ones) and left out with one warning when damaged."""
    from analytics.store.integrity import Exclusion, check_file, hashes_wanted, warn_excluded

    visible = set(plan.keys_by_table[table])
    hashes = hashes_wanted(store, verify)
    out = []
    for m in plan.markers:
        key = m.tables.get(table)
        if key is None:
            continue
        if key not in visible:
            why = check_file(store, key, m.checksums.get(key), hashes=hashes, table=True)
            if why is not None:
                warn_excluded(Exclusion(m.run_id, m.lane, m.attempt, key, why))
                continue
        out.append(key)
    return sorted(out)


def _register_exclusions(con: duckdb.DuckDBPyConnection, exclusions: list[Any]) -> None:
    import pyarrow as pa

    data = pa.table(
        {
            "run_id": pa.array([e.run_id for e in exclusions], pa.string()),
            "lane": pa.array([e.lane for e in exclusions], pa.string()),
            "attempt": pa.array([e.attempt for e in exclusions], pa.string()),
            "kind": pa.array([f"attempt_{e.kind}" for e in exclusions], pa.string()),
            "subject": pa.array([e.key for e in exclusions], pa.string()),
            "reason": pa.array([e.reason for e in exclusions], pa.string()),
        }
    )
    con.register(f"__arrow_{STORE_EXCLUSIONS}", data)
    con.execute(f"CREATE OR REPLACE TABLE {STORE_EXCLUSIONS} AS SELECT * FROM __arrow_{STORE_EXCLUSIONS}")
    con.unregister(f"__arrow_{STORE_EXCLUSIONS}")


def _register_arrow(con: duckdb.DuckDBPyConnection, table: str, data: Any) -> None:
    name = f"__arrow_{table}"
    con.register(name, data)
    con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM {name}")


# The derived-view files in load order: each file's views read only the tables and the views of files above it.
SERVING_FILES = (
    "10_serving_requests.sql",  # per request: request_metrics, request_itls, request_reads, request_slo
    "11_serving_intervals.sql",  # what the intervals come from: t_crit_95, point_rate_batches
    "12_serving_points.sql",  # per sweep point: point_peaks, serving_points
    "13_serving_sustained.sql",  # sustained points: sustained_window_metrics, sustained_summary
    "14_serving_workloads.sql",  # workload points: per point, input-length bucket, turn and session
)
VIEW_FILES = (
    *SERVING_FILES,  # the load generator's (agents.loadgen.metrics loads these alone)
    "20_training.sql",  # training: train_loss_trend, weights_roundtrip
    "21_training_saves.sql",  # checkpoint cost: saves per model and their share of the training loop
    "22_training_scratch.sql",  # from-scratch training: accuracy per epoch (Wilson), steady step time, samples/s
    "30_prices.sql",  # instance_prices (generated: python -m analytics.pricing)
    "31_report_compile.sql",  # the report's views: compiles cold vs warm,
    "32_report_training.sql",  # training runs with MFU,
    "33_report_context.sql",  # machines, telemetry, sustained, quality, round trip,
    "34_report_exclusions.sql",  # lane attempts and every exclusion,
    "35_report_cost.sql",  # cost per lane, run and point
    "36_report_variants.sql",  # the server configs a run booted (the Variants section)
    "37_report_limits.sql",  # the limits lane's brackets, with their probes
    "38_report_lora.sql",  # a multi-LoRA variant's requests per adapter
    "39_report_saturation.sql",  # saturation evidence: accelerator utilisation inside each sweep point's span
    "40_report_cold_start.sql",  # cold start per box boot: start -> first token, and the S3 compile cache it used
    "41_report_preflight.sql",  # the preflight gate's checks per box
    "42_report_energy.sql",  # energy per output token where power is sampled (NULL with a note elsewhere)
    "43_report_accuracy.sql",  # accuracy per task (Wilson), paired tests between evaluations (Newcombe, McNemar)
    "44_hardware.sql",  # accelerator facts and peaks, types' accelerators (generated: analytics.hardware_facts)
    "45_report_kernels.sql",  # NKI kernels: each stage's verdict, latency percentiles, the speed-up on the reference
    "47_report_predictions.sql",  # predicted vs observed: each registered prediction's verdict, the hit rate
    "48_report_encoders.sql",  # encoders: placement, numerics gate, latency per batch and shape, the encode decision
    "49_report_rag.sql",  # the rag lane: hits@k and MRR, the reranker's paired test, per-stage latency, the SLO's load
    "70_aggregates.sql",  # imported aggregate-only points, retention from iterations, the step clock
    "71_report_roofline.sql",  # every serving point's bounds from the hardware and the model, and % of each
    "75_report_decision.sql",  # the Decision: price-performance at an SLO
    "76_report_capacity.sql",  # capacity at an SLO by search: capacity_points, report_capacity, the rate Decision
    "77_report_decision_hardware.sql",  # the Decision across instance types: capacity, $/M and a ranking per group
    "78_report_decision_noise.sql",  # the Decision with run-level noise: P(cheaper) per pair of types, the run-level sd
    "73_report_pricing.sql",  # prices per pricing model and the Decision's ranking under each (after 77: reads it)
    "74_report_quality_cost.sql",  # quality per dollar: accuracy against $/M at the SLO, the Pareto front
    "79_report_decision_lifecycle.sql",  # lifecycle $/M over the chosen horizon beside serving-only $/M
    "80_report_baseline.sql",  # a run against its baseline: verdict rows and the family-wise findings per run
    "81_report_trend.sql",  # each (request fingerprint, instance type, point · metric) series, value per run
)


class ViewFilesError(RuntimeError):
    """The SQL files in ``sql/`` and the declared :data:`VIEW_FILES` disagree."""


def derived_sql_files(names: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """(file name, SQL text) of ``names`` (default :data:`VIEW_FILES`), in that order.

    A ``.sql`` file that is not declared, or a declared one that is missing, raises :class:`ViewFilesError`:
    a view must never go uncreated because its file was left out of the order.
    """
    root = resources.files("analytics.views") / "sql"
    present = {entry.name for entry in root.iterdir() if entry.name.endswith(".sql")}
    undeclared, missing = sorted(present - set(VIEW_FILES)), [n for n in VIEW_FILES if n not in present]
    if undeclared or missing:
        raise ViewFilesError(
            f"analytics/views/sql and VIEW_FILES disagree: not declared {undeclared or 'none'}, "
            f"missing {missing or 'none'}"
        )
    wanted = VIEW_FILES if names is None else tuple(names)
    unknown = [n for n in wanted if n not in VIEW_FILES]
    if unknown:
        raise ViewFilesError(f"unknown view files {unknown}; declared: {', '.join(VIEW_FILES)}")
    return [(name, (root / name).read_text()) for name in wanted]


def view_files_through(last: str) -> tuple[str, ...]:
    """:data:`VIEW_FILES` up to and including ``last``: a valid set on its own, since a file's views can read only
    the files before it (every view is bound when it is created)."""
    if last not in VIEW_FILES:
        raise ViewFilesError(f"unknown view file {last!r}; declared: {', '.join(VIEW_FILES)}")
    return VIEW_FILES[: VIEW_FILES.index(last) + 1]


def create_derived_views(con: duckdb.DuckDBPyConnection, names: Iterable[str] | None = None) -> None:
    """``names``: only these files (a prefix of :data:`VIEW_FILES`, see :func:`view_files_through`); default all."""
    for name, text in derived_sql_files(names):
        try:
            con.execute(text)
        except duckdb.Error as exc:
            raise RuntimeError(f"derived view file {name} failed: {exc}") from exc


def connect(
    store: ResultStore,
    run_ids: Iterable[str] | None = None,
    database: str = ":memory:",
    s3_reader: S3Reader | None = None,
    verify: bool | None = None,
    sandbox: bool = False,
    view_files: Iterable[str] | None = None,
    **config: Any,
) -> duckdb.DuckDBPyConnection:
    """``verify``: check every file's SHA-256 (default: ``NEURONPIPE_VERIFY_HASHES``, see analytics.store.integrity).
    ``sandbox``: once the views exist, DuckDB may read only the files they read (:func:`sandbox_connection`).
    ``view_files``: create only these view files (a prefix, :func:`view_files_through`): binding every view costs
    ~2-3 s of CPU, most of it in the Decision and capacity files, which a caller reading earlier views need not pay."""
    con = duckdb.connect(database, config=dict(config))
    paths = register_tables(con, store, run_ids, s3_reader=s3_reader, verify=verify)
    create_derived_views(con, view_files)
    if sandbox:
        sandbox_connection(con, paths)
    return con


def sandbox_connection(con: duckdb.DuckDBPyConnection, paths: Iterable[str]) -> None:
    """From now on the connection reaches no file but ``paths`` (the committed files its views read), and only to
    read them: no other file, no COPY target, no ATTACH, no extension, no Python object by name; then the
    configuration is locked, so no statement can undo it. Views over Arrow data (an S3 store read through
    pyarrow) are registered objects and keep working. DuckDB would still write to an allowed path (``COPY ... TO``
    a committed file with ``use_tmp_file false``), so ``neuronpipe query`` also refuses every statement that is
    not a read (``control_plane.commands.query``)."""
    allowed = ", ".join(_quote(p) for p in sorted(set(paths)))
    con.execute(f"SET allowed_paths = [{allowed}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
