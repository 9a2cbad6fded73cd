"""`import torchneuronx` reads only the SOURCE: a result file linked to a file outside it is refused, a linked
directory is not followed (a ``trn1/results`` link to ``/`` walks nothing), a link git holds is no file, and a
telemetry CSV that cannot be read as one is dropped with a note naming it, never silently."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from analytics.store import LocalStore
from analytics.views import connect
from control_plane.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torchneuronx"
POINT = "inf2/results/serve/tiny_base_short/isl8_osl4_c1.json"
CSV = "inf2/results/serve/tiny_base_short/isl8_osl4_c1.telemetry.csv"


def _copy(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(FIXTURE, src)
    return src


def _import(src: Path, results: Path, capsys, timeout_s: int = 60) -> tuple[int, list[str], str]:
    def blocked(_sig, _frame):
        raise TimeoutError(f"the import ran {timeout_s} s: it walked outside the SOURCE")

    old = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(timeout_s)
    try:
        code = main(["import", "torchneuronx", str(src), "--results", str(results), "--run-id", "x"])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    captured = capsys.readouterr()
    return code, [ln for ln in captured.err.splitlines() if ln.strip()], captured.out


def _nothing_written(results: Path) -> bool:
    return not results.exists() or not any(p.is_file() for p in results.rglob("*"))


def test_a_result_file_linked_outside_the_source_is_refused(tmp_path, capsys):
    src = _copy(tmp_path)
    outside = tmp_path / "outside.json"
    outside.write_text((src / POINT).read_text())
    (src / POINT).unlink()
    (src / POINT).symlink_to(outside)
    results = tmp_path / "r"
    code, err, _ = _import(src, results, capsys)
    assert code == 2 and len(err) == 1, err
    assert POINT in err[0] and "outside the SOURCE" in err[0] and str(outside) in err[0], err
    assert _nothing_written(results)


def test_a_result_file_linked_inside_the_source_is_read(tmp_path, capsys):
    src = _copy(tmp_path)
    (src / "kept.json").write_text((src / POINT).read_text())
    (src / POINT).unlink()
    (src / POINT).symlink_to(src / "kept.json")
    code, err, _ = _import(src, tmp_path / "r", capsys)
    assert code == 0, err


@pytest.mark.parametrize("target", ["/", "outside"])
def test_a_results_directory_linked_outside_is_not_followed_and_is_named(tmp_path, capsys, target):
    src = _copy(tmp_path)
    outside = tmp_path / "outside-trn1"
    shutil.copytree(src / "trn1" / "results", outside)  # a whole, valid trn1/results: never to be read
    shutil.rmtree(src / "trn1" / "results")
    (src / "trn1" / "results").symlink_to("/" if target == "/" else outside)
    results = tmp_path / "r"
    code, err, out = _import(src, results, capsys)
    assert code == 0, err
    con = connect(LocalStore(results))
    roles = {r[0] for r in con.execute("SELECT box_role FROM lane_runs").fetchall()}
    assert roles == {"inf2"}, roles  # trn1's results were not read through the link
    assert "note: trn1/results: a symbolic link to a directory" in out and "not followed" in out, out
    (config,) = con.execute("SELECT config_json FROM lane_runs LIMIT 1").fetchone()
    assert any(n.startswith("trn1/results:") for n in json.loads(config)["imported"]["not_followed"])


def test_a_subdirectory_link_is_not_followed(tmp_path, capsys):
    src = _copy(tmp_path)
    loop = src / "inf2" / "results" / "serve" / "loop"
    loop.symlink_to(src)  # followed, it would read the whole tree again, and again
    code, err, out = _import(src, tmp_path / "r", capsys)
    assert code == 0, err
    assert "note: inf2/results/serve/loop: a symbolic link to a directory" in out, out


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_link_held_in_git_is_no_file_and_is_named(tmp_path, capsys):
    src = _copy(tmp_path)
    (src / POINT).unlink()
    os.symlink("/etc/passwd", src / POINT)
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "PATH": "/usr/bin:/bin",
    }
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "links"]):
        subprocess.run(["git", "-C", str(src), *args], check=True, capture_output=True, env=env)
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(bare)], check=True, capture_output=True, env=env)
    results = tmp_path / "r"
    code, err, out = _import(bare, results, capsys)
    assert code == 0, err
    assert f"note: {POINT}: a symbolic link in git, not read" in out, out
    con = connect(LocalStore(results))
    assert (
        con.execute(
            "SELECT count(*) FROM serving_aggregates WHERE point_id = 'tiny_base_short/isl8_osl4_c1'"
        ).fetchone()[0]
        == 0
    )


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\xff\xfe garbage \x1b[2J\nnot,a,telemetry\n1,2,3\n",
        b"t_s,nothing_we_know\n0,1\n1,2\n",
        b"",
        b't_s,power_w\n0,"' + b"9" * 200_000 + b'"\n',
    ],
    ids=["bytes", "no-known-column", "empty", "field-over-csv-limit"],
)
def test_a_telemetry_csv_that_is_no_telemetry_is_dropped_with_a_note_naming_it(tmp_path, capsys, garbage):
    src = _copy(tmp_path)
    (src / CSV).write_bytes(garbage)
    results = tmp_path / "r"
    code, err, out = _import(src, results, capsys)
    assert code == 0, err
    assert f"note: {CSV}: telemetry CSV dropped" in out, out
    con = connect(LocalStore(results))
    (config,) = con.execute("SELECT config_json FROM lane_runs WHERE lane = 'serve_sweep'").fetchone()
    dropped = json.loads(config)["null_reasons"]["telemetry_dropped"]
    assert list(dropped) == [CSV] and dropped[CSV].startswith("telemetry CSV dropped"), dropped


def test_a_cell_that_is_no_number_is_null_with_a_note_that_says_so(tmp_path, capsys):
    src = _copy(tmp_path)
    lines = (src / CSV).read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[1].split(",")
    column = next(i for i, name in enumerate(header) if name == "power_w")
    cells[column] = "hot"
    (src / CSV).write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    results = tmp_path / "r"
    code, err, _ = _import(src, results, capsys)
    assert code == 0, err
    con = connect(LocalStore(results))
    notes = {
        r[0]
        for r in con.execute(
            "SELECT note FROM telemetry WHERE metric = 'power_w' AND value IS NULL AND lane = 'serve_sweep'"
        ).fetchall()
    }
    assert notes == {"not a number in the source CSV ('hot'): stored NULL"}, notes
