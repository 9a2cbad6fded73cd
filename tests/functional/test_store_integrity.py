"""Results you can trust after a fault (issue 15, points 1-4 and 6): checksummed commits, readers that leave
a damaged attempt out with one warning, `verify [--repair]`, an attempt order a clock cannot invert, and
atomic report outputs. The small run is written through the store API (no models trained)."""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from agents.runner import LaneRequest, run_lane
from analytics.mirror import pull
from analytics.store import AlreadyExistsError, LocalStore, S3Store
from analytics.store.integrity import plan_reads, reset_warnings
from analytics.store.markers import CommitMarker, MarkerError, attempt_order
from analytics.store.verify import repair, verify_store
from analytics.views import connect
from control_plane.cli import main
from tests.support import attempts

T0 = datetime(2026, 7, 1, 12, tzinfo=timezone.utc)
READS = {  # every number a reader of this run returns
    "host_bench": "select lane, bench, value from host_bench order by all",
    "requests": "select lane, request_id, ttft_s, e2el_s, output_tokens from requests order by all",
    "train_steps": "select lane, step, loss from train_steps order by all",
    "lane_runs": "select lane, attempt, status, wall_s from lane_runs order by all",
}


def _lane_row(status="succeeded"):
    """A second's attempt whose clock does not move (its end is its start), on no box."""
    return {**attempts.lane_row(status, 1.0, None, None, "cpu", "h", T0), "ended_at": T0}


def small_run(store: LocalStore, tmp_path: Path, run_id: str = "r1") -> None:
    """Three lanes, four tables, a log file: every kind of committed file."""
    w = store.begin_attempt(run_id, "host_cpu")
    w.add_rows("host_bench", [{"bench": "triad", "threads": t, "value": 10.0 + t, "unit": "GB/s"} for t in (1, 2)])
    w.add_rows("lane_runs", [_lane_row()])
    log = tmp_path / "lane.log"
    log.write_text("a log line\n")
    w.add_file(w.log_key("lane.log"), log)
    w.commit("succeeded")
    w = store.begin_attempt(run_id, "serve_sweep")
    w.add_rows(
        "requests",
        [
            {
                "point_id": "p1",
                "request_id": f"q{i}",
                "request_index": i,
                "warmup": False,
                "ttft_s": 0.1 * (i + 1),
                "e2el_s": 0.5 + i,
                "output_tokens": 8 + i,
                "success": True,
                "chunk_times_s": [0.1, 0.2],
                "chunk_tokens": [1, 1],
            }
            for i in range(6)
        ],
    )
    w.add_rows("lane_runs", [_lane_row()])
    w.commit("succeeded")
    w = store.begin_attempt(run_id, "sft")
    w.add_rows("train_steps", [{"model": "m", "step": s, "loss": 2.0 - 0.1 * s} for s in range(5)])
    w.add_rows("lane_runs", [_lane_row()])
    w.commit("succeeded")


def read_numbers(store) -> dict[str, list]:
    """The table views as every reader registers them (the derived views add nothing to check here)."""
    import duckdb

    from analytics.views import register_tables

    con = duckdb.connect()
    register_tables(con, store)
    try:
        return {name: con.execute(sql).fetchall() for name, sql in READS.items()}
    finally:
        con.close()


@pytest.fixture()
def run_store(tmp_path):
    store = LocalStore(tmp_path / "results")
    small_run(store, tmp_path)
    return store


def committed_files(store: LocalStore) -> list[Path]:
    keys = []
    for m in store.markers():
        keys += [*m.keys(), f"v1/_commits/run_id={m.run_id}/lane={m.lane}/{m.attempt}.json"]
    return [store.path / k for k in sorted(keys)]


# ---- 1. checksummed commits ------------------------------------------------------------------------------------


def test_marker_records_size_hash_rows_and_schema_and_files_are_group_readable(run_store):
    import hashlib

    import pyarrow.parquet as pq

    for m in run_store.markers():
        assert m.sequence == 1 and m.digest
        for key in m.keys():
            rec, path = m.checksums[key], run_store.path / key
            assert rec["size"] == path.stat().st_size
            assert rec["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
            if key.endswith(".parquet"):
                assert rec["rows"] == pq.read_metadata(path).num_rows and rec["schema"]
    for path in committed_files(run_store):
        assert path.stat().st_mode & stat.S_IRGRP, f"{path} is not group-readable"


def test_page_checksums_are_written(run_store):
    import pyarrow.parquet as pq

    key = run_store.markers()[1].tables["requests"]
    path = run_store.path / key
    data = bytearray(path.read_bytes())
    data[len(b"PAR1") + 40] ^= 0xFF  # inside the first data page
    damaged = path.parent / "damaged.parquet"
    damaged.write_bytes(bytes(data))
    with pytest.raises(OSError):
        pq.read_table(damaged, page_checksum_verification=True)


def test_markers_without_the_new_fields_still_read(tmp_path):
    store = LocalStore(tmp_path / "old")
    w = store.begin_attempt("r0", "host_cpu", attempt="20250101T000000000000Z-abcdef")
    w.add_rows("host_bench", [{"bench": "triad", "value": 3.0, "unit": "GB/s"}])
    marker = w.commit("succeeded")
    key = "v1/_commits/run_id=r0/lane=host_cpu/20250101T000000000000Z-abcdef.json"
    old = {
        k: v
        for k, v in json.loads((store.path / key).read_bytes()).items()
        if k not in ("sequence", "checksums", "digest", "format")
    }
    (store.path / key).write_text(json.dumps(old, indent=1))
    assert store.latest_committed("r0", "host_cpu").attempt == marker.attempt
    assert read_numbers(store)["host_bench"] == [("host_cpu", "triad", 3.0)]
    report = verify_store(store)  # read, but nothing of it could be checked: never "clean"
    assert not report.problems and [f.key for f in report.unchecked] == [key]
    assert not report.clean and report.exit_code() == 3 and report.exit_code(allow_legacy=True) == 0


@pytest.fixture
def atomic_moto_put(monkeypatch):
    """S3 evaluates If-None-Match and stores the object as one step; moto checks, then stores, without a lock,
    so two racing PUTs can both pass its check (a fresh-clone run saw ``['won', 'won']``). Serializing moto's
    PUT handler gives the race S3's semantics, so what is left to test is ours: that both writes go out
    conditional (a HEAD-then-PUT would let both through even here) and the refusal reaches the caller."""
    from moto.s3.responses import S3Response

    lock, original = threading.Lock(), S3Response.put_object

    def put_object(self, *args, **kwargs):
        with lock:
            return original(self, *args, **kwargs)

    monkeypatch.setattr(S3Response, "put_object", put_object)


def test_s3_put_file_is_create_only_under_a_race(tmp_path, atomic_moto_put):
    with mock_aws():
        client = boto3.client("s3", region_name="us-west-2")
        client.create_bucket(Bucket="np-race", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        store = S3Store("s3://np-race/results", client=client)
        sources = []
        for i in range(2):
            p = tmp_path / f"w{i}.bin"
            p.write_bytes(f"writer {i}".encode())
            sources.append(p)
        barrier, outcomes = threading.Barrier(2), {}

        def write(i):
            barrier.wait()
            try:
                store.put_file("models/r/m/a/w.bin", sources[i])
                outcomes[i] = "won"
            except AlreadyExistsError:
                outcomes[i] = "refused"

        threads = [threading.Thread(target=write, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes.values()) == ["refused", "won"]
        winner = next(i for i, o in outcomes.items() if o == "won")
        assert store.get_bytes("models/r/m/a/w.bin") == sources[winner].read_bytes()


# ---- 2. damage isolated; acceptance: every flip caught ----------------------------------------------------------


def test_every_flipped_byte_is_caught_by_verify_and_never_changes_a_number_silently(run_store, caplog):
    baseline = read_numbers(run_store)
    assert verify_store(run_store).clean
    tried = caught = 0
    for path in committed_files(run_store):
        original = path.read_bytes()
        for pos in sorted({0, len(original) // 2, len(original) - 9}):
            data = bytearray(original)
            data[pos] ^= 0x5A
            path.write_bytes(bytes(data))
            tried += 1
            caught += not verify_store(run_store).clean
            caplog.clear()
            reset_warnings()  # one line per file and reason per process: each flip is a new process here
            with caplog.at_level(logging.WARNING, logger="analytics"):
                numbers = read_numbers(run_store)
            warned = [r.getMessage() for r in caplog.records if r.name.startswith("analytics")]
            if numbers != baseline:
                assert warned and str(path.relative_to(run_store.path)) in warned[0], (path, pos)
            path.write_bytes(original)
    assert caught == tried
    assert read_numbers(run_store) == baseline


def test_truncated_parquet_and_empty_marker_leave_queries_report_and_resume_working(
    run_store, tmp_path, capsys, caplog, test_lanes
):
    request = LaneRequest(lane="t_ok", run_id="r1", backend="cpu", telemetry_interval_s=0.05)
    assert run_lane(request, run_store).status == "succeeded"
    markers = {m.lane: m for m in run_store.markers()}
    requests = run_store.path / markers["serve_sweep"].tables["requests"]
    requests.write_bytes(requests.read_bytes()[:100])
    empty = run_store.path / f"v1/_commits/run_id=r1/lane=t_ok/{markers['t_ok'].attempt}.json"
    empty.write_bytes(b"")
    results = str(run_store.path)

    with caplog.at_level(logging.WARNING, logger="analytics"):
        assert main(["query", "--results", results, "select loss from train_steps order by step"]) == 0
    out = capsys.readouterr().out
    assert "2.0" in out and "1.6" in out
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and any(str(empty.relative_to(run_store.path)) in x for x in lines)
    assert any("requests" in x and "size 100 bytes" in x for x in lines)

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="analytics"):
        assert main(["report", "--results", results, "--out", str(tmp_path / "rep")]) == 0
    report = (tmp_path / "rep" / "REPORT.md").read_text()
    assert "attempt_damaged" in report and "attempt_marker" in report
    assert markers["serve_sweep"].tables["requests"] in report

    # the resume (its own process in real life): the lane whose marker is unreadable runs again; one warning line
    caplog.clear()
    reset_warnings()
    with caplog.at_level(logging.WARNING, logger="analytics"):
        result, again = run_lane(request, run_store), run_lane(request, run_store)
    assert (result.status, again.status) == ("succeeded", "skipped")
    assert sum(str(empty.relative_to(run_store.path)) in r.getMessage() for r in caplog.records) == 1


def test_pull_checks_every_hash_and_leaves_a_damaged_attempt_out(run_store, tmp_path, caplog):
    m = next(m for m in run_store.markers() if m.lane == "sft")
    path = run_store.path / m.tables["train_steps"]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    mirror = LocalStore(tmp_path / "mirror")
    with caplog.at_level(logging.WARNING, logger="analytics"):
        summary = pull(run_store, mirror)
    assert [(e.lane, e.key) for e in summary.damaged] == [("sft", m.tables["train_steps"])]
    assert summary.markers_copied == 2 and {x.lane for x in mirror.markers()} == {"host_cpu", "serve_sweep"}
    assert "SHA-256" in caplog.records[0].getMessage()


# ---- 3. verify and repair -----------------------------------------------------------------------------------------


def test_verify_lists_every_kind_and_repair_never_deletes_committed_data(run_store, tmp_path, capsys):
    root = run_store.path
    before = {p: p.read_bytes() for p in committed_files(run_store)}
    m = next(m for m in run_store.markers() if m.lane == "serve_sweep")
    (root / m.tables["requests"]).unlink()  # missing
    leftover = run_store.begin_attempt("r1", "merge")  # killed before its commit: orphaned file
    src = tmp_path / "w.bin"
    src.write_bytes(b"weights")
    leftover.add_file(leftover.model_key("m", "w.bin"), src)
    tmp = root / "v1" / "host_bench" / ".tmp-killed"
    tmp.write_bytes(b"half")
    young = root / "logs" / "r1" / "merge" / "young" / "x.log"
    young.parent.mkdir(parents=True)
    young.write_bytes(b"still running")
    old = time.time() - 3 * 86400
    for p in (tmp, root / leftover.model_key("m", "w.bin")):
        os.utime(p, (old, old))

    assert main(["verify", "--results", str(root)]) == 1
    out = capsys.readouterr().out
    for kind, what in (
        ("missing", m.tables["requests"]),
        ("orphaned", leftover.model_key("m", "w.bin")),
        ("temp", ".tmp-killed"),
        ("orphaned", "young/x.log"),
    ):
        assert any(line.startswith(kind) and what in line for line in out.splitlines()), (kind, what)
    assert "4 problem(s)" in out and "7 bytes" in out

    assert main(["verify", "--results", str(root), "--repair"]) == 1  # the young leftover stays
    out = capsys.readouterr().out
    assert "1 attempt(s) quarantined, 2 leftover(s) removed, 1 younger than 48 h kept" in out
    assert young.exists() and not tmp.exists() and not (root / leftover.model_key("m", "w.bin")).exists()
    for p, data in before.items():  # committed data untouched (the one missing file aside)
        if p != root / m.tables["requests"]:
            assert p.read_bytes() == data
    young.unlink()
    assert main(["verify", "--results", str(root)]) == 0
    assert "quarantined" in capsys.readouterr().out


def test_readers_skip_a_quarantined_attempt_without_checking_it_again(run_store, caplog):
    m = next(m for m in run_store.markers() if m.lane == "sft")
    path = run_store.path / m.tables["train_steps"]
    original = path.read_bytes()
    path.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    repair(run_store, verify_store(run_store))
    path.write_bytes(original)  # the bytes are whole again; the quarantine record still rules
    reset_warnings()
    with caplog.at_level(logging.WARNING, logger="analytics"):
        assert read_numbers(run_store)["train_steps"] == []
    assert "quarantined" in caplog.records[0].getMessage()
    assert (run_store.path / "v1/_quarantine/run_id=r1/lane=sft" / f"{m.attempt}.json").exists()


# ---- 4. attempt order that survives clocks -------------------------------------------------------------------------


def test_a_clock_stepped_back_does_not_hide_the_newer_attempt(tmp_path, monkeypatch):
    import analytics.store.base as store_mod

    store = LocalStore(tmp_path / "clock")
    old = store.begin_attempt("r1", "host_cpu", attempt="20240101T000000000000Z-legacy")  # before sequences
    old.add_rows("host_bench", [{"bench": "triad", "value": 0.5, "unit": "GB/s"}])
    old.commit("succeeded")
    for value, stamp in ((1.0, "20260701T120000000000Z-aaaaaa"), (2.0, "20200101T000000000000Z-bbbbbb")):
        monkeypatch.setattr(store_mod, "new_attempt_id", lambda stamp=stamp: stamp)  # the clock jumps back
        w = store.begin_attempt("r1", "host_cpu")
        w.add_rows("host_bench", [{"bench": "triad", "value": value, "unit": "GB/s"}])
        w.add_rows("lane_runs", [_lane_row()])
        w.commit("succeeded")
    latest = store.latest_committed("r1", "host_cpu")
    assert latest.sequence == 2 and latest.attempt.endswith("bbbbbb")
    assert [m.sequence for m in store.markers()] == [None, 1, 2]
    con = connect(store)
    assert con.execute("select value from host_bench").fetchall() == [(2.0,)]
    assert con.execute("select attempt from report_lane_attempts where effective").fetchall() == [(latest.attempt,)]
    assert max(store.markers(), key=attempt_order).attempt == latest.attempt


def test_concurrent_begins_claim_distinct_sequences(tmp_path):
    store = LocalStore(tmp_path / "race")
    barrier, seqs = threading.Barrier(4), []

    def begin():
        barrier.wait()
        seqs.append(store.begin_attempt("r1", "host_cpu").sequence)

    threads = [threading.Thread(target=begin) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seqs) == [1, 2, 3, 4]


def test_a_listing_skips_a_file_renamed_away_between_the_walk_and_its_stat(tmp_path, monkeypatch):
    """LocalStore.objects walks the tree, then stats each file: a concurrent writer's temp file renamed in
    between (the race a threaded begin_attempt hit on CI) is skipped, not raised as FileNotFoundError."""
    store = LocalStore(tmp_path / "s")
    store.put_bytes("v1/_seq/run_id=r1/lane=l/00000001", b"{}")
    gone = tmp_path / "s" / "v1" / "_seq" / "run_id=r1" / "lane=l" / ".tmp-renamed"
    gone.write_bytes(b"{}")
    real_stat, calls = Path.stat, []

    def stat(self, *a, **kw):
        if self == gone:
            calls.append(self)
            if len(calls) > 1:  # is_file() saw it; by the listing's own stat the writer had renamed it
                raise FileNotFoundError(2, "No such file or directory", str(self))
        return real_stat(self, *a, **kw)

    monkeypatch.setattr(Path, "stat", stat)
    assert store.list_keys("v1/_seq/") == ["v1/_seq/run_id=r1/lane=l/00000001"]
    assert len(calls) == 2
    monkeypatch.undo()
    assert store.begin_attempt("r1", "l").sequence == 2


def test_a_marker_for_another_attempt_is_foreign(run_store, caplog):
    a, b = run_store.markers()[0], run_store.markers()[1]
    src = run_store.path / f"v1/_commits/run_id=r1/lane={b.lane}/{b.attempt}.json"
    dst = run_store.path / f"v1/_commits/run_id=r1/lane={a.lane}/{a.attempt}.json"
    dst.write_bytes(src.read_bytes())
    with caplog.at_level(logging.WARNING, logger="analytics"):
        plan = plan_reads(run_store)
    assert [e.key for e in plan.exclusions] == [str(dst.relative_to(run_store.path))]
    assert "foreign" in plan.exclusions[0].reason
    with pytest.raises(MarkerError):
        CommitMarker.from_json(src.read_bytes(), key=str(dst.relative_to(run_store.path)))


# ---- 6. atomic outputs ---------------------------------------------------------------------------------------------


def test_a_failed_report_write_leaves_the_previous_report_whole(run_store, tmp_path, monkeypatch):
    import analytics.atomic as atomic

    out = tmp_path / "rep"
    assert main(["report", "--results", str(run_store.path), "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real_fsync = os.fsync
    calls = {"n": 0}

    def full_disk(fd):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", full_disk)
    assert main(["report", "--results", str(run_store.path), "--out", str(out)]) == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temp file left, nothing truncated
