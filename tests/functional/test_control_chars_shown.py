"""A stored string's control characters are shown, never acted on: a box's error message carrying a terminal escape
(ESC, the 8-bit CSI U+009B, BEL) and a right-to-left override reaches REPORT.md, ``neuronpipe query`` (table, csv,
json), ``compare``'s cells and ``status`` as escapes (``\\x1b``, ``\\x9b``, ``\\u202e``), whatever prints it."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

from analytics.report.files import build_report_files
from analytics.report.format import fmt
from analytics.store import LocalStore
from control_plane.cli import main
from pipeline.printable import visible
from tests.support.synthetic import SyntheticRun, write_synthetic_run

HOSTILE = "boot failed \x1b[2J\x1b]0;owned\x07 \x9b31m red \u202eevil.txt\u202c done"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
RUN = "ctl-run"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("ctl") / "results"
    store = LocalStore(str(root))
    write_synthetic_run(
        store, SyntheticRun(run_id=RUN, concurrencies=(1,), requests_per_point=6, lanes=("provenance", "serve_sweep"))
    )
    w = store.begin_attempt(RUN, "qwen3_attempt")
    now = datetime.now(timezone.utc)
    w.add_rows(
        "lane_runs",
        [
            {
                "status": "failed",
                "supersedes": True,
                "started_at": now,
                "ended_at": now,
                "wall_s": 1.0,
                "backend": "neuron",
                "host": "box\x1b[1m",
                "box_role": "inf2",
                "instance_type": "inf2.xlarge",
                "profile": "tiny",
                "forced": False,
                "harness_sha": "0" * 40,
                "error_type": "ServerBootError",
                "error_message": HOSTILE,
            }
        ],
    )
    w.commit("failed")
    return str(root)


def test_visible_escapes_every_control_and_keeps_the_rest():
    assert visible(HOSTILE) == ("boot failed \\x1b[2J\\x1b]0;owned\\x07 \\x9b31m red \\u202eevil.txt\\u202c done")
    assert visible("tab\tand\nline, ünïcödé, 漢字") == "tab\tand\nline, ünïcödé, 漢字"
    assert visible(visible(HOSTILE)) == visible(HOSTILE)
    assert fmt("a\x1bb|c") == "a\\x1bb\\|c"


def test_report_md_shows_a_stored_error_as_escapes(results, tmp_path):
    build_report_files(results, [RUN], tmp_path)
    text = (tmp_path / "REPORT.md").read_text()
    assert "\\x1b[2J" in text and "\\u202eevil.txt" in text
    assert not RAW.search(text)


@pytest.mark.parametrize("fmt_", ["table", "csv", "json"])
def test_query_prints_a_stored_error_as_escapes(results, fmt_, capsys):
    sql = "select error_message, host from lane_runs where lane = 'qwen3_attempt'"
    assert main(["query", "--results", results, "--format", fmt_, sql]) == 0
    out = capsys.readouterr().out
    assert "x1b[2J" in out and "u202e" in out and "x9b31m" in out, out
    assert not RAW.search(out), repr(out)


def test_status_shows_a_lanes_error_and_the_runs_cause_as_escapes():
    from rich.console import Console

    from control_plane.commands.status import render_progress as render
    from control_plane.progress import LaneProgress, RunProgress

    progress = RunProgress(
        run_id=RUN,
        status="FAILED",
        error="Lane.Failed",
        cause=HOSTILE,
        lanes=[LaneProgress(box_role="inf2", lane="qwen3_attempt", status="failed", detail=HOSTILE)],
    )
    console = Console(width=400, color_system=None, force_terminal=False, record=True)
    console.print(render(progress))
    out = console.export_text()
    assert "\\x1b[2J" in out and "\\u202eevil" in out
    assert not RAW.search(out), repr(out)
