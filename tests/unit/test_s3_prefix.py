"""The shared prefix copy: keys relative to the prefix, directory markers skipped, nothing written outside dest."""
from __future__ import annotations

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
        "a.txt", "sub/b.txt"]
    assert (tmp_path / "out" / "sub" / "b.txt").read_text() == "d/sub/b.txt"
    assert download_prefix(s3, "np-prefix", "none/", tmp_path / "none") == 0
    s3.put_object(Bucket="np-prefix", Key="d/../escape.txt", Body=b"x")
    with pytest.raises(ValueError, match=r"s3://np-prefix/d/\.\./escape\.txt: the key leaves the directory"):
        download_prefix(s3, "np-prefix", "d/", tmp_path / "again")
    assert not (tmp_path / "escape.txt").exists()
