"""`run --aws` and `rehearse` follow an execution through one function: on a pipe or a log the final table comes out
once (Live printed its last frame there too, and the caller printed it again), and --no-live gives a line per change."""

from __future__ import annotations

import io

from rich.console import Console

from control_plane.commands.status import follow_shown, render_progress
from control_plane.progress import LaneProgress, RunProgress


def _progress(status: str, lane_status: str) -> RunProgress:
    return RunProgress(
        run_id="r1",
        status=status,
        lanes=[LaneProgress("c01", "serve_sweep", lane_status)],
        outcome={"status": "succeeded"} if status == "SUCCEEDED" else None,
    )


def _follow(show):
    show(_progress("RUNNING", "running"))
    last = _progress("SUCCEEDED", "succeeded")
    show(last)
    return last


def test_the_live_view_leaves_the_final_table_to_the_caller_once():
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=100)
    final = follow_shown(console, _follow, live=True)
    console.print(render_progress(final))
    text = out.getvalue()
    assert final.status == "SUCCEEDED"
    assert text.count("run r1: SUCCEEDED") == 1 and "run r1: RUNNING" not in text
    assert text.count("outcome: succeeded") == 1


def test_without_live_each_change_is_one_line():
    out = io.StringIO()
    final = follow_shown(Console(file=out, force_terminal=False, width=100), _follow, live=False)
    assert final.status == "SUCCEEDED"
    assert out.getvalue().splitlines() == ["[RUNNING] c01:serve_sweep=running", "[SUCCEEDED] c01:serve_sweep=succeeded"]
