"""Every load point gets a telemetry sample inside its window, however short the point and however long the
sampler's interval: the sampler, told by the point's phase hook that the first measured request went out, takes
one extra sample then (agents.telemetry: point_phase), so the validity rule (rules 7 and 15) keeps the point."""

from __future__ import annotations

import time
from datetime import datetime, timezone

from agents.loadgen.point import run_point
from agents.telemetry import TelemetrySampler
from tests.functional.test_loadgen_synthetic import Server, point


class CountingSensor:
    name = "counting"

    def __init__(self) -> None:
        self.n = 0

    def sample(self) -> list[dict]:
        self.n += 1
        return [
            {"source": "counting", "metric": "n", "device": None, "value": float(self.n), "unit": None, "note": None}
        ]

    def close(self) -> None:
        return None


def _inside(rows: list[dict], sweep: dict) -> int:
    return sum(1 for r in rows if sweep["window_start"] <= r["ts"] <= sweep["window_end"])


def _as_utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def test_each_point_gets_a_sample_inside_its_window_with_an_hour_between_regular_samples():
    server = Server("--ttft-ms", "50", "--itl-ms", "10")
    sensor = CountingSensor()
    sampler = TelemetrySampler([sensor], interval_s=3600.0).start()
    try:
        for _ in range(3000):  # the regular schedule's first sample, then nothing for an hour
            if sensor.n:
                break
            time.sleep(0.01)
        assert sensor.n == 1
        results = [
            run_point(
                point(server.url, num_prompts=3, concurrency=1, warmup_requests=1), phase_hook=sampler.point_phase
            )
            for _ in range(2)
        ]
        plain = run_point(point(server.url, num_prompts=3, concurrency=1, warmup_requests=1))
    finally:
        rows = sampler.stop()
        server.stop()
    rows = [{**r, "ts": _as_utc(r["ts"])} for r in rows]
    for r in results:
        sweep = {k: _as_utc(r.sweep_point[k]) for k in ("window_start", "window_end")}
        assert _inside(rows, sweep) == 1  # exactly the point's own sample: the regular ones are an hour apart
    # without the hook the same point falls between the start sample and the closing one: no telemetry
    assert _inside(rows, {k: _as_utc(plain.sweep_point[k]) for k in ("window_start", "window_end")}) == 0
    # the start sample, one per hooked point (its measure_start and measure_end phases take none), the closing one
    assert len(rows) == 2 + len(results)
