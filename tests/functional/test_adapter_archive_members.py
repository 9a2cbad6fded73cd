"""An adapter tarball is unpacked only when every member is a plain file or directory that lands inside the unpack
directory: an absolute name, a ``..``, a link of either kind, a device or a FIFO refuses the whole archive, one
line naming the member, before anything is written."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from agents.serving.adapter_source import AdapterSourceError, fetch_adapter

CONFIG = b'{"peft_type": "LORA"}'


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info, None


def _archive(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir())


CASES = {  # (tmp) -> (hostile member, the words that say why)
    "absolute": (lambda tmp: _file(str(tmp / "outside" / "adapter_model.safetensors")), "absolute"),
    "dotdot": (lambda tmp: _file("../../outside/adapter_model.safetensors"), r"'\.\.'"),
    "symlink out": (lambda tmp: _special("adapter_model.safetensors", tarfile.SYMTYPE, "/etc/passwd"), "symbolic link"),
    "symlink in": (
        lambda tmp: _special("adapter_model.safetensors", tarfile.SYMTYPE, "adapter_config.json"),
        "symbolic link",
    ),
    "hardlink": (
        lambda tmp: _special("adapter_model.safetensors", tarfile.LNKTYPE, "adapter_config.json"),
        "hard link",
    ),
    "character device": (lambda tmp: _special("tty", tarfile.CHRTYPE), "device or FIFO"),
    "block device": (lambda tmp: _special("disk", tarfile.BLKTYPE), "device or FIFO"),
    "fifo": (lambda tmp: _special("pipe", tarfile.FIFOTYPE), "device or FIFO"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_member_refuses_the_whole_archive_naming_it(tmp_path, case):
    make, why = CASES[case]
    hostile = make(tmp_path)
    archive = _archive(tmp_path / "a.tar.gz", [_file("adapter_config.json", CONFIG), hostile, _file("zz_after.txt")])
    before = _files(tmp_path)
    with pytest.raises(AdapterSourceError, match=rf"member '{hostile[0].name}' is refused: .*{why}") as info:
        fetch_adapter(str(archive), tmp_path / "box")
    assert "\n" not in str(info.value)
    assert _files(tmp_path) == before  # not even the good members before it
    assert not (tmp_path / "box" / "unpacked").exists() and not (tmp_path / "outside").exists()


def test_a_tarball_of_dot_with_plain_members_unpacks(tmp_path):
    """``tar -C adapter -czf a.tgz .`` names its members ``./...``: that leading ``./`` is the archive's own root."""
    dot = tarfile.TarInfo(".")
    dot.type = tarfile.DIRTYPE
    sub = tarfile.TarInfo("./sub")
    sub.type = tarfile.DIRTYPE
    archive = _archive(
        tmp_path / "a.tgz", [(dot, None), _file("./adapter_config.json", CONFIG), (sub, None), _file("./sub/extra.bin")]
    )
    out = fetch_adapter(str(archive), tmp_path / "box")
    assert _files(out) == ["adapter_config.json", "sub/extra.bin"]
    assert (out / "adapter_config.json").read_bytes() == CONFIG


@mock_aws
def test_an_s3_key_that_names_no_file_is_refused_before_its_download(tmp_path):
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="np-adapters", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.put_object(Bucket="np-adapters", Key="adapters/tiny-llama/..", Body=b"x")
    with pytest.raises(AdapterSourceError, match=r"'\.\.'"):
        fetch_adapter("s3://np-adapters/adapters/tiny-llama/..", tmp_path / "box", s3_client=s3)
    assert _files(tmp_path) == []
