"""`neuronpipe query --engine athena`: against moto's Athena and SSM (moto runs no SQL: its results are queued), and a
stubbed Athena client at the boto3 boundary for what moto cannot do (a failed query, a timeout, several pages).
Athena itself has not run here."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from types import SimpleNamespace

import boto3
import duckdb
import pytest
from moto import mock_aws
from moto.athena.models import QueryResults, athena_backends

from control_plane.athena import (
    AthenaQueryFailed,
    AthenaTimeout,
    read_statements,
    run_statement,
)
from control_plane.cli import main
from control_plane.commands.query import _print

REGION = "us-west-2"
ACCOUNT = "123456789012"


@pytest.fixture
def aws(monkeypatch):
    for name, value in {
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("NEURONPIPE_ATHENA_WORKGROUP", raising=False)
    monkeypatch.delenv("NEURONPIPE_ATHENA_DATABASE", raising=False)
    with mock_aws():
        yield athena_backends[ACCOUNT][REGION]


def _deploy(workgroup: str = "neuron-pipelines", database: str = "neuron_pipelines") -> None:
    ssm = boto3.client("ssm", region_name=REGION)
    ssm.put_parameter(Name="/neuronpipe/athena/workgroup", Value=workgroup, Type="String")
    ssm.put_parameter(Name="/neuronpipe/athena/database", Value=database, Type="String")
    boto3.client("athena", region_name=REGION).create_work_group(Name=workgroup)


def _row(*values):
    return {"Data": [{} if v is None else {"VarCharValue": v} for v in values]}


COLUMNS = [
    {"Name": "run_id", "Type": "varchar"},
    {"Name": "n", "Type": "bigint"},
    {"Name": "p50_ms", "Type": "double"},
    {"Name": "ok", "Type": "boolean"},
]


def test_a_query_runs_in_the_deployed_workgroup_and_prints_the_duckdb_engines_table(aws, capsys):
    _deploy()
    rows = [_row("run_id", "n", "p50_ms", "ok"), _row("r1", "3", "12.5", "true"), _row("r2", None, "7.25", "false")]
    aws.query_results_queue.append(QueryResults(rows=rows, column_info=COLUMNS))
    assert main(["query", "--engine", "athena", "SELECT run_id, n, p50_ms, ok FROM serving_points"]) == 0
    printed = capsys.readouterr().out
    (execution,) = aws.executions.values()
    assert execution.workgroup.name == "neuron-pipelines"
    assert execution.context == {"Database": "neuron_pipelines"}
    assert execution.query.startswith("SELECT run_id, n, p50_ms, ok FROM serving_points")
    same = duckdb.sql(
        "SELECT * FROM (VALUES ('r1', 3::BIGINT, 12.5::DOUBLE, true), ('r2', NULL, 7.25, false)) "
        "v(run_id, n, p50_ms, ok)"
    )
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        _print(same, "table")
    assert printed == buffer.getvalue()


def test_csv_output_has_the_header_once_and_typed_values(aws, capsys):
    _deploy()
    rows = [_row("run_id", "n", "p50_ms", "ok"), _row("r1", "3", "12.5", "true")]
    aws.query_results_queue.append(QueryResults(rows=rows, column_info=COLUMNS))
    assert main(["query", "--engine", "athena", "--format", "csv", "SELECT * FROM serving_points"]) == 0
    assert capsys.readouterr().out == "run_id,n,p50_ms,ok\nr1,3,12.5,True\n"


def test_no_workgroup_deployed_is_one_line_and_exit_2(aws, capsys):
    assert main(["query", "--engine", "athena", "SELECT 1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no Athena workgroup deployed" in err and "/neuronpipe/athena/workgroup" in err
    assert not aws.executions


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("CREATE TABLE t AS SELECT 1 AS x", "CREATE"),
        ("SELECT 1; DROP TABLE requests", "statement 2 of 2"),
        ("INSERT INTO requests SELECT * FROM requests", "INSERT"),
        ("SELEC 1 FRM", "does not parse"),
    ],
)
def test_only_reads_run_and_nothing_starts_otherwise(aws, capsys, sql, words):
    _deploy()
    assert main(["query", "--engine", "athena", sql]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and words in err
    assert not aws.executions


@pytest.mark.parametrize(
    ("extra", "words"), [(["--run-id", "r1"], "--run-id"), (["--verify"], "--verify"), ([], "the SQL is empty")]
)
def test_duckdb_only_options_and_empty_sql_are_refused(aws, capsys, extra, words):
    _deploy()
    sql = "" if not extra else "SELECT 1"
    assert main(["query", "--engine", "athena", *extra, sql]) == 2
    assert words in capsys.readouterr().err


def test_an_unknown_engine_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["query", "--engine", "bigquery", "SELECT 1"])
    assert exc.value.code == 2
    assert "invalid choice: 'bigquery'" in capsys.readouterr().err


def test_reads_of_every_kind_pass_the_check():
    assert len(read_statements("SELECT 1; WITH a AS (SELECT 1) SELECT * FROM a; SHOW TABLES; DESCRIBE requests")) == 4


class StubAthena:
    """Athena at the boto3 boundary: a scripted sequence of states, and result pages."""

    def __init__(self, states, pages=()):
        self.states = list(states)
        self.pages = list(pages)
        self.stopped = []

    def start_query_execution(self, **kwargs):
        self.started = kwargs
        return {"QueryExecutionId": "q1"}

    def get_query_execution(self, QueryExecutionId):
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        return {"QueryExecution": {"Status": state}}

    def stop_query_execution(self, QueryExecutionId):
        self.stopped.append(QueryExecutionId)

    def get_paginator(self, name):
        assert name == "get_query_results"
        return SimpleNamespace(paginate=lambda QueryExecutionId: iter(self.pages))


def test_results_are_read_page_by_page_after_polling():
    meta = {"ColumnInfo": COLUMNS[:2]}
    pages = [
        {"ResultSet": {"ResultSetMetadata": meta, "Rows": [_row("run_id", "n"), _row("a", "1")]}},
        {"ResultSet": {"ResultSetMetadata": meta, "Rows": [_row("b", "2"), _row("c", None)]}},
    ]
    stub = StubAthena([{"State": "QUEUED"}, {"State": "RUNNING"}, {"State": "SUCCEEDED"}], pages)
    waits = []
    table = run_statement(stub, "SELECT 1", "wg", "db", 60, sleep=waits.append, clock=lambda: 0.0)
    assert table.to_pydict() == {"run_id": ["a", "b", "c"], "n": [1, 2, None]}
    assert len(waits) == 2 and stub.started["WorkGroup"] == "wg"


def test_a_failed_query_carries_athenas_reason():
    stub = StubAthena([{"State": "FAILED", "StateChangeReason": "Query exhausted the bytes scanned limit"}])
    with pytest.raises(AthenaQueryFailed, match="bytes scanned limit"):
        run_statement(stub, "SELECT 1", "wg", "db", 60, sleep=lambda s: None)


def test_a_query_past_the_timeout_is_stopped():
    ticks = iter([0.0, 5.0, 11.0])
    stub = StubAthena([{"State": "RUNNING"}])
    with pytest.raises(AthenaTimeout, match="10 s"):
        run_statement(stub, "SELECT 1", "wg", "db", 10, sleep=lambda s: None, clock=lambda: next(ticks))
    assert stub.stopped == ["q1"]


def test_the_view_installer_creates_the_committed_layer_first_and_stops_at_a_failure():
    from control_plane.athena_views import install, view_statements

    statements = view_statements()
    assert statements[0][0] == "committed_attempts" and len({n for n, _ in statements}) == len(statements)
    ran, said = [], []

    class Failing(StubAthena):
        def start_query_execution(self, **kwargs):
            ran.append(kwargs["QueryString"])
            if len(ran) == 2:
                self.states = [{"State": "FAILED", "StateChangeReason": "line 1:1: mismatched input"}]
            return {"QueryExecutionId": f"q{len(ran)}"}

    stub = Failing([{"State": "SUCCEEDED"}])
    code = install(stub, "wg", "db", say=lambda *a, **k: said.append(a[0]))
    assert code == 1 and len(ran) == 2 and ran[0].startswith("CREATE OR REPLACE VIEW committed_attempts")
    assert said[-1].startswith(f"error: view {statements[1][0]} (2 of {len(statements)})") and "mismatched" in said[-1]
