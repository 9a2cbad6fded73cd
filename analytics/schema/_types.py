"""Column helpers shared by the table modules."""

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")


def key_fields() -> list[pa.Field]:
    return [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("lane", pa.string(), nullable=False),
        pa.field("attempt", pa.string(), nullable=False),
    ]


def f(name: str, typ: pa.DataType, nullable: bool = True, doc: str | None = None) -> pa.Field:
    return pa.field(name, typ, nullable=nullable, metadata={"doc": doc} if doc else None)


def table(*fields: pa.Field, doc: str = "") -> pa.Schema:
    return pa.schema(key_fields() + list(fields), metadata={"doc": doc})
