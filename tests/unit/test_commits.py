"""Commits a box cannot forge: a box proposes its attempt's marker; the control plane commits the one the lane's own
callback names, for the run and lane the plan says, after checking that every file it names is that attempt's own
and exists with its size. A proposal for another lane or run, a marker naming another attempt's files, a size that
differs or a damaged marker is refused, and nothing becomes visible to readers."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from analytics.store import LocalStore
from analytics.store.markers import marker_key, proposal_key
from control_plane.commits import CommitRefusedError, attempt_of, commit_lane, promote

RUN = "r-commit"


@pytest.fixture
def store(tmp_path):
    s = LocalStore(tmp_path / "store")
    s.proposes = True  # as a box's S3Store with NEURONPIPE_COMMITS=propose
    return s


def propose(store, lane: str, run: str = RUN, status: str = "succeeded", log: bytes | None = b"log") -> str:
    now = datetime.now(timezone.utc)
    writer = store.begin_attempt(run, lane)
    writer.add_rows(
        "lane_runs",
        [
            {
                "started_at": now,
                "ended_at": now,
                "wall_s": 0.0,
                "backend": "cpu",
                "host": "box",
                "status": status,
                "supersedes": True,
            }
        ],
    )
    if log is not None:
        path = store.root_path / "lane.log" if hasattr(store, "root_path") else None
        import tempfile
        from pathlib import Path

        tmp = Path(tempfile.mkdtemp()) / "lane.log"
        tmp.write_bytes(log)
        writer.add_file(writer.log_key("lane.log"), tmp)
        del path
    writer.commit(status)
    return writer.attempt


def visible(store, run: str = RUN) -> set[tuple[str, str]]:
    return {(m.lane, m.attempt) for m in store.usable_markers() if m.run_id == run}


def test_a_box_proposes_and_readers_see_nothing_until_the_control_plane_commits(store):
    attempt = propose(store, "smoke@trn1")
    assert store.exists(proposal_key(RUN, "smoke@trn1", attempt)) and not store.exists(
        marker_key(RUN, "smoke@trn1", attempt)
    )
    assert visible(store) == set()
    answer = commit_lane(store, RUN, "smoke@trn1", {"attempt": attempt, "status": "succeeded"})
    assert answer == {"committed": True, "run_id": RUN, "lane": "smoke@trn1", "attempt": attempt, "status": "succeeded"}
    assert visible(store) == {("smoke@trn1", attempt)}
    assert commit_lane(store, RUN, "smoke@trn1", {"attempt": attempt})["committed"]  # a retry is a no-op


def test_a_failed_lanes_callback_names_its_attempt_in_the_cause(store):
    attempt = propose(store, "sft@trn1", status="failed")
    cause = {"Error": "Lane.RuntimeError", "Cause": json.dumps({"attempt": attempt, "error_message": "boom"})}
    assert attempt_of(cause) == attempt
    assert commit_lane(store, RUN, "sft@trn1", cause)["committed"]


def test_a_proposal_for_another_lane_or_run_never_commits_through_this_lanes_callback(store):
    forged = propose(store, "serve_sweep@inf2")  # written by another box, for a lane that is not its own
    other_run = propose(store, "smoke@trn1", run="r-other")
    for callback in ({"attempt": forged}, {"attempt": other_run}):
        answer = commit_lane(store, RUN, "smoke@trn1", callback)  # the plan's run and lane, the box's attempt id
        assert not answer["committed"] and answer["error"] == "Commit.Refused"
        assert "no proposed marker" in answer["message"]
    assert visible(store) == set() and visible(store, "r-other") == set()


def test_a_callback_naming_no_attempt_or_a_path_is_refused(store):
    assert "names no attempt" in commit_lane(store, RUN, "smoke@trn1", {"status": "succeeded"})["message"]
    assert "not an attempt id" in commit_lane(store, RUN, "smoke@trn1", {"attempt": "../../x"})["message"]


def _rewrite_proposal(store, lane: str, attempt: str, change) -> None:
    """A box rewriting its proposal (it may: the key is its own), its digest made right again."""
    from analytics.store.markers import CommitMarker

    path = store._p(proposal_key(RUN, lane, attempt))
    marker = CommitMarker.from_json(path.read_bytes())
    path.chmod(0o644)
    path.write_bytes(change(marker).to_json())


def test_a_proposal_naming_another_attempts_files_is_refused(store):
    from dataclasses import replace

    victim = propose(store, "serve_sweep@inf2")
    victim_log = f"logs/{RUN}/serve_sweep@inf2/{victim}/lane.log"
    attempt = propose(store, "smoke@trn1")

    def steal(m):
        return replace(
            m, files=[*m.files, victim_log], checksums={**m.checksums, victim_log: {"size": 3, "sha256": "0" * 64}}
        )

    _rewrite_proposal(store, "smoke@trn1", attempt, steal)
    with pytest.raises(CommitRefusedError, match="which is not this attempt's own file"):
        promote(store, RUN, "smoke@trn1", attempt)
    assert visible(store) == set()


def test_a_size_that_differs_or_a_damaged_proposal_is_refused(store):
    from dataclasses import replace

    attempt = propose(store, "smoke@trn1")
    key = next(k for k in store.list_keys("logs/") if attempt in k)

    def grow(m):
        return replace(m, checksums={**m.checksums, key: {**m.checksums[key], "size": 10_000}})

    _rewrite_proposal(store, "smoke@trn1", attempt, grow)
    with pytest.raises(CommitRefusedError, match="bytes, the proposal says 10000"):
        promote(store, RUN, "smoke@trn1", attempt)
    path = store._p(proposal_key(RUN, "smoke@trn1", attempt))
    path.write_bytes(path.read_bytes().replace(b'"succeeded"', b'"skipped"'))
    with pytest.raises(CommitRefusedError, match="damaged"):
        promote(store, RUN, "smoke@trn1", attempt)
    assert visible(store) == set()


def test_a_trusted_writer_commits_directly(tmp_path):
    """Local runs, importers and the control plane's own records: no proposal, the marker at once."""
    store = LocalStore(tmp_path / "local")
    attempt = propose(store, "smoke@local", log=None)
    assert visible(store) == {("smoke@local", attempt)}
