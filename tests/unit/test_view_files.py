"""The derived-view files load in the declared order (analytics.views.VIEW_FILES), every file is declared, and
every view a file defines is created — by connect() over a store and, for the serving family, by the load
generator's in-memory connection."""

from __future__ import annotations

import re
from importlib import resources

import pytest

import analytics.views as views
from analytics.store import LocalStore
from analytics.views import SERVING_FILES, VIEW_FILES, ViewFilesError, connect, derived_sql_files

CREATE = re.compile(r"^CREATE OR REPLACE VIEW (\w+)", re.M)


def sql_dir_files() -> set[str]:
    return {e.name for e in (resources.files("analytics.views") / "sql").iterdir() if e.name.endswith(".sql")}


def declared_views(files=None) -> dict[str, str]:
    """{view: the file that creates it}; a view created by two files fails here."""
    out: dict[str, str] = {}
    for name, text in derived_sql_files(files):
        for view in CREATE.findall(text):
            assert view not in out, f"{view} is created by {out[view]} and {name}"
            out[view] = name
    return out


def test_every_sql_file_is_declared_once_and_every_declared_file_exists():
    assert len(set(VIEW_FILES)) == len(VIEW_FILES)
    assert set(VIEW_FILES) == sql_dir_files()
    assert set(SERVING_FILES) <= set(VIEW_FILES)
    assert [n for n, _ in derived_sql_files()] == list(VIEW_FILES)


def test_every_view_of_every_file_is_created_by_connect(tmp_path):
    wanted = declared_views()
    assert {"request_metrics", "t_crit_95", "serving_points", "sustained_summary", "report_decision"} <= set(wanted)
    con = connect(LocalStore(tmp_path / "results"))
    created = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    assert set(wanted) <= created
    for view in wanted:  # each one binds and answers over an empty store (constant tables keep their rows)
        assert con.execute(f"SELECT * FROM {view} LIMIT 0").description, view
    assert con.execute("SELECT count(*) FROM serving_points").fetchone() == (0,)


def test_the_serving_family_loads_alone_for_the_load_generator():
    from agents.loadgen.metrics import connect_rows

    wanted = declared_views(SERVING_FILES)
    assert set(wanted) == {
        "request_metrics",
        "request_itls",
        "request_reads",
        "request_slo",
        "t_crit_95",
        "point_rate_batches",
        "point_peaks",
        "serving_points",
        "sustained_window_metrics",
        "sustained_summary",
        "workload_points",
        "workload_length_buckets",
        "workload_turns",
        "workload_sessions",
    }
    con = connect_rows({})
    created = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    assert set(wanted) <= created


def test_an_undeclared_or_missing_file_is_an_error_never_a_skipped_view(monkeypatch):
    monkeypatch.setattr(views, "VIEW_FILES", tuple(n for n in VIEW_FILES if n != "12_serving_points.sql"))
    with pytest.raises(ViewFilesError, match=r"not declared \['12_serving_points.sql'\]"):
        derived_sql_files()
    monkeypatch.setattr(views, "VIEW_FILES", (*VIEW_FILES, "99_gone.sql"))
    with pytest.raises(ViewFilesError, match=r"missing \['99_gone.sql'\]"):
        derived_sql_files()
    monkeypatch.setattr(views, "VIEW_FILES", VIEW_FILES)
    with pytest.raises(ViewFilesError, match="unknown view files"):
        derived_sql_files(["nope.sql"])
