"""The views and the report over s3:// (moto): only committed attempts are visible, the report built from S3
equals the one built from a local directory with the same commits, and a pull mirrors them append-only."""

from __future__ import annotations

import io
from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from moto import mock_aws

from analytics.mirror import MirrorConflictError, pull, write_duckdb_file
from analytics.report.files import build_report_files
from analytics.store import LocalStore, S3Store
from analytics.views import connect
from tests.support.synthetic import SyntheticRun, write_synthetic_run

SPEC = SyntheticRun(
    run_id="s3-run",
    concurrencies=(1, 2),
    requests_per_point=10,
    lanes=("provenance", "precompile", "serve_sweep", "qwen3_attempt"),
)


@pytest.fixture()
def s3():
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="results-bucket")
        yield client


@pytest.fixture()
def s3_store(s3):
    store = S3Store("s3://results-bucket/results", client=s3)
    write_synthetic_run(store, SPEC)
    return store


def test_uncommitted_files_are_invisible_over_s3(s3, s3_store):
    buf = io.BytesIO()
    pq.write_table(
        pa.table({"run_id": ["s3-run"], "lane": ["x"], "attempt": ["z"], "bench": ["triad"], "unit": ["GB/s"]}), buf
    )
    s3.put_object(
        Bucket="results-bucket", Key="results/v1/host_bench/run_id=s3-run/lane=x/z.parquet", Body=buf.getvalue()
    )
    con = connect(s3_store)
    assert con.execute("SELECT count(*) FROM host_bench").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM serving_points").fetchone() == (2,)
    kinds = {r[0] for r in con.execute("SELECT kind FROM report_exclusions").fetchall()}
    assert kinds == {"lane_failed"}


def test_report_from_s3_equals_report_from_local(s3, s3_store, tmp_path):
    local = LocalStore(tmp_path / "local")
    write_synthetic_run(local, SPEC)
    from_s3 = build_report_files("s3://results-bucket/results", None, tmp_path / "a", s3_client=s3)
    from_local = build_report_files(str(tmp_path / "local"), None, tmp_path / "b")
    assert {p.name: p.read_bytes() for p in from_s3} == {p.name: p.read_bytes() for p in from_local}


def test_pull_mirrors_append_only_and_reports_identically(s3, s3_store, tmp_path):
    mirror = LocalStore(tmp_path / "mirror")
    first = pull(s3_store, mirror)
    assert first.markers_copied == len(SPEC.lanes) and first.files_copied > 0 and first.run_ids == ["s3-run"]
    again = pull(s3_store, mirror)
    assert (again.markers_copied, again.markers_present, again.files_copied) == (0, len(SPEC.lanes), 0)
    # a later attempt in the source arrives; the older one stays in the mirror
    w = s3_store.begin_attempt("s3-run", "host_cpu", attempt="20260702T000000000000Z-late")
    w.add_rows("host_bench", [{"bench": "triad", "value": 1.0, "unit": "GB/s"}])
    w.commit("succeeded")
    assert pull(s3_store, mirror).markers_copied == 1
    assert len(mirror.markers()) == len(SPEC.lanes) + 1
    a = build_report_files("s3://results-bucket/results", None, tmp_path / "a", s3_client=s3)
    b = build_report_files(str(mirror.root), None, tmp_path / "b")
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    # a local file with other bytes is a conflict, never overwritten
    key = next(iter(mirror.markers()[0].tables.values()))
    marker = (
        Path(mirror.root) / f"v1/_commits/run_id=s3-run/lane={mirror.markers()[0].lane}/"
        f"{mirror.markers()[0].attempt}.json"
    )
    marker.unlink()
    (Path(mirror.root) / key).write_bytes(b"not parquet")
    with pytest.raises(MirrorConflictError):
        pull(s3_store, mirror)
    assert (Path(mirror.root) / key).read_bytes() == b"not parquet"


def test_pull_leaves_models_unless_asked(s3, tmp_path):
    store = S3Store("s3://results-bucket/results", client=s3)
    src = tmp_path / "w.bin"
    src.write_bytes(b"weights")
    w = store.begin_attempt("r", "merge", attempt="a1")
    model_key, log_key = w.model_key("m", "w.bin"), w.log_key("lane.log")
    w.add_file(model_key, src)
    w.add_file(log_key, src)
    w.commit("succeeded")
    plain = pull(store, LocalStore(tmp_path / "m1"))
    assert plain.models_skipped == 1 and not (tmp_path / "m1" / model_key).exists()
    assert (tmp_path / "m1" / log_key).read_bytes() == b"weights"
    full = pull(store, LocalStore(tmp_path / "m2"), with_models=True)
    assert full.models_skipped == 0 and (tmp_path / "m2" / model_key).read_bytes() == b"weights"


def test_duckdb_file_for_the_plain_cli(s3, s3_store, tmp_path):
    import duckdb

    for store in (s3_store, LocalStore(tmp_path / "mirror")):
        if isinstance(store, LocalStore):
            pull(s3_store, store)
        path = write_duckdb_file(store, tmp_path / f"{type(store).__name__}.duckdb")
        con = duckdb.connect(str(path), read_only=True)
        assert con.execute("SELECT count(*) FROM serving_points").fetchone() == (2,)
        assert con.execute("SELECT count(*) FROM host_bench").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM report_exclusions").fetchone() == (1,)
        con.close()


def test_query_and_report_commands_on_s3_and_on_a_mirror(s3, s3_store, tmp_path, monkeypatch, capsys):
    from control_plane.cli import main

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    sql = "select count(*) as n from serving_points"
    assert main(["query", sql, "--results", "s3://results-bucket/results", "--format", "csv"]) == 0
    assert capsys.readouterr().out.split() == ["n", "2"]
    assert main(["pull", "--from", "s3://results-bucket/results", "--to", str(tmp_path / "m")]) == 0
    assert "4 new attempt(s)" in capsys.readouterr().out
    assert main(["query", sql, "--results", str(tmp_path / "m"), "--format", "csv"]) == 0
    assert capsys.readouterr().out.split() == ["n", "2"]
    assert main(["report", "--results", "s3://results-bucket/results", "--out", str(tmp_path / "r")]) == 0
    assert "ServerBootError" in (tmp_path / "r" / "REPORT.md").read_text()
