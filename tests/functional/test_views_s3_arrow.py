"""The views over s3:// through pyarrow's S3 filesystem, against a moto server on 127.0.0.1."""

from __future__ import annotations

import socket

import boto3
import pytest

from analytics.report.files import build_report_files
from analytics.store import LocalStore, S3Store
from analytics.views import S3ReaderError, connect, resolve_s3_reader
from tests.support.synthetic import SyntheticRun, write_synthetic_run

SPEC = SyntheticRun(
    run_id="arrow-run",
    concurrencies=(1, 2),
    requests_per_point=10,
    lanes=("provenance", "serve_sweep", "qwen3_attempt"),
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server_client():
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        client = boto3.client(
            "s3",
            region_name="us-east-1",
            endpoint_url=f"http://127.0.0.1:{port}",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        client.create_bucket(Bucket="arrow-bucket")
        yield client
    finally:
        server.stop()


def test_auto_picks_arrow_for_an_explicit_endpoint_and_env_overrides(server_client, monkeypatch):
    store = S3Store("s3://arrow-bucket/results", client=server_client)
    monkeypatch.delenv("NEURONPIPE_S3_READER", raising=False)
    assert resolve_s3_reader(store) == "arrow"
    aws = S3Store("s3://b/results", client=boto3.client("s3", region_name="us-east-1"))
    assert resolve_s3_reader(aws) == "boto3"
    monkeypatch.setenv("NEURONPIPE_S3_READER", "arrow")
    assert resolve_s3_reader(aws) == "arrow"
    monkeypatch.setenv("NEURONPIPE_S3_READER", "fast")
    with pytest.raises(S3ReaderError, match="valid: auto, arrow, boto3"):
        resolve_s3_reader(aws)


def test_arrow_reader_sees_only_committed_files_and_matches_local(server_client, tmp_path, monkeypatch):
    monkeypatch.delenv("NEURONPIPE_S3_READER", raising=False)
    store = S3Store("s3://arrow-bucket/results", client=server_client)
    write_synthetic_run(store, SPEC)
    w = store.begin_attempt("arrow-run", "host_cpu", attempt="uncommitted")
    w.add_rows("host_bench", [{"bench": "triad", "value": 1.0, "unit": "GB/s"}])
    store.put_bytes(w.table_key("host_bench"), b"an attempt killed before its marker")

    def no_boto3_reads(*_a, **_k):
        raise AssertionError("the arrow reader must not read tables through boto3")

    monkeypatch.setattr(store, "read_table", no_boto3_reads)
    con = connect(store)
    assert con.execute("SELECT count(*) FROM host_bench").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM serving_points").fetchone() == (2,)
    local = LocalStore(tmp_path / "local")
    write_synthetic_run(local, SPEC)
    expected = (
        connect(local)
        .execute("SELECT point_id, p99_ttft_ms, output_throughput FROM serving_points ORDER BY 1")
        .fetchall()
    )
    assert (
        con.execute("SELECT point_id, p99_ttft_ms, output_throughput FROM serving_points ORDER BY 1").fetchall()
        == expected
    )
    a = build_report_files("s3://arrow-bucket/results", None, tmp_path / "a", s3_client=server_client)
    b = build_report_files(str(local.root), None, tmp_path / "b")
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
