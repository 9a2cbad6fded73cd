"""REPORT.md's Workloads section reads comparison.json's dict and leaves it as written: the plots and REPORT.html
read the same dict afterwards, and REPORT.html embeds it as comparison.json."""
from __future__ import annotations

import copy

from analytics.report.workloads_md import s_workloads


def _comparison() -> dict:
    point = {"run_id": "r", "lane": "serve_sweep", "point_id": "p1", "workload": "chat", "mode": "closed",
             "max_concurrency": 2, "requests": 4, "failed": 0, "achieved_rate": 1.5}
    session = {"run_id": "r", "lane": "serve_sweep", "point_id": "p1", "sessions": 2, "mean_turns_sent": 2.0,
               "mean_turns_drawn": 2.5, "turns_ok": 4, "turns_sent": 4}
    return {"workloads": {"points": [point, {**point, "point_id": "p2"}], "sessions": [session]}}


def test_the_section_shows_sessions_and_leaves_the_comparison_as_written():
    comparison = _comparison()
    before = copy.deepcopy(comparison)
    text = "\n".join(s_workloads(comparison))
    assert "2 × 2.0 of 2.5 turns (4/4 ok)" in text
    assert comparison == before
