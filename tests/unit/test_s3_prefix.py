"""The shared prefix copy: keys relative to the prefix, directory markers skipped, nothing written outside dest."""

from __future__ import annotations

import re

import boto3
import pytest
from moto import mock_aws

from agents.s3_prefix import download_prefix


@mock_aws
def test_copies_keys_under_the_prefix_and_refuses_one_that_leaves_the_directory(tmp_path):
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="np-prefix", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    for key in ("d/", "d/a.txt", "d/sub/b.txt", "other/c.txt"):
        s3.put_object(Bucket="np-prefix", Key=key, Body=key.encode())
    assert download_prefix(s3, "np-prefix", "d/", tmp_path / "out") == 2
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.txt")) == [
        "a.txt",
        "sub/b.txt",
    ]
    assert (tmp_path / "out" / "sub" / "b.txt").read_text() == "d/sub/b.txt"
    assert download_prefix(s3, "np-prefix", "none/", tmp_path / "none") == 0
    s3.put_object(Bucket="np-prefix", Key="d/../escape.txt", Body=b"x")
    with pytest.raises(ValueError, match=r"s3://np-prefix/d/\.\./escape\.txt: the key leaves the directory"):
        download_prefix(s3, "np-prefix", "d/", tmp_path / "again")
    assert not (tmp_path / "escape.txt").exists()


@pytest.mark.parametrize("rel", ["{outside}/x", "../x", "sub/../../x", "./x", "sub//x"])
@mock_aws
def test_a_key_whose_part_after_the_prefix_could_leave_dest_is_refused_and_nothing_is_copied(tmp_path, rel):
    rel = rel.format(outside=tmp_path / "outside")  # adapters/foo//<tmp>/outside/x: the relative part is absolute
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="np-prefix", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    for key in ("adapters/foo/a.txt", f"adapters/foo/{rel}", "adapters/foo/zz.txt"):
        s3.put_object(Bucket="np-prefix", Key=key, Body=b"x")
    dest = tmp_path / "box" / "dest"
    with pytest.raises(ValueError, match=re.escape(f"s3://np-prefix/adapters/foo/{rel}: the key leaves")):
        download_prefix(s3, "np-prefix", "adapters/foo/", dest)
    assert not dest.exists()  # every key is checked before the first is copied
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == [] and not (tmp_path / "outside").exists()


class _Listing:
    """A client whose listing is whatever S3 (or whoever answers for it) returns: here a key with a NUL."""

    def __init__(self, keys):
        self.keys, self.downloaded = keys, []

    def get_paginator(self, name):
        keys = self.keys
        return type("P", (), {"paginate": lambda self, **kw: [{"Contents": [{"Key": k} for k in keys]}]})()

    def download_file(self, bucket, key, target):
        self.downloaded.append(target)


def test_a_listed_key_with_a_nul_is_refused_before_any_download(tmp_path):
    client = _Listing(["p/a.txt", "p/b\0.txt"])
    with pytest.raises(ValueError, match="the key leaves.*NUL"):
        download_prefix(client, "b", "p/", tmp_path / "dest")
    assert client.downloaded == []
