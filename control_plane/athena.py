"""Athena for `neuronpipe query --engine athena "SQL"` and the view installer: the same read-only SQL, run in the
deploy's Athena workgroup.

The workgroup and the Glue database come from the deploy (SSM ``/neuronpipe/athena/workgroup`` and
``/neuronpipe/athena/database``, which ``infra/stacks/athena.py`` writes), or from ``NEURONPIPE_ATHENA_WORKGROUP`` /
``NEURONPIPE_ATHENA_DATABASE``. Each statement is parsed in Trino's dialect first (sqlglot) and only reads run
(``SELECT``, ``WITH``, ``VALUES``, ``DESCRIBE``, ``SHOW``, ``EXPLAIN``); the workgroup's query role could not write
anyway. Each statement is started, polled until it ends (past ``--timeout`` it is stopped: one line, exit 1), and
its result read page by page; the rows are typed from Athena's column types, and ``control_plane.commands.query``
prints them with the DuckDB engine's printer, so both engines print the same table, CSV or JSON lines.

Bad input, one line and exit 2, nothing started: no workgroup deployed (the SSM parameter is missing), SQL that
does not parse or is not a read, ``--run-id`` or ``--verify`` (DuckDB's: filter on ``run_id`` in the SQL; Athena
checks no hashes), no AWS credentials. A statement Athena fails or cancels (the bytes-scanned limit included):
one line with Athena's reason, exit 2.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

WORKGROUP_PARAMETER = "/neuronpipe/athena/workgroup"
DATABASE_PARAMETER = "/neuronpipe/athena/database"
WORKGROUP_ENV = "NEURONPIPE_ATHENA_WORKGROUP"
DATABASE_ENV = "NEURONPIPE_ATHENA_DATABASE"
POLL_S = (0.2, 0.5, 1.0, 2.0)  # waits between polls, the last repeated


class AthenaInputError(ValueError):
    """Bad input or a missing deployment (the message is the one line printed)."""


class AthenaQueryFailed(RuntimeError):
    """Athena failed or cancelled a statement (its reason)."""


class AthenaTimeout(RuntimeError):
    """A statement ran past ``--timeout`` and was stopped."""


def read_statements(sql: str) -> list[str]:
    """The statements of ``sql`` in Trino's dialect, when every one is a read; else :class:`AthenaInputError`."""
    try:
        import sqlglot
        from sqlglot import exp
        from sqlglot.errors import ParseError
    except ImportError:
        raise AthenaInputError("--engine athena needs sqlglot: pip install 'neuron-pipelines[athena]'") from None
    try:
        parsed = [s for s in sqlglot.parse(sql, read="trino") if s is not None and not isinstance(s, exp.Semicolon)]
    except ParseError as exc:
        raise AthenaInputError(f"the SQL does not parse as Trino (Athena) SQL: {' '.join(str(exc).split())}") from None
    reads = (exp.Query, exp.Describe, exp.Show)
    for i, statement in enumerate(parsed, 1):
        inner = statement.this if isinstance(statement, exp.Command) else statement
        ok = isinstance(statement, reads) or (
            isinstance(statement, exp.Command) and str(inner).upper() in ("SHOW", "EXPLAIN", "DESCRIBE")
        )
        if not ok:
            where = f"statement {i} of {len(parsed)}" if len(parsed) > 1 else "the statement"
            raise AthenaInputError(
                f"query runs only reads (SELECT, WITH, VALUES, DESCRIBE, SHOW, EXPLAIN); {where} is "
                f"{type(statement).__name__.upper()}: {_snippet(statement.sql('trino'), 60)}"
            )
    return [s.sql("trino") for s in parsed]


def _snippet(sql: str, limit: int) -> str:
    text = " ".join(sql.split()).rstrip(";").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def resolve_target(ssm: Any) -> tuple[str, str]:
    """(workgroup, database): the environment's, else the deploy's SSM parameters; :class:`AthenaInputError` when
    no workgroup is deployed."""
    from botocore.exceptions import BotoCoreError, ClientError

    found = {}
    for env, name in ((WORKGROUP_ENV, WORKGROUP_PARAMETER), (DATABASE_ENV, DATABASE_PARAMETER)):
        if os.environ.get(env):
            found[name] = os.environ[env]
            continue
        try:
            found[name] = ssm.get_parameter(Name=name)["Parameter"]["Value"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ParameterNotFound":
                raise AthenaInputError(
                    f"no Athena workgroup deployed: SSM parameter {name} not found (deploy the NeuronPipelinesBase "
                    f"stack, or set {env})"
                ) from None
            raise AthenaInputError(f"cannot read SSM parameter {name}: {exc}") from None
        except BotoCoreError as exc:
            raise AthenaInputError(f"cannot read SSM parameter {name}: {exc}") from None
    return found[WORKGROUP_PARAMETER], found[DATABASE_PARAMETER]


def run_statement(
    athena: Any,
    sql: str,
    workgroup: str,
    database: str,
    timeout_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Any:
    """Start ``sql``, poll it to its end, and return its rows as an Arrow table (column types from Athena's)."""
    started = athena.start_query_execution(
        QueryString=sql, WorkGroup=workgroup, QueryExecutionContext={"Database": database}
    )
    qid = started["QueryExecutionId"]
    deadline = clock() + timeout_s
    polls = 0
    while True:
        status = athena.get_query_execution(QueryExecutionId=qid)["QueryExecution"]["Status"]
        state = status.get("State")
        if state == "SUCCEEDED":
            break
        if state in ("FAILED", "CANCELLED"):
            reason = " ".join(str(status.get("StateChangeReason") or state.lower()).split())
            raise AthenaQueryFailed(f"Athena {state.lower()} the query {qid}: {reason}")
        if clock() >= deadline:
            athena.stop_query_execution(QueryExecutionId=qid)
            raise AthenaTimeout(f"stopped query {qid} after the timeout of {timeout_s:g} s (--timeout)")
        sleep(POLL_S[min(polls, len(POLL_S) - 1)])
        polls += 1
    return read_results(athena, qid)


def read_results(athena: Any, qid: str) -> Any:
    """Every page of a finished query as one Arrow table. A SELECT's first row repeats the column names."""
    import pyarrow as pa

    columns: list[dict[str, Any]] | None = None
    rows: list[list[str | None]] = []
    first = True
    for page in athena.get_paginator("get_query_results").paginate(QueryExecutionId=qid):
        result = page["ResultSet"]
        if columns is None:
            columns = list(result.get("ResultSetMetadata", {}).get("ColumnInfo", []))
        for row in result.get("Rows", []):
            values = [d.get("VarCharValue") for d in row.get("Data", [])]
            if first:
                first = False
                if values == [c["Name"] for c in columns or []]:
                    continue  # the header row of a SELECT
            rows.append(values)
    columns = columns or []
    arrays = []
    for i, col in enumerate(columns):
        kind, convert = _arrow_type(col)
        arrays.append(pa.array([_value(r[i] if i < len(r) else None, convert) for r in rows], type=kind))
    return pa.table(arrays, names=[c["Name"] for c in columns])


def _arrow_type(col: dict[str, Any]) -> tuple[Any, Callable[[str], Any]]:
    import pyarrow as pa

    t = str(col.get("Type", "varchar")).lower()
    if t in ("tinyint", "smallint", "integer", "int", "bigint"):
        return pa.int64(), int
    if t in ("double", "real", "float"):
        return pa.float64(), float
    if t == "boolean":
        return pa.bool_(), lambda v: v.lower() == "true"
    if t == "decimal":
        precision, scale = int(col.get("Precision") or 38), int(col.get("Scale") or 0)
        return pa.decimal128(max(1, min(precision, 38)), scale), Decimal
    if t == "date":
        import datetime as dt

        return pa.date32(), dt.date.fromisoformat
    if t.startswith("timestamp"):
        import datetime as dt

        return pa.timestamp("us"), lambda v: dt.datetime.fromisoformat(v.replace(" UTC", ""))
    return pa.string(), str  # varchar, char, json, array, map, row: Athena's text of the value


def _value(text: str | None, convert: Callable[[str], Any]) -> Any:
    return None if text is None else convert(text)


def boto3_client(name: str) -> Any:
    from control_plane.aws import aws_client

    return aws_client(name)
