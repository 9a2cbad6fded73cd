"""From AWS, a link to a run's REPORT.html (moto): the finalize Lambda's page in the bucket is presigned for 1 h by
``neuronpipe report --from s3://…`` and by ``neuronpipe status RUN_ID`` once the run has ended; no page, no link,
and a line saying why."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from urllib.parse import parse_qs, urlparse

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws

from analytics.store import S3Store
from control_plane.aws import REPORT_URL_EXPIRY_S, ReportBucket
from control_plane.cli import main
from control_plane.progress import RunProgress
from control_plane.settings import ControlPlaneSettings, get_settings
from tests.support.synthetic import SyntheticRun, write_synthetic_run

REGION = "us-east-1"
BUCKET = "results-bucket"
RESULTS = f"s3://{BUCKET}/results"


@pytest.fixture()
def s3(monkeypatch):
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("NEURONPIPE_REPORTS_PREFIX", raising=False)
    get_settings.cache_clear()
    with mock_aws():
        client = boto3.client("s3", region_name=REGION, config=Config(signature_version="s3v4"))  # as ReportBucket
        client.create_bucket(Bucket=BUCKET)
        yield client
    get_settings.cache_clear()


def _page(s3, run_id: str) -> None:
    s3.put_object(Bucket=BUCKET, Key=f"reports/{run_id}/REPORT.html", Body=b"<!DOCTYPE html>")


def _expires(url: str) -> int:
    return int(parse_qs(urlparse(url).query)["X-Amz-Expires"][0])


def test_a_page_in_the_bucket_is_presigned_for_an_hour(s3):
    bucket = ReportBucket.for_results(RESULTS, "reports", client=s3)
    assert bucket.presigned("run-1") is None
    _page(s3, "run-1")
    now = datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc)
    link = bucket.presigned("run-1", now=now)
    assert link.uri == f"s3://{BUCKET}/reports/run-1/REPORT.html"
    assert urlparse(link.url).path.endswith("/reports/run-1/REPORT.html") and BUCKET in link.url
    assert _expires(link.url) == REPORT_URL_EXPIRY_S == 3600
    assert link.line() == f"REPORT.html (presigned, expires in 1 h, at 2026-07-01 13:00 UTC): {link.url}"
    assert s3.generate_presigned_url  # the URL is what boto3 signs; fetching it is S3's business, not moto's


def test_report_from_a_bucket_prints_the_runs_page_link(s3, tmp_path, capsys):
    write_synthetic_run(
        S3Store(RESULTS, client=s3),
        SyntheticRun(run_id="s3-run", concurrencies=(1,), requests_per_point=6, lanes=("provenance", "serve_sweep")),
    )
    assert main(["report", "--from", RESULTS, "--run-id", "s3-run", "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr()
    assert "run s3-run: no REPORT.html at s3://results-bucket/reports/s3-run/REPORT.html" in out.err
    _page(s3, "s3-run")
    assert main(["report", "--from", RESULTS, "--out", str(tmp_path / "b")]) == 0  # the bucket's one run
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("run s3-run: "))
    assert line.startswith("run s3-run: REPORT.html (presigned, expires in 1 h, at ")
    assert _expires(line.rsplit(": ", 1)[1]) == 3600


def test_status_links_the_page_once_the_run_has_ended(s3, monkeypatch, capsys):
    from control_plane.commands import status

    settings = ControlPlaneSettings(results_uri=None)
    running = RunProgress(run_id="run-9", status="RUNNING", results_uri=RESULTS)
    assert status.report_page(running, settings, REGION, client=s3) == (None, "")
    ended = RunProgress(run_id="run-9", status="SUCCEEDED", results_uri=RESULTS)
    link, why = status.report_page(ended, settings, REGION, client=s3)
    assert link is None and why == "no REPORT.html at s3://results-bucket/reports/run-9/REPORT.html (yet)"
    link, why = status.report_page(RunProgress(run_id="run-9", status="FAILED"), settings, REGION, client=s3)
    assert link is None and "results bucket is not known (set NEURONPIPE_RESULTS_URI)" in why
    _page(s3, "run-9")
    link, why = status.report_page(ended, settings, REGION, client=s3)
    assert why == "" and _expires(link.url) == 3600

    # the command: the execution's history says where the results are; the page's link is printed (and in --json)
    class History:
        def __init__(self, client):
            pass

        @staticmethod
        def find_state_machine(name):
            return f"arn:aws:states:{REGION}:123456789012:stateMachine:{name}"

        @staticmethod
        def execution_arn(arn, run_id):
            return arn.replace(":stateMachine:", ":execution:") + f":{run_id}"

        def history(self, arn):
            return [
                {
                    "type": "ExecutionStarted",
                    "id": 1,
                    "timestamp": datetime(2026, 7, 1, tzinfo=timezone.utc),
                    "executionStartedEventDetails": {"input": json.dumps({"run_id": "run-9", "results_uri": RESULTS})},
                },
                {
                    "type": "ExecutionSucceeded",
                    "id": 2,
                    "timestamp": datetime(2026, 7, 1, 1, tzinfo=timezone.utc),
                    "executionSucceededEventDetails": {"output": json.dumps({"run_id": "run-9"})},
                },
            ]

    import control_plane.aws as aws

    monkeypatch.setattr(aws, "Executions", History)
    assert main(["status", "run-9", "--json", "--region", REGION]) == 0
    page = json.loads(capsys.readouterr().out)["report_html"]
    assert page["uri"] == f"s3://{BUCKET}/reports/run-9/REPORT.html" and page["expires_in_s"] == 3600
    assert main(["status", "run-9", "--region", REGION]) == 0
    assert "report: REPORT.html (presigned, expires in 1 h, at " in capsys.readouterr().out


@pytest.fixture()
def s3_server():
    """A moto server on loopback: a presigned URL is fetched over HTTP, as a browser fetches it."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    client = boto3.client(
        "s3",
        region_name=REGION,
        endpoint_url=f"http://{host}:{port}",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(signature_version="s3v4"),
    )
    client.create_bucket(Bucket=BUCKET)
    try:
        yield client
    finally:
        server.stop()


def test_the_finalize_lambdas_page_opens_from_its_presigned_link_as_html(s3_server, tmp_path):
    """The link opens the page, not a download: each report file is stored with its type and comes back with it."""
    import urllib.request

    from control_plane.handlers.finalize_run import FinalizeRequest, finalize

    page = '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>report</body></html>'

    def build(results_uri, run_ids, out):
        files = {"REPORT.md": "# report\n", "comparison.json": "{}", "REPORT.html": page, "plot.png": "\x89PNG"}
        for name, text in files.items():
            (tmp_path / name).write_text(text)
        return [tmp_path / name for name in files]

    bucket = ReportBucket.for_results(RESULTS, "reports", client=s3_server)
    finalize(FinalizeRequest(run_id="run-7", results_uri=RESULTS, status="succeeded"), bucket, build)
    types = {
        name: s3_server.head_object(Bucket=BUCKET, Key=f"reports/run-7/{name}")["ContentType"]
        for name in ("REPORT.html", "REPORT.md", "comparison.json", "plot.png")
    }
    assert types == {
        "REPORT.html": "text/html; charset=utf-8",
        "REPORT.md": "text/markdown; charset=utf-8",
        "comparison.json": "application/json",
        "plot.png": "image/png",
    }
    link = bucket.presigned("run-7")
    with urllib.request.urlopen(link.url, timeout=10) as response:  # a loopback moto server
        assert response.headers["Content-Type"] == "text/html; charset=utf-8"
        assert "attachment" not in (response.headers.get("Content-Disposition") or "")
        assert response.read().decode() == page
