"""The history rule (control_plane.lane_history): the median of the last 5 matching attempts, its spread, the
fallbacks in their order, and what does not count."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from control_plane.lane_history import HISTORY_LAST_N, LaneKey, attempts, history_estimate
from control_plane.timetable import expected_duration, history_durations, hms
from pipeline.servers import resolve_server_configs

T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
IT = "inf2.xlarge"
MODELS = ("llama-3.1-8b-instruct",)


def _fp(spec, backend="neuron"):
    return tuple(sorted({c.fingerprint() for c in resolve_server_configs(spec, "full", backend, check=False)}))


def _row(wall, minute, *, it=IT, configs=("A",), status="succeeded", lane="serve_sweep@c01", config=True, **kw):
    started = T0 + timedelta(minutes=minute)
    cfg = {"models": list(MODELS), "server_configs": list(configs)} if config else None
    return {
        "lane": lane,
        "status": status,
        "supersedes": True,
        "wall_s": wall,
        "profile": "full",
        "backend": "neuron",
        "instance_type": it,
        "started_at": started,
        "ended_at": started + timedelta(seconds=1),  # the order is by when it ended
        "config_json": json.dumps(cfg) if cfg else None,
        **kw,
    }


def _key(it=IT, configs=("A",)):
    return LaneKey("serve_sweep", "full", it, MODELS, _fp(list(configs)))


def test_the_median_of_the_last_five_by_time_with_its_spread():
    # seven attempts, given out of order: the two oldest (1000 s, 9000 s) do not count
    walls = {0: 1000.0, 10: 9000.0, 20: 100.0, 30: 300.0, 40: 200.0, 50: 500.0, 60: 400.0}
    rows = [_row(w, m) for m, w in sorted(walls.items(), reverse=True)]
    est = history_estimate(_key(), history_durations(rows))
    assert HISTORY_LAST_N == 5
    assert (est.seconds, est.n, est.low_s, est.high_s) == (300.0, 5, 100.0, 500.0)
    assert est.rule == "same lane/model/config/instance type"
    assert est.source(hms) == "history: median of n=5 (0:01:40–0:08:20), same lane/model/config/instance type"


def test_the_order_is_ended_at_then_started_at():
    rows = [_row(float(w), 0) for w in (10, 20, 30, 40, 50)]
    late = _row(1000.0, 0)
    late["ended_at"] = T0 - timedelta(days=1)  # ended before every other: the oldest, left out
    est = history_estimate(_key(), attempts([late, *rows, _row(60.0, 0)]))
    assert (est.n, est.low_s, est.high_s, est.seconds) == (5, 20.0, 60.0, 40.0)


def test_another_fingerprint_or_instance_type_does_not_count_in_the_first_rule():
    rows = [_row(100.0, 0), _row(900.0, 1, configs=("B",)), _row(700.0, 2, it="inf2.8xlarge")]
    est = history_estimate(_key(), attempts(rows))
    assert (est.seconds, est.n, est.rule) == (100.0, 1, "same lane/model/config/instance type")
    # B's fingerprint is another: its own attempt alone predicts B
    assert history_estimate(_key(configs=("B",)), attempts(rows)).seconds == 900.0


def test_the_fallbacks_in_their_order():
    # rows whose config does not say: same lane on the same type first
    rows = [_row(100.0, 0, config=False), _row(300.0, 1, config=False), _row(700.0, 2, it="g6.xlarge")]
    est = history_estimate(_key(), attempts(rows))
    assert (est.seconds, est.n, est.rule) == (200.0, 2, "same lane/instance type")
    # nothing on this type: the same lane on any host
    est = history_estimate(_key(it="g5.xlarge"), attempts(rows))
    assert (est.seconds, est.n) == (300.0, 3) and est.rule == "same lane, any host (g6.xlarge, inf2.xlarge)"
    # another lane, another profile, a failed or a skipped attempt: no history, the default
    other = [
        _row(5.0, 0, lane="capacity"),
        _row(5.0, 0, profile="tiny"),
        _row(5.0, 0, status="failed"),
        _row(5.0, 0, supersedes=False),
    ]
    assert history_estimate(_key(), attempts(other)) is None
    e = expected_duration("serve_sweep", "full", IT, attempts(other), default=(42.0, "anchor (family neuron): x"))
    assert (e.seconds, e.source) == (42.0, "default: anchor (family neuron): x")
