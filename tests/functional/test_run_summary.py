"""The headline summary printed after `neuronpipe run --local` applies the report's headline rule."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa

from analytics.store import LocalStore
from analytics.views import connect, view_files_through
from control_plane.summary import SUMMARY_VIEWS_THROUGH, summarize
from tests.support.synthetic import request_rows


def test_points_without_telemetry_are_not_headline_points(tmp_path):
    store = LocalStore(tmp_path)
    w = store.begin_attempt("r1", "serve_sweep")
    start = datetime(2026, 11, 1, tzinfo=timezone.utc)
    rng = np.random.default_rng(0)
    for i, pid in enumerate(("with-telemetry", "without-telemetry")):
        pstart = start + timedelta(seconds=100 * i)
        reqs, span = request_rows(rng, 8, 16, 8, 2, 0.0, pid, pstart, int(100e9 * i))
        w.add_rows("requests", reqs.append_column("server_config", pa.array(["A"] * 8)))
        w.add_rows(
            "sweep_points",
            [
                {
                    "point_id": pid,
                    "model": "m",
                    "server_config": "A",
                    "input_len": 16,
                    "output_len": 8,
                    "max_concurrency": 2,
                    "num_prompts": 8,
                    "window_start": pstart,
                    "window_end": pstart + timedelta(seconds=span),
                }
            ],
        )
        if i == 0:
            w.add_rows(
                "telemetry",
                [
                    {
                        "ts": pstart + timedelta(seconds=span / 2),
                        "source": "host",
                        "metric": "host_cpu_util_pct",
                        "value": 40.0,
                        "unit": "%",
                    }
                ],
            )
    w.commit("succeeded")
    # the CLI's closing summary creates only the view files it reads: the same tables, none of them failing
    full = summarize(connect(store), "r1")
    prefix = summarize(connect(store, view_files=view_files_through(SUMMARY_VIEWS_THROUGH)), "r1")
    assert [(t.title, t.columns, t.rows, t.error) for t in prefix] == [
        (t.title, t.columns, t.rows, t.error) for t in full
    ]
    assert all(t.error is None for t in prefix), [t.error for t in prefix]
    (serving,) = [t for t in full if t.title.startswith("Serving")]
    assert serving.error is None
    assert [row[serving.columns.index("conc")] for row in serving.rows] == [2]  # only the point with telemetry
    (excluded,) = [t for t in summarize(connect(store), "r1") if t.title == "Exclusions"]
    assert any("without-telemetry" in str(row) for row in excluded.rows)
