"""What `neuronpipe` prints survives pipes, logs and copy-paste: off a terminal nothing is wrapped or cut (a long
path stays whole on one line, a table cell too), `query --format csv` ends lines with LF, and on a terminal the
tables fit its width.

Every command runs for real through a subprocess (stdout and stderr are pipes, as in CI or ``| tee``); the TTY
case runs one in a pseudo-terminal 80 columns wide.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len

NO_AWS = {"AWS_ACCESS_KEY_ID": "none", "AWS_SECRET_ACCESS_KEY": "none", "AWS_EC2_METADATA_DISABLED": "true"}
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]|\x1b[=>78]")


def neuronpipe(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(
        [sys.executable, "-m", "control_plane.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **NO_AWS, "COLUMNS": "80", **(env or {})},
    )
    if check:
        assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-2000:]
    return out


@pytest.fixture
def long_dir(tmp_path: Path) -> Path:
    """A directory whose path is well over 200 characters (what a CI runner's workspace can look like)."""
    path = tmp_path.joinpath(*(f"a-rather-long-directory-name-{i:02d}" for i in range(8)))
    path.mkdir(parents=True)
    assert len(str(path)) > 200
    return path


def whole_lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


@pytest.mark.usefixtures("test_lanes")
def test_a_local_run_prints_its_long_paths_whole_on_one_line(long_dir):
    results, report, scratch = long_dir / "results", long_dir / "report", long_dir / "tmp"
    scratch.mkdir()  # the lanes' logs go under TMPDIR: their paths are long too
    out = neuronpipe(
        "run",
        "--local",
        "--lanes",
        "t_ok,t_boom",
        "--results",
        str(results),
        "--run-id",
        "long",
        "--no-live",
        "--report",
        str(report),
        env={"TMPDIR": str(scratch)},
        check=False,
    )
    assert out.returncode == 3, out.stderr[-3000:]  # partial: t_ok succeeded, t_boom failed
    lines = whole_lines(out.stderr)
    assert any(line.startswith("run id: long") and f"results: {results}" in line for line in lines), out.stderr
    logs = [line.removeprefix("  log: ") for line in lines if line.startswith("  log: ")]
    assert len(logs) == 1 and logs[0].startswith(str(scratch)) and logs[0].endswith("t_boom.log"), out.stderr
    assert Path(logs[0]).is_file()
    assert any(line.startswith(f"report: {report / 'REPORT.md'}  (") for line in lines), out.stderr
    assert out.stdout.splitlines()[-1] == "long"  # the run id, alone on the last line of stdout


def test_plan_tables_keep_every_cell_whole_off_a_terminal(long_dir):
    tokenizer = str(long_dir / "tokenizer")
    request = long_dir / "run.json"
    request.write_text(
        json.dumps({"lanes": ["provenance", "host_cpu"], "lane_config": {"host_cpu": {"tokenizer_path": tokenizer}}})
    )
    out = neuronpipe("plan", "--input", str(request), "--history", str(long_dir / "no-history"))
    cell = json.dumps({"tokenizer_path": tokenizer})
    rows = [line for line in whole_lines(out.stdout) if "host_cpu@" in line and "tokenizer_path" in line]
    assert len(rows) == 2 and all(line.endswith(f"│ {cell} │") for line in rows), out.stdout
    assert "…" not in out.stdout  # nothing ellipsised
    assert not re.search(r"\x1b\[", out.stdout)  # plain text: no colour or cursor codes in a pipe


@pytest.mark.usefixtures("test_lanes")
def test_query_csv_lines_end_with_lf(tmp_path):
    results = str(tmp_path / "r")
    neuronpipe("run", "--local", "--lanes", "t_ok", "--results", results, "--run-id", "csv", "--no-live")
    raw = subprocess.run(
        [
            sys.executable,
            "-m",
            "control_plane.cli",
            "query",
            "--results",
            results,
            "--format",
            "csv",
            "select count(*) as n, 'a,b' as quoted from host_bench",
        ],
        capture_output=True,
        timeout=300,
        env={**os.environ, **NO_AWS},
    )
    assert raw.returncode == 0, raw.stderr
    assert raw.stdout == b'n,quoted\n1,"a,b"\n'  # LF only: `| tail -1` gives `1,"a,b"`, not `...\r`


def _run_in_pty(args: list[str], columns: int, env: dict[str, str]) -> str:
    """The command's output as a terminal ``columns`` wide shows it (escape codes removed)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(
        args,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
        env={**os.environ, **NO_AWS, **env, "COLUMNS": str(columns), "TERM": "xterm-256color"},
    )
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                raise AssertionError("no output from the command in a pseudo-terminal within 120 s")
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the command closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        proc.wait(timeout=120)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")[-3000:]
    return ANSI.sub("", b"".join(chunks).decode(errors="replace")).replace("\r\n", "\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pseudo-terminal geometry via termios (Linux)")
def test_plan_tables_fit_an_80_column_terminal(long_dir):
    request = long_dir / "run.json"
    request.write_text(
        json.dumps(
            {
                "lanes": ["provenance", "host_cpu"],
                "lane_config": {"host_cpu": {"tokenizer_path": str(long_dir / "tokenizer")}},
            }
        )
    )
    shown = _run_in_pty(
        [
            sys.executable,
            "-m",
            "control_plane.cli",
            "plan",
            "--input",
            str(request),
            "--history",
            str(long_dir / "no-history"),
        ],
        80,
        {},
    )
    table = [line for line in shown.splitlines() if line[:1] in ("┏", "┃", "┡", "│", "└")]
    assert len(table) >= 12, shown  # both tables are there (the plan's, the expected durations')
    assert max(cell_len(line) for line in table) <= 80, "\n".join(table)
