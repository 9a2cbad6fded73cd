"""Every place a stored name becomes a local path goes through ``pipeline.containment.contained``: the mirror's
pull (keys a commit marker names), the sft adapter and merged-model fetches (marker keys, ``artifacts`` paths) and
a dataset's single-object download. A hostile name is refused naming it, before anything is written."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from agents.loadgen.datasets import DatasetError, download_from_s3
from agents.training.merge import MergeInputError, fetch_merged_model, fetch_sft_adapter
from analytics.mirror import marker_key, pull
from analytics.store import CommitMarker, LocalStore


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


class _Source:
    """A source store answering with whatever markers it is handed (a box's hostile proposal, a tampered bucket)."""

    def __init__(self, markers: list[CommitMarker]):
        self._markers, self.unreadable_markers = markers, []

    def markers(self) -> list[CommitMarker]:
        return self._markers

    def download(self, key: str, local: Path) -> None:
        markers = {marker_key(m): m.to_json() for m in self._markers}
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        Path(local).write_bytes(markers.get(key, key.encode()))

    def uri(self, key: str) -> str:
        return f"s3://source/{key}"


def _marker(run_id: str, lane: str, files: list[str]) -> CommitMarker:
    return CommitMarker(
        run_id=run_id, lane=lane, attempt="a1", status="succeeded", supersedes=True, files=files, format=1
    )


HOSTILE = {  # (tmp) -> (marker, the name refused)
    "dotdot file": lambda tmp: (
        _marker("r1", "sft", ["logs/r1/sft/a1/../../../../../outside/escape.txt"]),
        "logs/r1/sft/a1/../../../../../outside/escape.txt",
    ),
    "absolute file": lambda tmp: (
        _marker("r1", "sft", [str(tmp / "outside" / "abs.txt")]),
        str(tmp / "outside" / "abs.txt"),
    ),
    "run id that climbs": lambda tmp: (_marker("x/../../../../outside", "sft", ["logs/ok.txt"]), "run_id=x/../"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_pull_leaves_out_an_attempt_naming_a_key_outside_the_mirror(tmp_path, case):
    hostile, refused = HOSTILE[case](tmp_path)
    good = _marker("r1", "host_cpu", ["logs/r1/host_cpu/a1/lane.log"])
    mirror = LocalStore(tmp_path / "mirror")
    summary = pull(_Source([hostile, good]), mirror)
    assert len(summary.damaged) == 1 and refused in summary.damaged[0].key + summary.damaged[0].reason
    assert "leaves" in summary.damaged[0].reason or "outside" in summary.damaged[0].reason
    assert summary.markers_copied == 1 and [m.lane for m in mirror.markers()] == ["host_cpu"]
    assert not (tmp_path / "outside").exists()
    assert all(not f.startswith("logs/ok") for f in _files(tmp_path / "mirror"))  # nothing of the hostile attempt


class _SftStore:
    def __init__(self, files: list[str]):
        self.marker = _marker("r1", "sft", files)
        self.downloaded: list[Path] = []

    def latest_committed(self, run_id: str, lane: str) -> CommitMarker:
        return self.marker

    def download(self, key: str, local: Path) -> None:
        self.downloaded.append(Path(local))


def test_an_sft_adapter_key_that_climbs_out_of_dest_is_refused_before_any_download(tmp_path):
    store = _SftStore(["models/r1/tiny/adapter/adapter_config.json", "models/r1/tiny/adapter/../../../../x.bin"])
    with pytest.raises(MergeInputError, match=r"models/r1/tiny/adapter/\.\./\.\./\.\./\.\./x\.bin.*'\.\.'"):
        fetch_sft_adapter(store, "r1", "tiny", tmp_path / "dest")
    assert store.downloaded == []


def test_a_merged_file_whose_artifacts_path_climbs_out_of_dest_is_refused(tmp_path):
    store = LocalStore(tmp_path / "store")
    merged = tmp_path / "merged"
    merged.mkdir()
    (merged / "config.json").write_text("{}")
    w = store.begin_attempt("r1", "merge")
    prefix = w.model_key("tiny-llama", "merged")
    w.add_tree(prefix, merged)
    w.add_rows(
        "artifacts",
        [
            {
                "model": "tiny-llama",
                "kind": "merged",
                "stage": "after_merge",
                "path": "../outside/config.json",
                "uri": store.uri(f"{prefix}/config.json"),
                "bytes": 2,
                "sha256": "0",
            }
        ],
    )
    w.commit("succeeded")
    with pytest.raises(MergeInputError, match=r"'\.\./outside/config\.json'"):
        fetch_merged_model(store, "r1", "tiny-llama", tmp_path / "copy")
    assert not (tmp_path / "outside").exists() and not (tmp_path / "copy").exists()


@mock_aws
def test_a_dataset_key_whose_last_part_is_dotdot_is_refused(tmp_path):
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="np-data", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.put_object(Bucket="np-data", Key="datasets/..", Body=b"x")
    with pytest.raises(DatasetError, match=r"s3://np-data/datasets/\.\..*'\.\.'"):
        download_from_s3("s3://np-data/datasets/..", tmp_path / "box" / "dest", s3)
    assert _files(tmp_path) == []
