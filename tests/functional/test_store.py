"""The commit protocol, the same tests against a local directory and S3 (moto)."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from analytics.store import AlreadyExistsError, ArtifactNotFoundError, LocalStore, S3Store, open_store
from analytics.store.markers import AttemptClosedError
from analytics.views import connect


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    if request.param == "local":
        yield LocalStore(tmp_path / "results")
        return
    with mock_aws():
        client = boto3.client("s3", region_name="us-west-2")
        client.create_bucket(Bucket="np-results", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        yield S3Store("s3://np-results/results", client=client)


def _bench(store, run_id, lane, value, status="succeeded", supersedes=True):
    w = store.begin_attempt(run_id, lane)
    w.add_rows("host_bench", [{"bench": "triad", "value": value, "unit": "GB/s"}])
    w.add_rows(
        "lane_runs",
        [{"status": status, "supersedes": supersedes, "started_at": 0, "ended_at": 0, "backend": "cpu", "host": "h"}],
    )
    return w


def test_uncommitted_attempt_is_invisible(store):
    w = _bench(store, "r1", "host_cpu", 1.0)
    assert store.read_table("host_bench").num_rows == 0
    w.commit("succeeded")
    assert store.read_table("host_bench").column("value").to_pylist() == [1.0]


def test_files_written_without_marker_stay_invisible(store, tmp_path):
    w = _bench(store, "r1", "merge", 1.0)
    f = tmp_path / "weights.bin"
    f.write_bytes(b"abc")
    w.add_file(w.model_key("m", "weights.bin"), f)  # uploaded, but the attempt never commits (killed)
    assert store.latest_committed("r1", "merge") is None
    assert store.read_table("host_bench").num_rows == 0
    assert store.effective_markers() == []


def test_latest_committed_attempt_per_run_and_lane_wins(store):
    _bench(store, "r1", "host_cpu", 1.0).commit("succeeded")
    _bench(store, "r1", "host_cpu", 2.0).commit("succeeded")
    _bench(store, "r2", "host_cpu", 3.0).commit("succeeded")
    values = sorted(store.read_table("host_bench").column("value").to_pylist())
    assert values == [2.0, 3.0]
    assert store.read_table("host_bench", run_ids=["r1"]).column("value").to_pylist() == [2.0]
    # lane_runs keeps every committed attempt: it is the log
    assert store.read_table("lane_runs").num_rows == 3


def test_resume_skip_supersedes_nothing(store):
    _bench(store, "r1", "host_cpu", 1.0).commit("succeeded")
    w = store.begin_attempt("r1", "host_cpu")
    w.add_rows(
        "lane_runs",
        [{"status": "skipped", "supersedes": False, "started_at": 0, "ended_at": 0, "backend": "cpu", "host": "h"}],
    )
    w.commit("skipped", supersedes=False)
    assert store.read_table("host_bench").column("value").to_pylist() == [1.0]
    assert store.latest_committed("r1", "host_cpu").status == "succeeded"


def test_nothing_is_overwritten(store):
    store.put_bytes("v1/x/a.bin", b"1")
    with pytest.raises(AlreadyExistsError):
        store.put_bytes("v1/x/a.bin", b"2")
    assert store.get_bytes("v1/x/a.bin") == b"1"
    w = _bench(store, "r1", "host_cpu", 1.0)
    w.commit("succeeded")
    with pytest.raises(AttemptClosedError):
        w.commit("succeeded")


def test_missing_key_is_a_clear_error(store):
    with pytest.raises(ArtifactNotFoundError, match="not found"):
        store.get_bytes("models/none/here.bin")


def test_files_round_trip_and_are_named_by_the_marker(store, tmp_path):
    src = tmp_path / "adapter"
    (src / "sub").mkdir(parents=True)
    (src / "a.json").write_text("{}")
    (src / "sub" / "b.bin").write_bytes(b"\x00\x01")
    w = store.begin_attempt("r1", "sft")
    keys = w.add_tree(w.model_key("tiny", "adapter"), src)
    marker = w.commit("succeeded")
    assert sorted(marker.files) == sorted(keys)
    dest = tmp_path / "copy" / "b.bin"
    store.download(w.model_key("tiny", "adapter/sub/b.bin"), dest)
    assert dest.read_bytes() == b"\x00\x01"


def test_views_see_only_the_visible_attempts(store):
    _bench(store, "r1", "host_cpu", 1.0).commit("succeeded")
    _bench(store, "r1", "host_cpu", 5.0).commit("succeeded")
    _bench(store, "r1", "other", 8.0)  # never committed
    con = connect(store)
    assert con.sql("select value from host_bench").fetchall() == [(5.0,)]
    assert con.execute("select count(*) from train_steps").fetchone() == (0,)  # empty tables still have views


def test_invalid_run_id_is_refused(store):
    with pytest.raises(ValueError, match="invalid run_id"):
        store.begin_attempt("bad/id", "x")


def test_open_store_picks_the_implementation(tmp_path):
    assert isinstance(open_store(tmp_path), LocalStore)
    with mock_aws():
        assert isinstance(open_store("s3://b/p"), S3Store)
