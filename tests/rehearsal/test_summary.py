"""The rehearsal's end-of-run summary over a hand-made history."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from rehearsal.summary import lane_intervals

T0 = datetime(2026, 7, 1, tzinfo=timezone.utc)


def _command(event_id: int, what: str, instance: str) -> list[dict]:
    params = {"Comment": f"neuronpipe {what} run-1", "InstanceIds": [instance]}
    return [
        {
            "id": event_id,
            "type": "TaskScheduled",
            "timestamp": T0 + timedelta(seconds=event_id),
            "taskScheduledEventDetails": {"resource": "sendCommand.waitForTaskToken", "parameters": json.dumps(params)},
        },
        {
            "id": event_id + 1,
            "previousEventId": event_id,
            "type": "TaskSucceeded",
            "timestamp": T0 + timedelta(seconds=event_id + 1),
            "taskSucceededEventDetails": {},
        },
    ]


def test_a_segment_s_own_commands_are_not_lanes():
    history = _command(1, "sync-harness", "i-1") + _command(3, "provenance", "i-1") + _command(5, "cache-push", "i-1")
    assert list(lane_intervals(history, {"i-1": "trn1"})) == ["trn1:provenance"]
