"""agents.loadgen.traces: Mooncake, our JSONL and BurstGPT traces, time scaling, limits and every bad input."""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agents.loadgen.traces import Trace, TraceError, TraceRequest, read_trace
from tests.support.errors import one_line_error

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "workloads"
MOONCAKE = FIXTURES / "mooncake_small.jsonl"
BURSTGPT = FIXTURES / "burstgpt_small.csv"


def error_of(call: Callable[[], Any]) -> str:
    return one_line_error(TraceError, call)


def write(path: Path, lines: list[str] | bytes) -> Path:
    path.write_bytes(lines if isinstance(lines, bytes) else ("\n".join(lines) + "\n").encode("utf-8"))
    return path


def line(ts: float, inp: Any = 10, out: Any = 5, **extra: Any) -> str:
    return json.dumps({"timestamp": ts, "input_length": inp, "output_length": out, **extra})


# --- Mooncake and our JSONL ----------------------------------------------------------------------------------


def test_mooncake_fixture():
    records = [json.loads(x) for x in MOONCAKE.read_text().splitlines()]
    trace = read_trace(MOONCAKE)
    assert trace.format == "mooncake" and trace.path == str(MOONCAKE) and trace.skipped == 0
    assert trace.sha256 == hashlib.sha256(MOONCAKE.read_bytes()).hexdigest() == read_trace(MOONCAKE).sha256
    assert len(trace.requests) == 40 and trace.requests[0].t_s == 0.0
    t0 = records[0]["timestamp"]
    for req, rec in zip(trace.requests, records):
        assert req.t_s == pytest.approx((rec["timestamp"] - t0) / 1000)
        assert (req.input_length, req.output_length) == (rec["input_length"], rec["output_length"])
        assert req.hash_ids == tuple(rec["hash_ids"]) and req.prefix_group is None
    assert all(a.t_s <= b.t_s for a, b in zip(trace.requests, trace.requests[1:]))
    assert trace.duration_s() == pytest.approx((records[-1]["timestamp"] - t0) / 1000)
    assert 7 < trace.duration_s() <= 8
    assert trace.rate() == pytest.approx(39 / trace.duration_s())
    leading = [r.hash_ids[:2] for r in trace.requests if r.hash_ids and len(r.hash_ids) > 2]
    assert max(leading.count(p) for p in set(leading)) >= 3  # shared prefixes are there to be replayed


def test_time_scale_multiplies_every_gap():
    base = read_trace(MOONCAKE)
    slow = read_trace(MOONCAKE, time_scale=2.0)
    fast = read_trace(MOONCAKE, time_scale=0.5)
    assert [r.t_s for r in slow.requests] == pytest.approx([2 * r.t_s for r in base.requests])
    assert [r.t_s for r in fast.requests] == pytest.approx([0.5 * r.t_s for r in base.requests])
    assert slow.rate() == pytest.approx(base.rate() / 2) and slow.time_scale == 2.0
    assert [r.input_length for r in slow.requests] == [r.input_length for r in base.requests]


def test_limit_keeps_the_first_requests():
    base = read_trace(MOONCAKE)
    head = read_trace(MOONCAKE, limit=10)
    assert head.requests == base.requests[:10] and head.sha256 == base.sha256


def test_our_jsonl_in_seconds_with_prefix_groups(tmp_path: Path):
    path = write(
        tmp_path / "ours.jsonl",
        [line(5.0, prefix_group=1), "", line(5.5, prefix_group=2), line(7.0, 20, 8, prefix_group=1)],
    )
    trace = read_trace(path, timestamp_unit="s")
    assert trace.format == "jsonl"
    assert trace.requests == (
        TraceRequest(0.0, 10, 5, None, 1),
        TraceRequest(0.5, 10, 5, None, 2),
        TraceRequest(2.0, 20, 8, None, 1),
    )
    assert read_trace(path).requests[2].t_s == pytest.approx(0.002)  # default unit: ms, as Mooncake
    assert read_trace(write(tmp_path / "plain.jsonl", [line(0), line(1000)]), timestamp_unit="ms").format == "jsonl"


def test_equal_timestamps_are_fine_and_a_single_request_has_no_rate(tmp_path: Path):
    burst = read_trace(write(tmp_path / "burst.jsonl", [line(100), line(100), line(100)]))
    assert [r.t_s for r in burst.requests] == [0.0, 0.0, 0.0] and burst.duration_s() == 0.0
    assert "rate undefined" in error_of(burst.rate)
    one = read_trace(write(tmp_path / "one.jsonl", [line(3)]))
    assert one.duration_s() == 0.0 and len(one.requests) == 1


# --- BurstGPT ------------------------------------------------------------------------------------------------


def test_burstgpt_fixture_skips_failed_requests():
    with BURSTGPT.open(newline="") as f:
        rows = list(csv.DictReader(f))
    ok = [r for r in rows if r["Response tokens"] != "0"]
    trace = read_trace(BURSTGPT)
    assert trace.format == "burstgpt" and trace.skipped == 3 == len(rows) - len(ok)
    assert len(trace.requests) == 27
    t0 = float(ok[0]["Timestamp"])
    for req, row in zip(trace.requests, ok):
        assert req.t_s == pytest.approx(float(row["Timestamp"]) - t0)  # seconds
        assert (req.input_length, req.output_length) == (int(row["Request tokens"]), int(row["Response tokens"]))
        assert req.hash_ids is None and req.prefix_group is None
    assert trace.sha256 == hashlib.sha256(BURSTGPT.read_bytes()).hexdigest()
    assert read_trace(BURSTGPT, time_scale=3.0).duration_s() == pytest.approx(3 * trace.duration_s())


def test_burstgpt_detected_by_header_without_csv_extension(tmp_path: Path):
    path = write(tmp_path / "trace.txt", ["Timestamp,Request tokens,Response tokens", "1,10,3", "2,12,0", "4,8,2"])
    trace = read_trace(path)
    assert trace.format == "burstgpt" and trace.skipped == 1
    assert [(r.t_s, r.input_length) for r in trace.requests] == [(0.0, 10), (3.0, 8)]


def test_burstgpt_all_failed_is_an_empty_trace(tmp_path: Path):
    path = write(tmp_path / "failed.csv", ["Timestamp,Request tokens,Response tokens", "1,10,0", "2,12,0"])
    assert error_of(lambda: read_trace(path)) == (
        f"{path}: empty trace: no requests (2 rows with 0 response tokens skipped)"
    )


def test_burstgpt_errors(tmp_path: Path):
    path = write(tmp_path / "cols.csv", ["Timestamp,Model,Response tokens", "1,ChatGPT,4"])
    assert error_of(lambda: read_trace(path)) == (
        f"{path}:1: not a BurstGPT header: missing column Request tokens (found: Timestamp, Model, Response tokens)"
    )
    path = write(tmp_path / "frac.csv", ["Timestamp,Request tokens,Response tokens", "1,10,3", "", "2,10.5,3"])
    assert error_of(lambda: read_trace(path)) == f"{path}:4: Request tokens is '10.5', expected an integer"
    path = write(tmp_path / "short.csv", ["Timestamp,Request tokens,Response tokens", "1,10"])
    assert error_of(lambda: read_trace(path)) == f"{path}:2: missing field Response tokens"
    path = write(tmp_path / "back.csv", ["Timestamp,Request tokens,Response tokens", "5,10,3", "4,10,3"])
    assert error_of(lambda: read_trace(path)) == (
        f"{path}:3: timestamp 4 is before line 2's 5 (timestamps must not go backwards)"
    )
    path = write(tmp_path / "when.csv", ["Timestamp,Request tokens,Response tokens", "soon,10,3"])
    assert error_of(lambda: read_trace(path)) == f"{path}:2: Timestamp is 'soon', expected a finite number"
    assert "BurstGPT timestamps are in seconds" in error_of(lambda: read_trace(BURSTGPT, timestamp_unit="ms"))


# --- bad JSONL -----------------------------------------------------------------------------------------------


def test_timestamps_going_backwards_name_both_lines(tmp_path: Path):
    path = write(tmp_path / "t.jsonl", [line(0), line(1200), line(1100)])
    assert error_of(lambda: read_trace(path)) == (
        f"{path}:3: timestamp 1100 is before line 2's 1200 (timestamps must not go backwards)"
    )


@pytest.mark.parametrize(
    "inp, out, message",
    [
        (0, 5, "input_length is 0, must be > 0"),
        (10, -3, "output_length is -3, must be > 0"),
        (12.5, 5, "input_length is 12.5, expected an integer"),
        ("12", 5, "input_length is '12', expected an integer"),
        (True, 5, "input_length is True, expected an integer"),
    ],
)
def test_bad_lengths(tmp_path: Path, inp: Any, out: Any, message: str):
    path = write(tmp_path / "t.jsonl", [line(0), line(1, inp, out)])
    assert error_of(lambda: read_trace(path)) == f"{path}:2: {message}"


def test_missing_field(tmp_path: Path):
    path = write(tmp_path / "t.jsonl", [line(0), json.dumps({"timestamp": 1, "input_length": 3})])
    assert error_of(lambda: read_trace(path)) == (
        f"{path}:2: missing field output_length (found: timestamp, input_length)"
    )


def test_max_model_len(tmp_path: Path):
    path = write(tmp_path / "t.jsonl", [line(0, 100, 20), line(1, 100, 29), line(2, 100, 30)])
    assert len(read_trace(path, max_model_len=130, limit=2).requests) == 2
    assert error_of(lambda: read_trace(path, max_model_len=129)) == (
        f"{path}:3: input_length + output_length = 100 + 30 = 130 > max_model_len 129"
    )


def test_empty_traces(tmp_path: Path):
    for name, body in (("empty.jsonl", b""), ("blank.jsonl", b"\n \n")):
        path = write(tmp_path / name, body)
        assert error_of(lambda: read_trace(path)) == f"{path}: empty trace: the file is empty"  # noqa: B023 - called within this iteration
    path = write(tmp_path / "header.csv", ["Timestamp,Request tokens,Response tokens"])
    assert error_of(lambda: read_trace(path)) == f"{path}: empty trace: no requests"


@pytest.mark.parametrize("scale", [0, -1.0, float("nan"), float("inf")])
def test_time_scale_must_be_positive(scale: float):
    assert error_of(lambda: read_trace(MOONCAKE, time_scale=scale)).startswith(
        f"{MOONCAKE}: time_scale must be a finite number > 0, got "
    )


def test_other_bad_inputs(tmp_path: Path):
    path = write(tmp_path / "j.jsonl", [line(0), '{"timestamp": 1,'])
    assert error_of(lambda: read_trace(path)).startswith(f"{path}:2: invalid JSON: ")
    path = write(tmp_path / "u.jsonl", line(0).encode() + b"\n" + line(1).encode()[:-2] + b"\xfe}\n")
    assert error_of(lambda: read_trace(path)).startswith(f"{path}:2: not UTF-8")
    path = write(tmp_path / "h.jsonl", [line(0, hash_ids=[1, "two"])])
    assert error_of(lambda: read_trace(path)) == f"{path}:1: hash_ids is [1, 'two'], expected a list of integers"
    path = write(tmp_path / "g.jsonl", [line(0, prefix_group="a")])
    assert error_of(lambda: read_trace(path)) == f"{path}:1: prefix_group is 'a', expected an integer"
    path = write(tmp_path / "l.jsonl", ["[1, 2]"])
    assert error_of(lambda: read_trace(path)) == f"{path}:1: expected a JSON object, got list"
    path = write(tmp_path / "ts.jsonl", [line("noon")])
    assert error_of(lambda: read_trace(path)) == f"{path}:1: timestamp is 'noon', expected a finite number"
    path = write(tmp_path / "what.log", ["some text"])
    assert "cannot tell the trace format" in error_of(lambda: read_trace(path))
    absent = tmp_path / "absent.jsonl"
    assert error_of(lambda: read_trace(absent)) == f"{absent}: no such file"
    assert "unknown timestamp_unit 'us'" in error_of(lambda: read_trace(MOONCAKE, timestamp_unit="us"))
    assert "limit must be an integer >= 1" in error_of(lambda: read_trace(MOONCAKE, limit=0))


def test_trace_is_a_plain_value():
    trace = read_trace(MOONCAKE, limit=3)
    assert isinstance(trace, Trace) and isinstance(trace.requests, tuple)
    with pytest.raises(AttributeError):
        trace.requests[0].t_s = 1.0
