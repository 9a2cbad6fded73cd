"""REPORT.md's PNGs take REPORT.html's axis conventions: concurrency on a log2 axis with integer ticks at the powers
of two (never 1.5 or 2.5), throughput from 0, and open-loop points (an offered rate) off the concurrency axis."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from analytics.report.plots import _headline_points, concurrency_axis, from_zero
from tests.support.comparison import document


def test_concurrency_is_log2_with_integer_ticks_and_throughput_starts_at_zero():
    fig, ax = plt.subplots()
    try:
        ax.plot([1, 2, 4, 8, 12], [40.0, 75.0, 120.0, 150.0, 155.0], "-o")
        concurrency_axis(ax, [1, 2, 4, 8, 12])
        from_zero(ax)
        fig.canvas.draw()
        assert ax.get_xscale() == "log"
        assert list(ax.get_xticks()) == [1, 2, 4, 8, 16]
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4", "8", "16"]
        assert ax.get_ylim()[0] == 0 and ax.xaxis.get_minor_locator().tick_values(1, 16) == []
    finally:
        plt.close(fig)


def test_open_loop_points_stay_off_the_concurrency_axis():
    base = {"telemetry_samples": 4, "valid": True, "max_concurrency": 4}
    c = {
        "serving": {
            "points": [
                dict(base, point_id="closed", request_rate=None),
                dict(base, point_id="open", request_rate=2.0),
                dict(base, point_id="sus", request_rate=None, mode="sustained"),
            ]
        }
    }
    assert [p["point_id"] for p in _headline_points(document(c))] == ["closed"]
