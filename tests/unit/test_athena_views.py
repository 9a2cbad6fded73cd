"""The Athena views: generated from analytics/views/sql (one definition), every one parsing in Trino's dialect, the
ones that do not translate named with the reason, the checked-in files up to date; and the committed layer keeping
exactly the attempts DuckDB's readers see (its logic run in DuckDB after sqlglot writes it back: Athena itself has
not run here)."""

from __future__ import annotations

import math
import random
import re
import struct

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from analytics.athena import COMMITTED_FILES, committed_layer, glue_columns, glue_type
from analytics.athena.generate import (
    COMMITTED_FILE,
    OUT_DIR,
    REPORT_FILE,
    generate,
    stale_files,
    transpile_file,
)
from analytics.schema import TABLES
from analytics.store.markers import CommitMarker
from analytics.views import derived_sql_files


@pytest.fixture(scope="module")
def generated():
    return generate()


def _duckdb_view_names() -> list[str]:
    pattern = re.compile(r"^CREATE (?:OR REPLACE )?VIEW (?:IF NOT EXISTS )?(\w+)", re.M | re.I)
    return [name for _, text in derived_sql_files() for name in pattern.findall(text)]


def test_the_checked_in_views_are_what_the_duckdb_views_generate_now(generated):
    files, _ = generated
    assert stale_files(files=files) == [], "a view changed without `make athena-views`"


def test_every_generated_statement_is_a_view_that_parses_in_trino(generated):
    files, _ = generated
    count = 0
    for name, text in files.items():
        if not name.endswith(".sql"):
            continue
        for statement in sqlglot.parse(text, read="trino"):
            if statement is None or isinstance(statement, exp.Semicolon):  # a "not translated" comment
                continue
            assert isinstance(statement, exp.Create) and statement.args["kind"].upper() == "VIEW", (name, statement)
            count += 1
    assert count > len(TABLES)


def test_every_duckdb_view_is_translated_or_reported_with_a_reason(generated):
    files, results = generated
    names = _duckdb_view_names()
    assert sorted(r.name for r in results) == sorted(names)
    created = set(re.findall(r"^CREATE OR REPLACE VIEW (\w+)", "".join(files.values()), re.M))
    report = files[REPORT_FILE]
    for r in results:
        if r.trino is not None:
            assert r.name in created
        else:
            provided = r.name in {n for n, _ in committed_layer()}  # DuckDB's fallback of a committed-layer view
            assert provided or r.name not in created, f"{r.name} does not translate but a view of that name exists"
            assert r.reason and f"`{r.name}` | {r.reason}" in report
    translated = sum(r.trino is not None for r in results)
    assert f"{translated} of {len(results)} views translate" in report


def test_group_by_all_becomes_the_ordinals_of_the_non_aggregates():
    (r,) = transpile_file(
        "x.sql",
        "CREATE OR REPLACE VIEW v AS SELECT run_id, lane, count(*) AS n, "
        "sum(x) OVER (PARTITION BY run_id) AS w FROM requests GROUP BY ALL;",
        {},
    )
    assert r.trino is not None
    group = sqlglot.parse_one(r.trino, read="trino").find(exp.Group)
    assert [e.sql() for e in group.expressions] == ["1", "2", "4"]


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT printf('%.7g', x) AS s FROM t", "printf() specifier %.7g"),
        ("SELECT printf('%.0g', x) AS s FROM t", "printf() specifier %.0g"),
        ("SELECT printf('%5d', x) AS s FROM t", "printf() specifier %5d"),
        ("SELECT printf(f, x) AS s FROM t", "printf() with a format that is not a literal"),
        ("SELECT a.x FROM a ASOF LEFT JOIN b ON a.x <= b.x", "ASOF join on l <= r"),
        ("SELECT b.* FROM a ASOF LEFT JOIN b ON a.x >= b.x", "right side (b) is read with *"),
        ("SELECT s.* EXCLUDE (x) FROM stored s", "* EXCLUDE/REPLACE over columns not known here"),
        ("SELECT to_microseconds(x) AS i FROM t", "to_microseconds() other than added to a timestamp"),
        ("SELECT length(s) AS n FROM (SELECT x + 1 AS s FROM t)", "length(s): a string or a list"),
        ("SELECT * FROM gone", "reads gone, which does not translate"),
        ("SELECT * FROM requests GROUP BY ALL", "GROUP BY ALL over SELECT *"),
        ("IF NOT EXISTS", "CREATE VIEW IF NOT EXISTS"),
        ("SELECT median(x) OVER (PARTITION BY g) AS m FROM t", "percentile_cont"),
        ("SELECT length(a.lanes) AS n FROM a", "length(lanes): a string or a list in DuckDB"),
    ],
)
def test_a_construct_that_does_not_translate_is_named(sql, reason):
    text = f"CREATE OR REPLACE VIEW v AS {sql};"
    if sql == "IF NOT EXISTS":
        text = "CREATE VIEW IF NOT EXISTS v AS SELECT 1 AS x;"
    (r,) = transpile_file("x.sql", text, {"gone": "because"})
    assert r.trino is None and reason in r.reason


def test_glue_columns_follow_the_arrow_schemas():
    for table in TABLES:
        cols = glue_columns(table)
        assert [c[0] for c in cols][:1] and all(c[1] for c in cols)
    assert glue_type(__import__("pyarrow").list_(__import__("pyarrow").float64())) == "array<double>"


ROOT = "s3://bucket/results"


def _marker(run: str, lane: str, attempt: str, supersedes: bool = True, tables=("requests", "lane_runs")):
    m = CommitMarker(
        run_id=run,
        lane=lane,
        attempt=attempt,
        status="succeeded",
        supersedes=supersedes,
        tables={t: f"v1/{t}/run_id={run}/lane={lane}/{attempt}.parquet" for t in tables},
    )
    return f"{ROOT}/v1/_commits/run_id={run}/lane={lane}/{attempt}.json", m.to_json().decode()


@pytest.fixture
def layer():
    """The committed layer over a store of one (run, lane): attempt 1 superseded by 2, 3 a resume skip (committed,
    supersedes nothing), 4 never committed, 5 committed then quarantined; a marker of attempt 6 copied to 7's key."""
    con = duckdb.connect()
    con.execute('CREATE TABLE commit_marker_lines ("$path" VARCHAR, line VARCHAR)')
    con.execute('CREATE TABLE quarantine_record_lines ("$path" VARCHAR, line VARCHAR)')
    markers = [
        _marker("r1", "serve", "s00000001-a"),
        _marker("r1", "serve", "s00000002-b"),
        _marker("r1", "serve", "s00000003-c", supersedes=False),
        _marker("r1", "serve", "s00000005-e"),
        _marker("r2", "serve", "s00000001-a", tables=("lane_runs",)),
    ]
    path6, body6 = _marker("r1", "other", "s00000006-f")
    markers.append((path6.replace("s00000006-f", "s00000007-g"), body6))
    for path, body in markers:
        con.executemany("INSERT INTO commit_marker_lines VALUES (?, ?)", [(path, line) for line in body.splitlines()])
    con.execute(
        "INSERT INTO quarantine_record_lines VALUES "
        f"('{ROOT}/v1/_quarantine/run_id=r1/lane=serve/s00000005-e.json', '{{\"reason\": \"damaged\"}}')"
    )
    for table in ("requests", "lane_runs", "compiles"):
        con.execute(f'CREATE TABLE stored_{table} ("$path" VARCHAR, run_id VARCHAR, attempt VARCHAR)')
        for run, lane, attempt in [
            ("r1", "serve", a) for a in ("s00000001-a", "s00000002-b", "s00000003-c", "s00000004-d", "s00000005-e")
        ] + [("r2", "serve", "s00000001-a"), ("r1", "other", "s00000007-g")]:
            uri = f"{ROOT}/v1/{table}/run_id={run}/lane={lane}/{attempt}.parquet"
            con.execute(f"INSERT INTO stored_{table} VALUES (?, ?, ?)", [uri, run, attempt])
    for name, sql in committed_layer():
        if name in TABLES and name not in ("requests", "lane_runs", "compiles"):
            continue
        con.execute(sqlglot.transpile(sql, read="trino", write="duckdb")[0])
    return con


def _rows(con, sql):
    return sorted(con.execute(sql).fetchall())


def test_athena_reads_only_the_latest_committed_attempt_of_a_table(layer):
    assert _rows(layer, "SELECT run_id, attempt FROM requests") == [("r1", "s00000002-b")]


def test_lane_runs_shows_every_committed_unquarantined_attempt(layer):
    assert _rows(layer, "SELECT run_id, attempt FROM lane_runs") == [
        ("r1", "s00000001-a"),
        ("r1", "s00000002-b"),
        ("r1", "s00000003-c"),
        ("r2", "s00000001-a"),
    ]


def test_a_table_no_marker_names_is_not_read_and_quarantine_is_listed(layer):
    assert _rows(layer, "SELECT * FROM compiles") == []  # stored files, but no marker names a compiles table
    assert _rows(layer, "SELECT run_id, lane, attempt, kind FROM store_exclusions") == [
        ("r1", "serve", "s00000005-e", "attempt_quarantined")
    ]
    attempts = _rows(layer, f"SELECT DISTINCT attempt FROM {COMMITTED_FILES}")
    assert ("s00000004-d",) not in attempts and ("s00000007-g",) not in attempts  # uncommitted; foreign marker


def test_the_committed_file_lists_the_layer_views_first():
    text = (OUT_DIR / COMMITTED_FILE).read_text()
    names = re.findall(r"^CREATE OR REPLACE VIEW (\w+)", text, re.M)
    assert names[:2] == ["committed_attempts", COMMITTED_FILES]
    assert set(TABLES) <= set(names) and "store_exclusions" in names and "compiles_every_attempt" in names


def test_any_value_and_list_sum_are_rewritten_to_what_trino_has():
    (r,) = transpile_file(
        "x.sql",
        "CREATE OR REPLACE VIEW v AS SELECT any_value(lo) FILTER (WHERE m = 'TTFT') AS lo_ttft, "
        "list_sum(chunk_tokens) AS total FROM requests GROUP BY ALL;",
        {},
    )
    assert r.trino is not None
    tree = sqlglot.parse_one(r.trino, read="trino")
    assert "IGNORE NULLS" not in r.trino.upper() and tree.find(exp.AnyValue) is not None
    unnest = tree.find(exp.Unnest)
    assert unnest is not None and unnest.expressions[0].name == "chunk_tokens"
    assert tree.find(exp.Group) is not None  # list_sum is no aggregate: total is a group key


def test_an_aggregate_inside_a_subquery_does_not_make_a_projection_an_aggregate():
    (r,) = transpile_file(
        "x.sql",
        "CREATE OR REPLACE VIEW v AS SELECT run_id, (SELECT max(x) FROM t) AS m, count(*) AS n FROM r GROUP BY ALL;",
        {},
    )
    group = sqlglot.parse_one(r.trino, read="trino").find(exp.Group)
    assert [e.sql() for e in group.expressions] == ["1", "2"]


def test_length_of_a_stored_list_column_becomes_cardinality_and_of_a_string_stays():
    (r,) = transpile_file(
        "x.sql", "CREATE OR REPLACE VIEW v AS SELECT length(chunk_times_s) AS n, length(lane) AS l FROM requests;", {}
    )
    tree = sqlglot.parse_one(r.trino, read="trino")
    assert [e.this.name for e in tree.find_all(exp.ArraySize)] == ["chunk_times_s"]
    assert [e.this.name for e in tree.find_all(exp.Length)] == ["lane"]


def test_the_percentile_rewrite_gives_duckdbs_exact_percentiles():
    """The Trino form of median / quantile_cont (scalar and list, with a FILTER), written back as DuckDB's SQL by
    sqlglot and run next to DuckDB's own quantile_cont on the same rows: the same values, NULL for no value."""
    sql = (
        "CREATE OR REPLACE VIEW v AS SELECT g, median(x) FILTER (WHERE y) AS m, quantile_cont(x, 0.99) AS p99, "
        "quantile_cont(x, [0.5, 0.9, 0.95]) AS ps FROM t GROUP BY ALL;"
    )
    (r,) = transpile_file("x.sql", sql, {})
    assert r.trino is not None and "PERCENTILE" not in r.trino.upper()
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT i % 3 AS g, CASE WHEN i % 7 = 0 THEN NULL ELSE (i * 37 % 101)::BIGINT END AS x, "
        "i % 2 = 0 AS y FROM range(200) r(i)"
    )
    con.execute("INSERT INTO t VALUES (5, NULL, true), (6, 4, true)")
    con.execute(sqlglot.transpile(r.trino, read="trino", write="duckdb")[0])
    con.execute(sql.replace(" v AS", " reference AS"))
    ours = con.execute("SELECT * FROM v ORDER BY g").fetchall()
    reference = con.execute("SELECT * FROM reference ORDER BY g").fetchall()
    assert len(ours) == len(reference) == 5
    for a, b in zip(ours, reference):
        assert a[0] == b[0]
        for mine, theirs in zip(a[1:], b[1:]):
            assert (mine is None and theirs is None) or mine == pytest.approx(theirs, rel=1e-12), (a, b)


def _ours_and_duckdbs(sql: str, setup: str, trino_to_duckdb=lambda text: text) -> tuple[list, list]:
    """The rows of a view as DuckDB defines it and of its generated Trino form written back as DuckDB's SQL by sqlglot
    (``trino_to_duckdb`` maps a Trino function DuckDB has under another name), over the same rows."""
    (r,) = transpile_file("x.sql", f"CREATE OR REPLACE VIEW v AS {sql};", {})
    assert r.trino is not None, r.reason
    con = duckdb.connect()
    con.execute(setup)
    con.execute(trino_to_duckdb(sqlglot.transpile(r.trino, read="trino", write="duckdb")[0]))
    con.execute(f"CREATE VIEW reference AS {sql}")
    ours = con.execute("SELECT * FROM v ORDER BY ALL").fetchall()
    reference = con.execute("SELECT * FROM reference ORDER BY ALL").fetchall()
    assert [d[0] for d in con.execute("SELECT * FROM v").description] == [
        d[0] for d in con.execute("SELECT * FROM reference").description
    ]
    return ours, reference


ASOF_ROWS = (
    "CREATE TABLE l AS SELECT * FROM (VALUES (1, 'a', -1.0), (2, 'a', 0.0), (3, 'a', 2.5), (4, 'a', 3.0), "
    "(5, 'a', 99.0), (6, 'a', NULL), (7, 'b', 2.0), (8, 'c', 5.0)) v(id, g, k);"
    "CREATE TABLE r AS SELECT * FROM (VALUES ('a', 0.0, 10), ('a', 3.0, 30), ('a', 1.0, 11), ('a', NULL, 99), "
    "('b', 2.0, 20), ('b', 7.0, 70), ('d', 0.5, 1)) v(g, k, val);"
)


@pytest.mark.parametrize(
    "on",
    ["l.k >= r.k", "l.k > r.k", "r.k <= l.k", "l.g = r.g AND l.k >= r.k", "r.g = l.g AND l.k > r.k"],
)
@pytest.mark.parametrize("side", ["LEFT ", ""])
def test_the_asof_rewrite_picks_the_row_duckdbs_asof_join_picks(on, side):
    """The standard-SQL form of an ASOF join (a join on the inequality bounded by the right side's next key), written
    back as DuckDB's SQL, beside DuckDB's own ASOF join on the same rows: keys below the first, equal to one, between,
    above the last, NULL on either side, groups with no right rows."""
    sql = f"SELECT l.id, l.k, r.k AS rk, r.val FROM l ASOF {side}JOIN r ON {on}"
    ours, reference = _ours_and_duckdbs(sql, ASOF_ROWS)
    assert ours == reference and len(ours) >= 3


def test_star_exclude_and_replace_become_the_columns_they_stand_for():
    sql = (
        "WITH a AS (SELECT id, g, k, id * 2 AS twice FROM l), b AS (SELECT a.* EXCLUDE (twice), 1 AS one FROM a) "
        "SELECT b.* EXCLUDE (g) REPLACE (b.k + 1 AS k), a.twice FROM b JOIN a USING (id)"
    )
    (r,) = transpile_file("x.sql", f"CREATE OR REPLACE VIEW v AS {sql};", {})
    assert r.trino is not None and "EXCEPT" not in r.trino.upper() and "REPLACE (" not in r.trino.upper()
    ours, reference = _ours_and_duckdbs(sql, ASOF_ROWS)
    assert ours == reference and len(ours) == 8


def test_first_in_an_order_list_stddev_and_length_of_a_built_list_give_duckdbs_values():
    sql = (
        "WITH agg AS (SELECT g, first(val ORDER BY k DESC) FILTER (WHERE val < 50) AS top, "
        "list(val ORDER BY val) AS vals FROM r GROUP BY g), "
        "named AS (SELECT g, vals AS s FROM agg UNION ALL SELECT 'z', [1, 2]) "
        "SELECT n.g, a.top, list_stddev_samp(n.s) AS sd, coalesce(len(n.s), 0) AS n "
        "FROM (SELECT *, s AS s2 FROM named) n LEFT JOIN agg a USING (g)"
    )
    (r,) = transpile_file("x.sql", f"CREATE OR REPLACE VIEW v AS {sql};", {})
    tree = sqlglot.parse_one(r.trino, read="trino")
    assert tree.find(exp.Length) is None and tree.find(exp.ArraySize) is not None
    ours, reference = _ours_and_duckdbs(sql, ASOF_ROWS)
    assert len(ours) == len(reference) == 4
    for a, b in zip(ours, reference):
        assert a[:2] == b[:2] and a[3] == b[3], (a, b)
        assert a[2] is b[2] is None or a[2] == pytest.approx(b[2], rel=1e-12), (a, b)


def test_printf_with_s_and_d_is_format_and_null_when_an_argument_is():
    """Java's format writes ``%s`` of a string and ``%d`` of an integer as DuckDB's printf does (so the test writes
    Trino's format back as DuckDB's printf); the rewrite's part is the NULL: DuckDB's printf is NULL when an argument
    is, Java's format writes "null"."""
    sql = "SELECT id, printf('%s n=%d: %s (100 %%)', g, id, CAST(k AS VARCHAR)) AS note, printf('none') AS c FROM l"
    (r,) = transpile_file("x.sql", f"CREATE OR REPLACE VIEW v AS {sql};", {})
    assert "FORMAT(" in r.trino.upper() and "PRINTF" not in r.trino.upper()
    ours, reference = _ours_and_duckdbs(sql, ASOF_ROWS, lambda text: text.replace("FORMAT(", "printf("))
    assert ours == reference and (6, None, "none") in ours


def test_epoch_us_and_adding_to_microseconds_are_exact_to_the_microsecond():
    """The Trino form of ``epoch_us(ts)`` and ``ts + to_microseconds(x)`` (whole milliseconds by date_diff, the
    microseconds from the six fractional digits Trino writes for a timestamp(6), back through from_unixtime_nanos),
    run in DuckDB with Trino's meaning of those functions: DuckDB's CAST to VARCHAR drops a zero fraction, which
    Trino's does not, so the test writes the fraction with strftime."""
    sql = "SELECT id, epoch_us(ts) AS us, ts + to_microseconds(CAST(round(x * 1e6) AS BIGINT)) AS later FROM t"
    setup = (
        "CREATE TABLE t AS SELECT * FROM (VALUES (1, TIMESTAMPTZ '2026-12-07 23:00:00.123456+00', 0.000999), "
        "(2, TIMESTAMPTZ '2026-12-07 23:00:00+00', 1.5), (3, TIMESTAMPTZ '1969-12-31 23:59:59.999001+00', 0.000001), "
        "(4, TIMESTAMPTZ '2026-01-01 00:00:00.000999+00', 86400.000001)) v(id, ts, x);"
        "CREATE MACRO from_unixtime_nanos(n) AS make_timestamp(CAST(n // 1000 AS BIGINT));"
    )

    def trino_to_duckdb(text: str) -> str:
        text = re.sub(
            r"CAST\(CAST\((\w+) AS TIMESTAMP\(6\)\) AS TEXT\)", r"strftime(\1::TIMESTAMP, '%Y-%m-%d %H:%M:%S.%f')", text
        )
        return text.replace("TIMESTAMP(6)", "TIMESTAMP")

    ours, reference = _ours_and_duckdbs(sql, setup, trino_to_duckdb)
    assert [(a[0], a[1], a[2].replace(tzinfo=None)) for a in ours] == [
        (b[0], b[1], b[2].replace(tzinfo=None)) for b in reference
    ]


def test_fixed_point_printf_is_written_as_duckdb_writes_it():
    """``%.Nf`` in Trino (Dekker's exact product and round half even on the exact binary value, not Java's format),
    written back as DuckDB's SQL, beside DuckDB's own printf on the same doubles: decimal ties in binary (0.125,
    2.5) and in decimal only (0.15, 1.005, 2.675), negatives, -0.0, subnormals, infinities, NaN, values up to the
    2^52 bound of the exact path, random bit patterns and random decimals. (Above the bound, and for a NaN whose sign
    bit is set, which DuckDB writes ``-nan``, the Trino form is not DuckDB's: docs/reference/athena.md.)"""
    sql = "SELECT id, printf('%.1f|%.3f|%.0f|%f ms', v, v, v, v) AS s FROM t"
    rng = random.Random(7)
    values = [0.0, -0.0, 0.15, 0.25, 0.35, 1.005, 2.675, 0.125, 0.0625, -0.0625, 1e-300, -1e-7, 0.5, 1.5, 2.5, -2.5]
    values += [9.9995, 99.95, 0.45, 0.0005, 0.0015, 5e-324, 450359962.70496, 123456789.0125, math.inf, -math.inf]
    values += [math.nan]
    values += [rng.randint(-(10**7), 10**7) / rng.choice([1, 2, 8, 10, 16, 100, 1000, 2000, 10**6]) for _ in range(300)]
    values += [rng.uniform(-1e6, 1e6) for _ in range(60)]
    bits = (struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(2000))
    values += [v for v in bits if abs(v) * 1e6 < 2**52][:60]
    setup = "CREATE TABLE t (id INTEGER, v DOUBLE);"
    setup += "INSERT INTO t VALUES " + ", ".join(f"({i}, '{v!r}'::DOUBLE)" for i, v in enumerate(values)) + ";"

    def trino_to_duckdb(text: str) -> str:  # Java's format only writes the fixed digits' string (%s) here
        return text.replace("FORMAT(", "printf(").replace("IS_INFINITE(", "isinf(")

    ours, reference = _ours_and_duckdbs(sql, setup, trino_to_duckdb)
    assert ours == reference and len(ours) == len(values)
    assert "0.1|0.150|0|0.150000 ms" in {s for _, s in ours}


def test_general_printf_is_written_as_duckdb_writes_it():
    """``%g``/``%.Pg`` in Trino (C's rule on the exactly rounded digits: fixed notation when the rounded exponent is in
    -4..P-1, zeros stripped), written back as DuckDB's SQL, beside DuckDB's own printf on the same doubles: powers of
    ten and values that round into the next decade (9.9995, 99999.5), the fixed/exponent boundaries, ties, negatives,
    -0.0, subnormals, infinities, random decimals and bit patterns. Exponent notation is Java's ``%e`` with its zeros
    stripped in Trino; here DuckDB's printf stands in for Java's format, so only its plumbing is checked."""
    sql = "SELECT id, printf('%g|%.4g|%.1g', v, v, v) AS s FROM t"
    rng = random.Random(11)
    values = [0.0, -0.0, 0.15, 0.25, 1.005, 0.125, 99.95, 99.9, 50.0, 99.0, 0.5, 2.0, 1e-4, 9.9995e-5, 0.00099995]
    values += [9.99995, 99999.5, 999999.5, 1e6, 123456.5, 1234567.0, 1e-5, 9.99999e-6, 1e-300, 5e-324, 1e300]
    values += [math.inf, -math.inf, math.nan, 1e5, 1e4, 10.0, 100.0, 9999.5, 99995.0, 0.30000000000000004, -2.5]
    values += [rng.randint(-(10**7), 10**7) / rng.choice([1, 2, 8, 10, 16, 100, 1000, 10**6]) for _ in range(150)]
    factors = [1, 0.99995, 0.999995, 1.00005, 9.9995, 9.99995, 0.5, 0.25]
    values += [10.0 ** rng.randint(-6, 8) * rng.choice(factors) for _ in range(120)]
    bits = (struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(100))
    values += [v for v in bits if not math.isnan(v)][:40]
    setup = "CREATE TABLE t (id INTEGER, v DOUBLE);"
    setup += "INSERT INTO t VALUES " + ", ".join(f"({i}, '{v!r}'::DOUBLE)" for i, v in enumerate(values)) + ";"

    def trino_to_duckdb(text: str) -> str:
        return text.replace("FORMAT(", "printf(").replace("IS_INFINITE(", "isinf(")

    ours, reference = _ours_and_duckdbs(sql, setup, trino_to_duckdb)
    assert ours == reference and len(ours) == len(values)
    assert "99.95|99.95|1e+02" in {s for _, s in ours}


def test_a_star_over_an_earlier_view_expands_from_that_views_columns():
    columns: dict[str, list[str]] = {}
    transpile_file("a.sql", "CREATE OR REPLACE VIEW base AS SELECT id, g, k * 2 AS k2 FROM l;", {}, columns)
    (r,) = transpile_file("b.sql", "CREATE OR REPLACE VIEW top AS SELECT b.* EXCLUDE (g) FROM base b;", {}, columns)
    assert columns["base"] == ["id", "g", "k2"] and r.trino is not None
    assert [e.sql() for e in sqlglot.parse_one(r.trino, read="trino").expression.expressions] == ["b.id", "b.k2"]


def test_the_generated_serving_points_gives_the_duckdb_views_rows():
    """The generated Trino ``serving_points`` (ASOF joins, stars, first in an order, lengths, list_stddev_samp,
    percentiles, printf with ``%d``/``%s``/``%.1f``/``%.3f``, concat_ws of a list), written back as DuckDB's SQL, over
    the DuckDB serving views of fixed requests: a point with every interval, a coalesced stream behind its client
    queue bound, a point where every request failed; every column of every row as the DuckDB view has it."""
    from agents.loadgen.metrics import connect_rows
    from tests.unit.test_intervals import latency_rows
    from tests.unit.test_serving_views import S, req

    rows = latency_rows(30)
    rows += [
        req(
            i,
            ttft=0.02,
            chunks=[0.02, 0.021, 0.05],
            tokens=[6, 6, 6],
            sent=i * S // 3,
            sched=i * S // 3 - 5_000_000,
            point="q",
        )
        for i in range(12)
    ]
    rows += [req(i, ttft=None, chunks=[], success=False, point="f", error_type="timeout") for i in range(3)]
    points = [
        {"point_id": p, "request_rate": 4.0, "slo_json": '{"ttft_ms": 60}', "client_lag_bound_ms": 1.0}
        for p in ("p", "q", "f")
    ]
    con = connect_rows({"requests": rows, "sweep_points": points})
    statements = sqlglot.parse((OUT_DIR / "12_serving_points.sql").read_text(), read="trino")
    (view,) = [s for s in statements if isinstance(s, exp.Create) and s.this.name == "serving_points"]
    view.this.set("this", exp.to_identifier("generated"))
    con.execute(view.sql("duckdb").replace("FORMAT(", "printf(").replace("IS_INFINITE(", "isinf("))
    ours = con.execute("SELECT * FROM generated ORDER BY point_id")
    generated_names = [d[0] for d in ours.description]
    ours = ours.fetchall()
    reference = con.execute("SELECT * FROM serving_points ORDER BY point_id")
    names = [d[0] for d in reference.description]
    reference = reference.fetchall()
    assert generated_names == names and len(ours) == 3
    for mine, theirs in zip(ours, reference):
        for name, a, b in zip(names, mine, theirs):
            assert a == b or (isinstance(a, float) and a == pytest.approx(b, rel=1e-12)), (name, a, b)
    notes = {row[names.index("point_id")]: dict(zip(names, row)) for row in reference}
    assert notes["q"]["burst_note"].startswith("stream coalesced: 6.0 decode tokens per network read (bound 2.0)")
    assert notes["q"]["invalid_reason"] == "client queue p99 5.000 ms exceeds the bound 1.000 ms"
    assert notes["f"]["invalid_reason"] == "no request succeeded (3 failed; first: timeout)"


def _generated_beside(con, file: str) -> list[str]:
    """Each generated view of ``file`` created in ``con`` as ``<name>_gen`` (written back as DuckDB's SQL, Trino's
    format standing as DuckDB's printf for ``%s``/``%d``), reading the other ``_gen`` views of the file; the names."""
    statements = [s for s in sqlglot.parse((OUT_DIR / file).read_text(), read="trino") if isinstance(s, exp.Create)]
    names = [s.this.name for s in statements]
    for statement in statements:
        statement.this.set("this", exp.to_identifier(statement.this.name + "_gen"))
        for table in statement.expression.find_all(exp.Table):
            if table.name in names:
                table.set("this", exp.to_identifier(table.name + "_gen"))
        con.execute(statement.sql("duckdb").replace("FORMAT(", "printf(").replace("IS_INFINITE(", "isinf("))
    return names


def test_the_generated_decision_gives_the_duckdb_views_rows():
    """The generated ``slo_points`` and ``report_decision`` (printf's %g and %.1f in the notes, stars, windows),
    written back as DuckDB's SQL, beside the DuckDB views on tests/unit/test_decision.py's fixed points: every column
    of every row the same."""
    from tests.unit.test_decision import _decision_con, _lane, _point

    points = [
        _point("r", "serve_sweep", "c1", 1, 50, 4, 100.0),
        _point("r", "serve_sweep", "c2", 2, 80, 8, 180.0),
        _point("r", "serve_sweep", "c4", 4, 90, 15, 300.0),
        _point("r", "serve_sweep", "c8", 8, 60, 5, 400.0, valid=False),
        _point("r", "serve_sweep", "b1", 1, 812, 4, 50.0, config="B"),
        _point("r", "serve_sweep", "b2", 2, 812.5, 4.25, 50.0, config="B", ci=False),
    ]
    con = _decision_con(points, {}, [_lane("r", "serve_sweep", priced_as="c7i.large")], [])
    names = _generated_beside(con, "75_report_decision.sql")
    assert names == ["slo_points", "report_decision"]
    for name in names:
        ours = con.execute(f"SELECT * FROM {name}_gen ORDER BY ALL")
        columns = [d[0] for d in ours.description]
        ours = ours.fetchall()
        reference = con.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall()
        assert len(ours) == len(reference) >= 2
        for mine, theirs in zip(ours, reference):
            for a, b in zip(mine, theirs):
                assert a == b or (isinstance(a, float) and a == pytest.approx(b, rel=1e-12)), (name, a, b)
    notes = {row[columns.index("server_config")]: row[columns.index("note")] for row in ours}
    assert notes["B"] == "no point meets the SLO: lowest concurrency (c=1) p99 TTFT 812 ms > 100 ms"
