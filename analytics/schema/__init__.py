"""The results contract: one Arrow schema per table, versioned.

Every table carries ``run_id``, ``lane`` and ``attempt`` (added by the writer
when a lane's rows lack them). Tables are split by domain into modules so that
each domain owns its columns; this module assembles them and validates batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from analytics.schema.aggregates import AGGREGATE_TABLES
from analytics.schema.boxes import BOX_TABLES
from analytics.schema.core import CORE_TABLES
from analytics.schema.encoders import ENCODER_TABLES
from analytics.schema.history import HISTORY_TABLES
from analytics.schema.kernels import KERNEL_TABLES
from analytics.schema.matrix import MATRIX_TABLES
from analytics.schema.predictions import PREDICTION_TABLES
from analytics.schema.rag import RAG_TABLES
from analytics.schema.serving import SERVING_TABLES
from analytics.schema.training import TRAINING_TABLES

SCHEMA_VERSION = 1
LAYOUT_PREFIX = f"v{SCHEMA_VERSION}"

TABLES: dict[str, pa.Schema] = {
    **CORE_TABLES,
    **TRAINING_TABLES,
    **SERVING_TABLES,
    **AGGREGATE_TABLES,
    **BOX_TABLES,
    **KERNEL_TABLES,
    **PREDICTION_TABLES,
    **ENCODER_TABLES,
    **RAG_TABLES,
    **HISTORY_TABLES,
    **MATRIX_TABLES,
}

KEY_COLUMNS = ("run_id", "lane", "attempt")


class SchemaMismatchError(ValueError):
    """A batch does not match its table's schema; names the table and the column."""

    def __init__(self, table: str, column: str | None, reason: str):
        self.table = table
        self.column = column
        where = f"table {table!r}" + (f", column {column!r}" if column else "")
        super().__init__(f"{where}: {reason}")


class UnknownTableError(KeyError):
    def __init__(self, table: str):
        self.table = table
        super().__init__(f"unknown table {table!r}; valid tables: {', '.join(sorted(TABLES))}")

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return self.args[0]


def schema_for(table: str) -> pa.Schema:
    try:
        return TABLES[table]
    except KeyError:
        raise UnknownTableError(table) from None


def conform(
    table: str, data: pa.Table | pa.RecordBatch | Iterable[Mapping[str, Any]], defaults: Mapping[str, Any] | None = None
) -> pa.Table:
    """Return ``data`` as an Arrow table with exactly ``table``'s schema.

    ``data`` is an Arrow table/batch or an iterable of row dicts. Columns missing
    from the data are filled from ``defaults`` (e.g. run_id/lane/attempt) or
    null where nullable; an unknown column, a missing non-nullable column or a
    value that cannot be cast raises :class:`SchemaMismatchError` naming the
    table and the column.
    """
    schema = schema_for(table)
    defaults = dict(defaults or {})
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        columns = {name: data.column(name) for name in data.column_names}
        n = data.num_rows
    else:
        rows = list(data)
        n = len(rows)
        names: list[str] = []
        seen: set[str] = set()
        for row in rows:
            for k in row:
                if k not in seen:
                    seen.add(k)
                    names.append(k)
        columns = {k: [row.get(k) for row in rows] for k in names}
    unknown = [c for c in columns if schema.get_field_index(c) < 0]
    if unknown:
        raise SchemaMismatchError(table, unknown[0], f"not in the schema (valid columns: {', '.join(schema.names)})")
    arrays = []
    for field in schema:
        if field.name in columns:
            values = columns[field.name]
        elif field.name in defaults:
            values = [defaults[field.name]] * n
        elif field.nullable:
            values = [None] * n
        else:
            raise SchemaMismatchError(table, field.name, "required column is missing")
        try:
            if isinstance(values, (pa.Array, pa.ChunkedArray)):
                arr = values.cast(field.type) if values.type != field.type else values
            else:
                arr = pa.array(values, type=field.type)
        except (
            pa.ArrowInvalid,
            pa.ArrowTypeError,
            pa.ArrowNotImplementedError,
            TypeError,
            ValueError,
            OverflowError,
        ) as exc:
            raise SchemaMismatchError(table, field.name, f"cannot store values as {field.type}: {exc}") from exc
        if not field.nullable and arr.null_count:
            raise SchemaMismatchError(table, field.name, "null in a non-nullable column")
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=schema)


def empty_table(table: str) -> pa.Table:
    return schema_for(table).empty_table()


__all__ = [
    "SCHEMA_VERSION",
    "LAYOUT_PREFIX",
    "TABLES",
    "KEY_COLUMNS",
    "SchemaMismatchError",
    "UnknownTableError",
    "schema_for",
    "conform",
    "empty_table",
]
