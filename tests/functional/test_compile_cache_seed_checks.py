"""A seed trusts nothing the store says: a manifest naming a file outside its entry, an entry outside the cache, a
size or SHA-256 its bytes do not have, or another entry than its key is refused, one line naming it, and nothing is
written anywhere (moto's S3 holds the poisoned entries; the box's cache root is compared before and after)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from agents.compile_cache import (
    CACHE_PREFIX,
    MANIFEST_SUFFIX,
    NEURON_KINDS,
    SEEDED_FILE,
    CacheLayout,
    push,
    seed,
    seeded_entries,
)
from analytics.store import open_store

NS = "neuronx-cc-2.26.6360.0+6f180f47-ncv2"
GENUINE = "neuronxcc-2.26.6360.0+6f180f47/MODULE_1+aa"
FORGED = "neuronxcc-2.26.6360.0+6f180f47/MODULE_9+ff"
NEFF = b"NEFF" * 8
BUCKET = "cache-bucket"


def _entry(root: Path, rel: str) -> None:
    d = root / rel
    d.mkdir(parents=True)
    (d / "model.neff").write_bytes(NEFF)


def _manifest(entry: str, files: dict[str, bytes]) -> dict:
    return {
        "entry": entry,
        "namespace": NS,
        "pushed_at": "2026-12-01T10:00:00+00:00",
        "pushed_by": {},
        "files": [{"path": p, "bytes": len(d), "sha256": hashlib.sha256(d).hexdigest()} for p, d in files.items()],
    }


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None: a directory or a link)."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
        for p in sorted(root.rglob("*"))
    }


# each case: (tmp_path) -> (entry named by the key, manifest, objects under the entry's key prefix, the name refused)
Case = Callable[[Path], tuple[str, dict, dict[str, bytes], str]]


def _file_named(name: Callable[[Path], str]) -> Case:
    def case(tmp: Path):
        path = name(tmp)
        return FORGED, _manifest(FORGED, {path: NEFF}), {path: NEFF}, path

    return case


def _altered(change: Callable[[dict], None], refused: str) -> Case:
    def case(tmp: Path):
        manifest = _manifest(FORGED, {"model.neff": NEFF})
        change(manifest)
        return FORGED, manifest, {"model.neff": NEFF}, refused

    return case


def _entry_named(name: Callable[[Path], str]) -> Case:
    def case(tmp: Path):
        entry = name(tmp)
        return entry, _manifest(entry, {"model.neff": NEFF}), {"model.neff": NEFF}, entry

    return case


CASES: dict[str, Case] = {
    "absolute file": _file_named(lambda tmp: str(tmp / "outside" / "model.neff")),
    "dotdot file": _file_named(lambda tmp: "../../../outside/model.neff"),
    "empty part in a file": _file_named(lambda tmp: "sub//model.neff"),
    "dot part in a file": _file_named(lambda tmp: "./model.neff"),
    "wrong size": _altered(lambda m: m["files"][0].update(bytes=len(NEFF) + 1), "model.neff"),
    "wrong digest": _altered(lambda m: m["files"][0].update(sha256="0" * 64), "model.neff"),
    "another entry's manifest": _altered(lambda m: m.update(entry=GENUINE), GENUINE),
    "another namespace's manifest": _altered(lambda m: m.update(namespace="neuronx-cc-9-ncv3"), "neuronx-cc-9-ncv3"),
    "absolute entry": _entry_named(lambda tmp: str(tmp / "outside" / "MODULE_9+ff")),
    "dotdot entry": _entry_named(lambda tmp: "neuronxcc-2.26.6360.0+6f180f47/../../../outside/MODULE_9+ff"),
    "entry of no kind": _entry_named(lambda tmp: "elsewhere/MODULE_9+ff"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@mock_aws
def test_a_poisoned_manifest_is_refused_and_nothing_is_written(tmp_path, case):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    store = open_store(f"s3://{BUCKET}/results", s3_client=s3)
    root = tmp_path / "box" / "cache"
    _entry(root, GENUINE)
    layout = CacheLayout(root, NS, NEURON_KINDS)
    assert push(store, layout).entries == 1
    entry, manifest, objects, refused = CASES[case](tmp_path)
    base = f"results/{CACHE_PREFIX}/{NS}/{entry}"
    for path, data in objects.items():
        s3.put_object(Bucket=BUCKET, Key=f"{base}/{path}", Body=data)
    s3.put_object(Bucket=BUCKET, Key=base + MANIFEST_SUFFIX, Body=json.dumps(manifest).encode())
    before = _tree(tmp_path)

    got = seed(store, layout)

    assert (got.entries, got.present) == (0, 1)
    assert len(got.skipped) == 1 and refused in got.skipped[0], got.skipped
    assert _tree(tmp_path) == before  # the cache root unchanged, nothing outside it either
    assert layout.entries() == [GENUINE]


@mock_aws
def test_a_good_entry_beside_a_poisoned_one_is_still_seeded_whole(tmp_path):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    store = open_store(f"s3://{BUCKET}/results", s3_client=s3)
    _entry(tmp_path / "a", GENUINE)
    push(store, CacheLayout(tmp_path / "a", NS, NEURON_KINDS))
    entry, manifest, objects, _ = CASES["dotdot file"](tmp_path)
    base = f"results/{CACHE_PREFIX}/{NS}/{entry}"
    for path, data in objects.items():
        s3.put_object(Bucket=BUCKET, Key=f"{base}/{path}", Body=data)
    s3.put_object(Bucket=BUCKET, Key=base + MANIFEST_SUFFIX, Body=json.dumps(manifest).encode())
    root = tmp_path / "box" / "cache"

    got = seed(store, CacheLayout(root, NS, NEURON_KINDS))

    assert (got.entries, got.bytes, len(got.skipped)) == (1, len(NEFF), 1)
    assert sorted(_tree(root)) == [SEEDED_FILE, "neuronxcc-2.26.6360.0+6f180f47", GENUINE, f"{GENUINE}/model.neff"]
    assert seeded_entries(root) == {GENUINE}
    assert not (tmp_path / "box" / "outside").exists()
