"""REPORT.md's Workloads section reads comparison.json's rows and leaves them as written: the plots and REPORT.html
read the same document afterwards, and REPORT.html embeds it as comparison.json."""

from __future__ import annotations

import copy

from analytics.report.workloads_md import s_workloads
from tests.support.comparison import document


def _comparison() -> dict:
    point = {
        "run_id": "r",
        "lane": "serve_sweep",
        "point_id": "p1",
        "workload": "chat",
        "mode": "closed",
        "max_concurrency": 2,
        "requests": 4,
        "failed": 0,
        "achieved_rate": 1.5,
    }
    session = {
        "run_id": "r",
        "lane": "serve_sweep",
        "point_id": "p1",
        "sessions": 2,
        "mean_turns_sent": 2.0,
        "mean_turns_drawn": 2.5,
        "turns_ok": 4,
        "turns_sent": 4,
    }
    return {"workloads": {"points": [point, {**point, "point_id": "p2"}], "sessions": [session]}}


def test_the_section_shows_sessions_and_leaves_the_comparison_as_written():
    comparison = document(_comparison())
    before = copy.deepcopy(comparison.as_written())
    text = "\n".join(s_workloads(comparison))
    assert "2 × 2.0 of 2.5 turns (4/4 ok)" in text
    assert comparison.as_written() == before
