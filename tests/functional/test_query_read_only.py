"""`neuronpipe query` only reads, and only the store: writes are refused before anything runs, other files are
out of reach, a statement has a timeout, several statements print every result."""

from __future__ import annotations

import hashlib
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from analytics.store import LocalStore, S3Store
from analytics.views import connect
from control_plane.cli import main
from tests.functional.test_views_s3_arrow import server_client  # noqa: F401 - the moto server fixture

T0 = datetime(2026, 7, 1, 12, tzinfo=timezone.utc)
SLOW = "select sum(hash(i)) from range(1000000000000::bigint) t(i)"  # hours of work: only a timeout ends it


def _commit(store, run_id: str = "r1") -> None:
    w = store.begin_attempt(run_id, "host_cpu")
    w.add_rows("host_bench", [{"bench": "triad", "threads": 1, "value": 10.0, "unit": "GB/s"}])
    w.add_rows(
        "lane_runs",
        [
            {
                "status": "succeeded",
                "supersedes": True,
                "started_at": T0,
                "ended_at": T0,
                "wall_s": 1.0,
                "backend": "cpu",
                "host": "h",
            }
        ],
    )
    w.commit("succeeded")


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def store(tmp_path):
    _commit(LocalStore(tmp_path / "results"))
    (tmp_path / "secret.txt").write_text("do-not-print-me\n")
    return tmp_path


def _query(capsys, *argv: str) -> tuple[int, str, list[str]]:
    code = main(["query", *argv])
    captured = capsys.readouterr()
    return code, captured.out, [ln for ln in captured.err.splitlines() if ln.strip()]


@pytest.mark.parametrize(
    "sql, kind",
    [
        (
            "COPY (SELECT 42) TO '{results}/v1/host_bench/run_id=r1/lane=host_cpu/stray.parquet' (FORMAT parquet)",
            "COPY",
        ),
        ("COPY host_bench TO '{parquet}' (FORMAT parquet, USE_TMP_FILE false)", "COPY"),  # over a committed file
        ("ATTACH '{results}/inside.duckdb' AS x", "ATTACH"),
        ("DETACH memory", "DETACH"),
        ("INSTALL httpfs", "INSTALL/LOAD"),
        ("LOAD httpfs", "INSTALL/LOAD"),
        ("CREATE TABLE t AS SELECT 1", "CREATE"),
        ("INSERT INTO store_exclusions SELECT * FROM store_exclusions", "INSERT"),
        ("UPDATE store_exclusions SET reason = 'x'", "UPDATE"),
        ("DELETE FROM store_exclusions", "DELETE"),
        ("DROP VIEW host_bench", "DROP"),
        ("ALTER VIEW host_bench RENAME TO y", "ALTER"),
        ("EXPORT DATABASE '{results}/export'", "EXPORT"),
        ("IMPORT DATABASE '{results}/export'", "PRAGMA that is not a read-only one"),
        ("SET enable_external_access = true", "SET/RESET/USE"),
        ("RESET lock_configuration", "SET/RESET/USE"),
        ("PRAGMA memory_limit = '1GB'", "SET/RESET/USE"),
        ("PRAGMA enable_profiling", "PRAGMA that is not a read-only one"),
        ("CALL pragma_version()", "CALL"),
        ("BEGIN TRANSACTION", "BEGIN/COMMIT/ROLLBACK"),
        ("EXPLAIN ANALYZE COPY (SELECT 1) TO '{results}/x.csv'", "EXPLAIN of a COPY"),
        ("UPDATE EXTENSIONS", "statement of a kind query does not run"),
        ("select 1; /* then */ copy (select 2) to '{results}/x.csv'", "COPY"),
    ],
)
def test_a_statement_that_is_not_a_read_refuses_the_sql_before_anything_runs(store, capsys, sql, kind):
    results = store / "results"
    parquet = next(results.rglob("v1/host_bench/**/*.parquet"))
    before = _tree(store)
    code, out, err = _query(capsys, "--results", str(results), sql.format(results=results, parquet=parquet))
    assert code == 2 and out == ""  # nothing ran, not even a read before the refused statement
    assert len(err) == 1 and err[0].startswith("error: query runs only reads") and kind in err[0], err
    assert _tree(store) == before


@pytest.mark.parametrize(
    "sql, why",
    [
        ("select * from read_text('{secret}')", "Permission Error"),
        ("select * from read_csv('/etc/passwd')", "Permission Error"),
        ("select * from read_blob('{secret}')", "Permission Error"),
        ("select * from glob('{results}/**')", "Permission Error"),
        ("select count(*) from read_parquet('{results}/v1/host_bench/**/*.parquet')", "Permission Error"),
        ("from '{secret}'", "does not exist"),  # a file name as a table: no replacement scan without external access
    ],
)
def test_no_file_but_the_committed_ones_the_views_read_can_be_reached(store, capsys, sql, why):
    code, out, err = _query(
        capsys, "--results", str(store / "results"), sql.format(secret=store / "secret.txt", results=store / "results")
    )
    assert code == 2 and "do-not-print-me" not in out and "root:" not in out
    assert len(err) == 1 and why in err[0], err


def test_reads_still_work_and_several_statements_print_every_result_after_a_header(store, capsys):
    results = str(store / "results")
    code, out, err = _query(
        capsys,
        "--results",
        results,
        "--format",
        "csv",
        "select value from host_bench; pragma show_tables; describe host_bench",
    )
    assert code == 0 and err == []
    headers = [ln for ln in out.splitlines() if ln.startswith("-- statement")]
    assert headers == [
        "-- statement 1 of 3: select value from host_bench",
        "-- statement 2 of 3: pragma show_tables",
        "-- statement 3 of 3: describe host_bench",
    ]
    assert out.splitlines()[1:3] == ["value", "10.0"] and "host_bench" in out
    code, out, _ = _query(capsys, "--results", results, "--format", "csv", "select value from host_bench")
    assert code == 0 and out.splitlines() == ["value", "10.0"]  # one statement: its result alone


def test_a_failing_statement_stops_the_rest_in_one_line_naming_it(store, capsys):
    code, out, err = _query(
        capsys,
        "--results",
        str(store / "results"),
        "--format",
        "json",
        "select 1 as a; select error('boom'); select 3 as c",
    )
    assert code == 2 and '{"a": 1}' in out and '"c"' not in out
    assert len(err) == 1 and err[0].startswith("error: statement 2 of 3: ") and "boom" in err[0], err


def test_a_statement_past_the_timeout_is_interrupted_in_one_line_exit_1(store, capsys):
    code, out, err = _query(capsys, "--results", str(store / "results"), "--timeout", "0.2", SLOW)
    assert code == 1 and out == ""
    assert err == ["error: interrupted after the timeout of 0.2 s (--timeout)"]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_timeout_must_be_a_positive_number_of_seconds(store, capsys, value):
    with pytest.raises(SystemExit) as exc:
        main(["query", "--results", str(store / "results"), "--timeout", value, "select 1"])
    assert exc.value.code == 2 and "--timeout" in capsys.readouterr().err


def test_the_sandbox_holds_on_a_connection_over_s3_through_pyarrow(server_client, monkeypatch):
    monkeypatch.setenv("NEURONPIPE_S3_READER", "arrow")
    s3 = S3Store("s3://arrow-bucket/sandboxed", client=server_client)
    _commit(s3, "s3run")
    con = connect(s3, sandbox=True)
    assert con.execute("select value from host_bench").fetchall() == [(10.0,)]
    for sql in ("select * from read_text('/etc/hostname')", "set enable_external_access = true"):
        with pytest.raises(Exception, match="Permission Error|configuration has been locked"):
            con.execute(sql)


def test_spill_files_go_to_a_private_directory_that_is_removed(store, capsys, monkeypatch):
    spill = store / "tmp"
    spill.mkdir()
    monkeypatch.setenv("TMPDIR", str(spill))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    code, out, _ = _query(
        capsys, "--results", str(store / "results"), "--format", "csv", "select current_setting('temp_directory') as t"
    )
    assert code == 0 and out.splitlines()[1].startswith(str(spill / "neuronpipe-query-"))
    assert os.listdir(spill) == []
