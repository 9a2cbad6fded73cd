"""The results store in Athena: Glue tables over the Parquet layout, and the committed attempts the views join.

Layout (``analytics/store/base.py``): ``v1/<table>/run_id=R/lane=L/<attempt>.parquet`` and the commit markers
``v1/_commits/run_id=R/lane=L/<attempt>.json``. One (run, lane) folder holds every attempt's file: the committed
one, the ones a later attempt superseded, and a killed attempt's uncommitted leftovers. An Athena partition is a
folder, never a file, so registering a partition at commit could not keep a superseded or uncommitted file out of a
read; and a commit made without the control plane (an ``import`` into an S3 store) would register nothing. So the
Glue tables here are not partitioned and each per-table view keeps exactly the files the commit markers name:

* ``stored_<table>`` (Parquet) over ``v1/<table>/``: every file there, committed or not; no one queries it directly;
* ``commit_marker_lines`` and ``quarantine_record_lines`` (text, one row per line) over ``v1/_commits/`` and
  ``v1/_quarantine/``. A marker is indented JSON (``analytics.store.markers``), one key per line in a fixed order,
  so its attempt, its ``supersedes`` and its ``tables`` entries are each one line the views read with a regular
  expression; the run, lane and attempt come from the marker's own key (``"$path"``) and must equal its lines;
* :func:`committed_layer` (views): ``committed_attempts`` (each readable marker), ``committed_files`` (every file
  a committed, unquarantined attempt names; ``latest`` where its attempt is the latest per (run, lane) that
  supersedes) and one view per table, named as the table, over ``stored_<table>`` where ``"$path"`` is a latest
  file (any committed one for ``lane_runs`` and ``compiles_every_attempt``): what
  ``analytics.store.base.ResultStore.visible_keys`` chooses. The derived views (``analytics/views/sql``,
  transpiled by :mod:`analytics.athena.generate`) read those, as DuckDB's read ``analytics.views.register_tables``.

What Athena does not check: file sizes and SHA-256 against the marker (``analytics.store.integrity`` does, for
DuckDB). ``neuronpipe verify --repair`` quarantines a damaged attempt, and the views here honour the quarantine.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from analytics.schema import LAYOUT_PREFIX, TABLES, schema_for

STORED_PREFIX = "stored_"  # the Glue table over every file of a table's folder
MARKER_LINES = "commit_marker_lines"
QUARANTINE_LINES = "quarantine_record_lines"
COMMITTED_ATTEMPTS = "committed_attempts"
COMMITTED_FILES = "committed_files"
# DuckDB registers these besides the tables (analytics.views): same names here.
EVERY_ATTEMPT_TABLES = ("compiles",)
EVERY_ATTEMPT_SUFFIX = "_every_attempt"
STORE_EXCLUSIONS = "store_exclusions"
ALL_ATTEMPTS_TABLES = ("lane_runs",)  # readers see every committed attempt of these, not only the latest


class GlueTypeError(ValueError):
    """An Arrow type with no Glue (Hive) column type here."""


def glue_type(dtype: pa.DataType) -> str:
    """The Glue (Hive DDL) column type Athena reads an Arrow column of ``dtype`` as."""
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "string"
    if pa.types.is_boolean(dtype):
        return "boolean"
    if pa.types.is_int8(dtype):
        return "tinyint"
    if pa.types.is_int16(dtype):
        return "smallint"
    if pa.types.is_int32(dtype):
        return "int"
    if pa.types.is_int64(dtype):
        return "bigint"
    if pa.types.is_float32(dtype):
        return "float"
    if pa.types.is_float64(dtype):
        return "double"
    if pa.types.is_timestamp(dtype):
        return "timestamp"
    if pa.types.is_date(dtype):
        return "date"
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return f"array<{glue_type(dtype.value_type)}>"
    if pa.types.is_map(dtype):
        return f"map<{glue_type(dtype.key_type)},{glue_type(dtype.item_type)}>"
    if pa.types.is_struct(dtype):
        return "struct<" + ",".join(f"{f.name}:{glue_type(f.type)}" for f in dtype) + ">"
    raise GlueTypeError(f"no Glue type for Arrow {dtype}")


def glue_columns(table: str) -> list[tuple[str, str, str]]:
    """(name, Glue type, description) of every column of ``table``'s Arrow schema, in order."""
    out = []
    for field in schema_for(table):
        meta: Mapping[bytes, bytes] = field.metadata or {}
        doc = (meta.get(b"doc") or meta.get(b"description") or b"").decode()[:255]
        out.append((field.name, glue_type(field.type), doc))
    return out


def stored_table(table: str) -> str:
    return f"{STORED_PREFIX}{table}"


def table_prefix(table: str) -> str:
    """The folder of ``table``'s files under the store root (trailing slash, as Athena wants a LOCATION)."""
    return f"{LAYOUT_PREFIX}/{table}/"


MARKER_PREFIX = f"{LAYOUT_PREFIX}/_commits/"
QUARANTINE_PREFIX = f"{LAYOUT_PREFIX}/_quarantine/"

# A marker's key and lines (analytics.store.markers: json.dumps(sort_keys=True, indent=1)).
_KEY = r"/v1/_commits/run_id=([^/]+)/lane=([^/]+)/([^/]+)\.json$"
_QKEY = r"/v1/_quarantine/run_id=([^/]+)/lane=([^/]+)/([^/]+)\.json$"
_TABLE_LINE = r'^  "([a-z_0-9]+)": "(v1/[a-z_0-9]+/run_id=[^"/]+/lane=[^"/]+/[^"/]+\.parquet)",?$'


def committed_layer() -> list[tuple[str, str]]:
    """(view name, Trino ``CREATE OR REPLACE VIEW``) of the committed layer, in creation order (see the module)."""
    views: list[tuple[str, str]] = []
    views.append(
        (
            COMMITTED_ATTEMPTS,
            f"""CREATE OR REPLACE VIEW {COMMITTED_ATTEMPTS} AS
WITH markers AS (
  SELECT "$path" AS marker_uri,
         regexp_extract("$path", '^(.*){_KEY}', 1) AS store_root,
         regexp_extract("$path", '{_KEY}', 1) AS run_id,
         regexp_extract("$path", '{_KEY}', 2) AS lane,
         regexp_extract("$path", '{_KEY}', 3) AS attempt,
         array_agg(line) AS lines
  FROM {MARKER_LINES}
  WHERE regexp_like("$path", '{_KEY}')
  GROUP BY "$path"
)
SELECT marker_uri, store_root, run_id, lane, attempt,
       contains(lines, ' "supersedes": true,') AS supersedes,
       lines
FROM markers
WHERE contains(lines, concat(' "run_id": "', run_id, '",'))
  AND contains(lines, concat(' "lane": "', lane, '",'))
  AND contains(lines, concat(' "attempt": "', attempt, '",'))""",
        )
    )
    quarantined = f"""SELECT DISTINCT regexp_extract("$path", '{_QKEY}', 1) AS run_id,
         regexp_extract("$path", '{_QKEY}', 2) AS lane, regexp_extract("$path", '{_QKEY}', 3) AS attempt,
         "$path" AS record_uri
  FROM {QUARANTINE_LINES} WHERE regexp_like("$path", '{_QKEY}')"""
    views.append(
        (
            COMMITTED_FILES,
            f"""CREATE OR REPLACE VIEW {COMMITTED_FILES} AS
WITH quarantined AS (
  {quarantined}
),
usable AS (
  SELECT c.* FROM {COMMITTED_ATTEMPTS} c
  WHERE NOT EXISTS (SELECT 1 FROM quarantined q
                    WHERE q.run_id = c.run_id AND q.lane = c.lane AND q.attempt = c.attempt)
),
latest AS (
  SELECT run_id, lane, max(attempt) AS attempt FROM usable WHERE supersedes GROUP BY run_id, lane
),
named AS (
  SELECT u.run_id, u.lane, u.attempt, u.store_root,
         regexp_extract(l.line, '{_TABLE_LINE}', 1) AS table_name,
         regexp_extract(l.line, '{_TABLE_LINE}', 2) AS table_key
  FROM usable u CROSS JOIN UNNEST(u.lines) AS l(line)
  WHERE regexp_like(l.line, '{_TABLE_LINE}')
)
SELECT n.table_name, n.run_id, n.lane, n.attempt, concat(n.store_root, '/', n.table_key) AS file_uri,
       coalesce(n.attempt = lt.attempt, false) AS latest
FROM named n LEFT JOIN latest lt ON lt.run_id = n.run_id AND lt.lane = n.lane
WHERE n.table_key = concat('v1/', n.table_name, '/run_id=', n.run_id, '/lane=', n.lane, '/', n.attempt, '.parquet')""",
        )
    )
    for table in sorted(TABLES):
        which = "" if table in ALL_ATTEMPTS_TABLES else " AND latest"
        views.append((table, _over_files(table, table, which)))
    for table in EVERY_ATTEMPT_TABLES:
        views.append((f"{table}{EVERY_ATTEMPT_SUFFIX}", _over_files(f"{table}{EVERY_ATTEMPT_SUFFIX}", table, "")))
    views.append(
        (
            STORE_EXCLUSIONS,
            f"""CREATE OR REPLACE VIEW {STORE_EXCLUSIONS} AS
WITH quarantined AS (
  {quarantined}
)
SELECT run_id, lane, attempt, 'attempt_quarantined' AS kind, record_uri AS subject,
       'quarantined (neuronpipe verify --repair); Athena checks no sizes or hashes' AS reason
FROM quarantined""",
        )
    )
    return views


def _over_files(name: str, table: str, which: str) -> str:
    return f"""CREATE OR REPLACE VIEW {name} AS
SELECT t.* FROM {stored_table(table)} t
WHERE t."$path" IN (SELECT file_uri FROM {COMMITTED_FILES} WHERE table_name = '{table}'{which})"""
