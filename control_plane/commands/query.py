"""`neuronpipe query "SQL"`: read-only SQL over the committed results (DuckDB: one view per table, and the derived
views).

Read-only and sandboxed (rule 16: no query writes):

* every statement is classified by DuckDB's own parser before any of them runs. A read runs: ``SELECT`` (with
  ``WITH``, ``FROM``-first, ``VALUES``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``), ``EXPLAIN [ANALYZE]`` of one,
  and the read-only ``PRAGMA`` calls (:data:`READ_ONLY_PRAGMAS`). Any other statement — ``COPY``, ``ATTACH``,
  ``DETACH``, ``INSTALL``/``LOAD``, ``CREATE``, ``INSERT``, ``UPDATE``, ``DELETE``, ``DROP``, ``ALTER``,
  ``EXPORT``/``IMPORT DATABASE``, ``SET``/``RESET``, a ``PRAGMA`` that sets, ``CALL``, a transaction — refuses
  the whole SQL with one line naming its type, exit 2, and nothing runs;
* DuckDB then reaches no file but the committed files the views read (``analytics.views.sandbox_connection``:
  ``read_text('/etc/passwd')`` and ``read_csv`` of any other path fail), loads no extension, and its
  configuration is locked; spill files go to a private temporary directory removed at exit;
* each statement has a timeout (``--timeout``, default :data:`DEFAULT_TIMEOUT_S` s): past it the statement is
  interrupted, one line, exit 1.

Several statements (``select 1; select 2``) run in order and every result is printed, each after a header
line ``-- statement 2 of 2: select 2``; one statement prints its result alone (no header). A statement that
fails stops the rest: one line naming it, exit 2.

``--engine athena`` runs the SQL in the deploy's Athena workgroup instead (:func:`run_athena`,
``control_plane.athena``) and prints the same table.

Bad input gets one line and exit 2: a results root that is missing or a file, an unknown or malformed run
id, empty or non-UTF-8 SQL, SQL that fails (at parse or while rows are produced). A damaged attempt is left
out of the views with one warning line; the query runs over the rest.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import threading
from collections.abc import Callable
from typing import Any

from pipeline.printable import visible

DEFAULT_TIMEOUT_S = 60.0
EXIT_REFUSED = 2
EXIT_TIMED_OUT = 1
# PRAGMA calls that only read (DuckDB rewrites them to table functions); any other PRAGMA may change state.
READ_ONLY_PRAGMAS = frozenset(
    {
        "collations",
        "database_list",
        "database_size",
        "functions",
        "metadata_info",
        "platform",
        "show",
        "show_databases",
        "show_tables",
        "show_tables_expanded",
        "storage_info",
        "table_info",
        "user_agent",
        "version",
    }
)
_LEAD = r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*"  # whitespace and comments before the first keyword
_EXPLAIN = re.compile(_LEAD + r"explain\b\s*(?:\([^)]*\))?\s*(?:analy[sz]e\b)?", re.I | re.S)
_PRAGMA = re.compile(_LEAD + r"pragma\s+(?P<name>\w+)\s*(?P<rest>.*)", re.I | re.S)
_KIND_NAMES = {  # DuckDB's statement types, as a person types them
    "LOAD": "INSTALL/LOAD",
    "SET": "SET/RESET/USE",
    "VARIABLE_SET": "SET VARIABLE",
    "CREATE_FUNC": "CREATE FUNCTION",
    "COPY_DATABASE": "COPY DATABASE",
    "MERGE_INTO": "MERGE INTO",
    "TRANSACTION": "BEGIN/COMMIT/ROLLBACK",
    "VACUUM": "VACUUM/ANALYZE",
    "MULTI": "PIVOT (several statements)",
}


class QueryRefusedError(ValueError):
    """SQL that holds a statement ``query`` does not run (not a read): one line naming its type."""


class QueryTimeoutError(RuntimeError):
    """A statement ran past ``--timeout`` and was interrupted."""


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "query",
        help="run read-only SQL over the committed results (local directory or s3://)",
        description="Run read-only SQL over the committed results. Only reads run (SELECT, "
        "EXPLAIN, read-only PRAGMA); any other statement refuses the SQL (exit 2). "
        "Several statements separated by ';' print every result, each after a header "
        "line '-- statement I of N: SQL'.",
    )
    p.add_argument("sql", help='e.g. "select count(*) from host_bench"')
    p.add_argument(
        "--engine",
        choices=("duckdb", "athena"),
        default="duckdb",
        help="duckdb (default): the views over --results, here; athena: the same views in the deploy's Athena "
        "workgroup (SSM /neuronpipe/athena/workgroup), over the shared bucket",
    )
    p.add_argument("--results", default="results", help="results root: directory or s3://bucket/prefix")
    p.add_argument("--run-id", action="append", default=None, help="restrict to these runs (repeatable)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument(
        "--verify",
        action="store_true",
        help="check every file's SHA-256 against its marker (also: NEURONPIPE_VERIFY_HASHES=1)",
    )
    p.add_argument(
        "--timeout",
        type=_timeout,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"interrupt a statement after S seconds (exit 1; default {DEFAULT_TIMEOUT_S:g})",
    )
    p.set_defaults(func=run)


def read_statements(sql: str) -> list[str]:
    """The statements of ``sql`` (DuckDB's parser), when every one is a read; else :class:`QueryRefusedError`
    naming the first that is not. A syntax error is DuckDB's ``ParserException``."""
    import duckdb

    try:
        statements = duckdb.extract_statements(sql)
    except ValueError as exc:  # a statement type the Python client has no name for ("29 is not a valid ...")
        raise QueryRefusedError(f"query runs only reads; the SQL holds a statement of another kind ({exc})") from None
    for i, statement in enumerate(statements, 1):
        kind = _refused_kind(statement)
        if kind is not None:
            where = f"statement {i} of {len(statements)}" if len(statements) > 1 else "the statement"
            raise QueryRefusedError(
                f"query runs only reads (SELECT, EXPLAIN, read-only PRAGMA); {where} is "
                f"{kind}: {_snippet(statement.query, 60)}"
            )
    return [s.query for s in statements]


def _refused_kind(statement: Any) -> str | None:
    """None for a read; else what the statement is (``a COPY statement``)."""
    import duckdb

    try:
        kind = statement.type.name
    except ValueError as exc:  # a type the Python client has no name for ("29 is not a valid StatementType.")
        return f"a statement of a kind query does not run ({str(exc).rstrip('.')})"
    if kind == "SELECT":
        return None
    if kind == "EXPLAIN":  # EXPLAIN ANALYZE runs what it explains: the explained statement must be a read
        head = _EXPLAIN.match(statement.query)
        try:
            inner = duckdb.extract_statements(statement.query[head.end() :]) if head else []
        except (duckdb.Error, ValueError):
            inner = []
        if len(inner) == 1 and inner[0].type.name == "SELECT":
            return None
        if len(inner) != 1:
            return "an EXPLAIN whose statement cannot be checked"
        return f"an EXPLAIN of {_a(_KIND_NAMES.get(inner[0].type.name, inner[0].type.name))} statement"
    if kind == "PRAGMA":
        call = _PRAGMA.match(statement.query)
        if call and call["name"].lower() in READ_ONLY_PRAGMAS and not call["rest"].lstrip().startswith("="):
            return None
        return "a PRAGMA that is not a read-only one"
    return f"{_a(_KIND_NAMES.get(kind, kind))} statement"


def _a(name: str) -> str:
    return f"{'an' if name[:1] in 'AEIOU' else 'a'} {name}"


def _snippet(sql: str, limit: int) -> str:
    text = " ".join(sql.split()).rstrip(";").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run(args: argparse.Namespace) -> int:
    import tempfile

    if getattr(args, "engine", "duckdb") == "athena":
        return run_athena(args)

    import duckdb

    from analytics.views import connect
    from control_plane.commands._results import ResultsInputError, open_results, read_errors, stdout_closed, utf8_text

    try:
        sql = utf8_text(args.sql, "the SQL")
        if not sql.strip():
            raise ResultsInputError("the SQL is empty")
        statements = read_statements(sql)
        if not statements:
            raise ResultsInputError("the SQL holds no statement (only comments or ';')")
        store = open_results(args.results, args.run_id)
    except (ResultsInputError, QueryRefusedError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except duckdb.Error as exc:  # a syntax error
        print(f"error: {type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_REFUSED
    with tempfile.TemporaryDirectory(prefix="neuronpipe-query-") as spill:
        try:
            con = connect(store, run_ids=args.run_id, verify=args.verify, sandbox=True, temp_directory=spill)
        except read_errors() as exc:
            print(f"error: cannot read {args.results}: {exc}", file=sys.stderr)
            return EXIT_REFUSED
        try:
            with stdout_closed():
                return _run_all(con, statements, args.format, args.timeout)
        finally:
            con.close()


def run_athena(args: argparse.Namespace, clients: Callable[[str], Any] | None = None) -> int:
    """The command with ``--engine athena``; ``clients(name)`` makes the boto3 clients (tests pass moto's)."""
    import duckdb

    from control_plane.athena import (
        AthenaInputError,
        AthenaQueryFailed,
        AthenaTimeout,
        boto3_client,
        read_statements,
        resolve_target,
        run_statement,
    )
    from control_plane.commands._results import ResultsInputError, read_errors, stdout_closed, utf8_text

    try:
        sql = utf8_text(args.sql, "the SQL")
        if not sql.strip():
            raise AthenaInputError("the SQL is empty")
        if args.run_id:
            raise AthenaInputError("--run-id is the DuckDB engine's; with --engine athena filter on run_id in the SQL")
        if args.verify:
            raise AthenaInputError("--verify is the DuckDB engine's: Athena checks no file hashes (see `verify`)")
        statements = read_statements(sql)
        if not statements:
            raise AthenaInputError("the SQL holds no statement (only comments or ';')")
        make = clients or boto3_client
        workgroup, database = resolve_target(make("ssm"))
        athena = make("athena")
    except (AthenaInputError, ResultsInputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except read_errors() as exc:  # no credentials, no region
        print(f"error: cannot reach Athena: {type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_REFUSED
    n = len(statements)
    with stdout_closed():
        for i, text in enumerate(statements, 1):
            where = f"statement {i} of {n}: " if n > 1 else ""
            if n > 1:
                print(f"-- statement {i} of {n}: {_snippet(text, 200)}", flush=True)
            try:
                table = run_statement(athena, text, workgroup, database, args.timeout)
            except AthenaTimeout as exc:
                print(f"error: {where}{exc}", file=sys.stderr)
                return EXIT_TIMED_OUT
            except AthenaQueryFailed as exc:
                print(f"error: {where}{exc}", file=sys.stderr)
                return EXIT_REFUSED
            except read_errors() as exc:
                print(f"error: {where}{type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
                return EXIT_REFUSED
            con = duckdb.connect()
            try:
                _print(con.from_arrow(table), args.format)
            finally:
                con.close()
    return 0


def _run_all(con: Any, statements: list[str], fmt: str, timeout_s: float) -> int:
    import duckdb

    n = len(statements)
    for i, text in enumerate(statements, 1):
        where = f"statement {i} of {n}: " if n > 1 else ""
        if n > 1:
            print(f"-- statement {i} of {n}: {_snippet(text, 200)}", flush=True)
        try:
            _with_timeout(con, timeout_s, lambda: _print(con.sql(text), fmt))  # noqa: B023 - called within this iteration
        except QueryTimeoutError as exc:
            print(f"error: {where}{exc}", file=sys.stderr)
            return EXIT_TIMED_OUT
        except duckdb.Error as exc:
            print(f"error: {where}{type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
            return EXIT_REFUSED
    return 0


def _with_timeout(con: Any, timeout_s: float, work: Callable[[], Any]) -> Any:
    """``work()``, interrupted (``con.interrupt()`` from a timer thread) after ``timeout_s``."""
    import duckdb

    fired = threading.Event()

    def interrupt() -> None:
        fired.set()
        con.interrupt()

    from control_plane.interrupts import on_interrupt

    timer = threading.Timer(timeout_s, interrupt)
    timer.daemon = True
    timer.start()
    try:
        with on_interrupt(con.interrupt):  # a signal stops the statement even if its exception is dropped
            return work()
    except duckdb.InterruptException as exc:
        if fired.is_set():
            raise QueryTimeoutError(f"interrupted after the timeout of {timeout_s:g} s (--timeout)") from exc
        raise KeyboardInterrupt("the statement was interrupted by a signal") from exc
    finally:
        timer.cancel()


def _shown(value: Any) -> Any:
    """A value as printed: a string (or a string inside a list or a map) with its control characters escaped."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, list):
        return [_shown(v) for v in value]
    if isinstance(value, dict):
        return {_shown(k): _shown(v) for k, v in value.items()}
    return value


def _print(rel, fmt: str) -> int:
    """Print a result. Every string is shown as :func:`pipeline.printable.visible` shows it (a stored string's
    control characters as escapes): what a box wrote never acts on the reader's terminal or spreadsheet."""
    if rel is None:
        return 0
    cols = [visible(c) for c in rel.columns]
    if fmt == "table":
        import duckdb
        import pyarrow as pa

        table = rel.to_arrow_table()
        table = pa.table(
            [
                pa.array([_shown(v) for v in column.to_pylist()], type=pa.string())
                if pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
                else column
                for column in table.columns
            ],
            names=cols,
        )
        duckdb.from_arrow(table).show(max_rows=10_000, max_width=10_000)
    elif fmt == "csv":
        import csv

        rows = rel.fetchall()  # fetched before the header: a run-time error prints nothing half-way
        writer = csv.writer(sys.stdout, lineterminator="\n")  # LF: survives pipes and `tail`
        writer.writerow(cols)
        writer.writerows([_shown(v) for v in row] for row in rows)
    else:
        import json

        rows = rel.fetchall()
        for row in rows:
            print(json.dumps(dict(zip(cols, (_shown(v) for v in row))), default=str))
    return 0
