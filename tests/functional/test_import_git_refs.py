"""`import torchneuronx --ref`: a ref is a ref, never an option to git, and reaches git after
``--end-of-options``; bad refs get one line, exit 2, and nothing is written anywhere."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from analytics.importers.source import GitRepo, RefError, SourceError, check_ref
from control_plane.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torchneuronx"
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tnx-git") / "repo"
    shutil.copytree(FIXTURE, root)
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "PATH": "/usr/bin:/bin",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "first"], ["tag", "v1"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)
    return root


@pytest.mark.parametrize(
    "ref",
    [
        "--output={out}",
        "--output",
        "-o",
        "--exec-path={out}",
        "-",
        "--all",
        "--no-walk",
        "main..v1",
        "a b",
        "x\x1b[31m",
        "HEAD:trn1",
        "@",
        "x@{{1}}",
        "a/.b",
        "a.lock",
        "a//b",
        "/a",
        "a/",
        "a.",
        "*",
        "a[1]",
        "a\\b",
        "",
    ],
)
def test_a_ref_that_is_no_ref_is_refused_in_one_line_and_nothing_is_written(repo, tmp_path, capsys, ref):
    out = tmp_path / "written-by-git"
    results = tmp_path / "r"
    code = main(["import", "torchneuronx", str(repo), "--results", str(results), f"--ref={ref.format(out=out)}"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1 and "--ref" in err[0], err
    assert not out.exists()
    assert not results.exists() or not any(p.is_file() for p in results.rglob("*"))


@pytest.mark.parametrize(
    "ref", ["HEAD", "main", "v1", "refs/heads/main", "refs/tags/v1", "HEAD~0", "main^0", "feature/x-1.2"]
)
def test_ordinary_refs_pass_the_check(ref):
    assert check_ref(ref) == ref


def test_a_hex_sha_passes_and_resolves(repo, tmp_path):
    sha = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert check_ref(sha) == sha and check_ref(sha[:7]) == sha[:7]
    git = GitRepo(repo / ".git")
    assert git.resolve(sha[:7]).sha == sha and git.resolve("v1").sha == sha and git.resolve("main").sha == sha
    assert main(["import", "torchneuronx", str(repo), "--results", str(tmp_path / "r"), "--ref", "v1"]) == 0


def test_resolve_refuses_an_option_even_when_called_directly(repo, tmp_path):
    out = tmp_path / "out"
    git = GitRepo(repo / ".git")
    with pytest.raises(RefError, match=r"^--ref: "):
        git.resolve(f"--output={out}")
    with pytest.raises(RefError, match=r"^--ref: "):
        git.history(f"--output={out}", ["trn1/results"])
    assert not out.exists()
    assert issubclass(RefError, SourceError)


def test_a_ref_naming_no_commit_is_refused_naming_it(repo, capsys, tmp_path):
    assert main(["import", "torchneuronx", str(repo), "--results", str(tmp_path / "r"), "--ref", "nope"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "'nope' names no commit" in err[0], err
