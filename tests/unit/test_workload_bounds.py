"""Every number a workload, a trace, a dataset or a capacity search takes is bounded where a larger one would run
for years or allocate without limit, and every file they read is a regular file under a cap: one line naming the
field (or the file and line), before anything is sent."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import pytest

from agents.loadgen.datasets import DatasetError, read_dataset
from agents.loadgen.traces import TraceError, read_trace
from pipeline.capacity import CapacitySpec, CapacitySpecError, Done, Measure, Verdict, next_step
from pipeline.workloads import Workload, WorkloadError, parse_workload
from tests.support.errors import one_line_error


@contextlib.contextmanager
def watchdog(seconds: int = 10):
    """Fails the test instead of hanging on a FIFO or a device read without end."""

    def fire(_signum, _frame):
        raise AssertionError(f"blocked for {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ---- workload numbers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, field",
    [
        ({"input": 10**15}, "workloads.w.input: at most 1,048,576"),
        ({"output": {"dist": "uniform", "low": 1, "high": 10**12}}, "workloads.w.output.high: at most 1,048,576"),
        ({"input": {"dist": "normal", "mean": 1e308, "stdev": 1}}, "workloads.w.input.mean: at most 1,048,576"),
        ({"input": {"dist": "lognormal", "mean": 50, "stdev": 1e300}}, "workloads.w.input.stdev: at most 1,048,576"),
        (
            {"input": {"dist": "empirical", "values": [5, 9], "weights": [1e308, 1e308]}},
            "workloads.w.input.weights[0]: at most 1e+09",
        ),
        ({"input": {"dist": "empirical", "values": [5] * 10_001}}, "workloads.w.input.values: at most 10,000 values"),
        ({"turns": 2, "think_time_s": 1e9}, "workloads.w.think_time_s: at most 3,600"),
        ({"turns": 10**9}, "workloads.w.turns: at most 1,000"),
        ({"input": 64, "prefix": {"tokens": 8, "groups": 10**12}}, "workloads.w.prefix.groups: at most 100,000"),
        ({"seed": 2**64}, "workloads.w.seed: at most 4,294,967,295"),
        ({"arrival": {"concurrency": [10**9]}}, "workloads.w.arrival.concurrency: at most 4,096"),
        ({"arrival": {"kind": "poisson", "rate": 1e9, "duration_s": 10}}, "workloads.w.arrival.rate: at most 100,000"),
        ({"arrival": {"kind": "poisson", "rate": 1e300}}, "workloads.w.arrival.rate: at most 100,000"),
        ({"arrival": {"kind": "gamma", "rate": 1, "burstiness": 1e9}}, "workloads.w.arrival.burstiness: at most 1,000"),
        (
            {"arrival": {"kind": "poisson", "rate": 1, "duration_s": 1e12}},
            "workloads.w.arrival.duration_s: at most 86,400",
        ),
        (
            {"arrival": {"kind": "poisson", "rate": 1e5, "duration_s": 3600}},
            "workloads.w.arrival: 360,000,000 arrivals (rate x duration_s) in one point; at most 1,000,000",
        ),
        (
            {"arrival": {"kind": "trace", "path": "t.jsonl", "time_scale": 1e300}},
            "workloads.w.arrival.time_scale: at most 1,000,000",
        ),
        (
            {"arrival": {"kind": "trace", "path": "t.jsonl", "limit": 10**12}},
            "workloads.w.arrival.limit: at most 1,000,000",
        ),
        (
            {"arrival": {"kind": "trace", "path": "t.jsonl", "block_tokens": 10**12}},
            "workloads.w.arrival.block_tokens: at most 1,048,576",
        ),
        (
            {"arrival": {"kind": "ramp", "from_rate": 1, "to_rate": 1e9, "over_s": 10}},
            "workloads.w.arrival.to_rate: at most 100,000",
        ),
        (
            {"arrival": {"kind": "ramp", "from_rate": 1, "to_rate": 2, "over_s": 1e12}},
            "workloads.w.arrival.over_s: at most 86,400",
        ),
        (
            {"arrival": {"kind": "ramp", "from_concurrency": 1, "to_concurrency": 10**9, "over_s": 10}},
            "workloads.w.arrival.to_concurrency: at most 4,096",
        ),
        (
            {"arrival": {"kind": "ramp", "from_rate": 1000, "to_rate": 1e5, "over_s": 86_400}},
            "workloads.w.arrival: 4,363,200,000 arrivals (the ramp's rate over its span) in one point; "
            "at most 1,000,000",
        ),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_a_number_that_would_run_for_years_or_allocate_without_limit_is_refused(spec, field):
    message = one_line_error(WorkloadError, lambda: parse_workload("w", spec))
    assert message.startswith(field), message


def test_the_bounds_themselves_are_accepted():
    parse_workload(
        "w",
        {
            "input": 1 << 20,
            "output": {"dist": "normal", "mean": 1 << 20, "stdev": 1 << 20},
            "seed": 2**32 - 1,
            "arrival": {"kind": "poisson", "rate": 1e5, "duration_s": 10},
        },
    )
    parse_workload("s", {"turns": 1000, "think_time_s": 3600, "arrival": {"concurrency": [4096]}})


def test_a_ramp_that_would_send_nothing_is_refused_saying_why():
    message = one_line_error(
        WorkloadError,
        lambda: parse_workload("w", {"arrival": {"kind": "ramp", "from_rate": 0.001, "to_rate": 0.002, "over_s": 10}}),
    )
    assert message.startswith(
        "workloads.w.arrival: the ramp expects 0.015 arrivals over its 10 s "
        "(from_rate 0.001 -> to_rate 0.002 over_s 10): nothing would be sent"
    ), message


def test_a_ramp_whose_schedule_holds_no_arrival_fails_before_sending_saying_why():
    from agents.loadgen.prompts import WhitespaceTokenizer
    from agents.loadgen.workload import plan_workload
    from pipeline.workloads import Arrival

    w = Workload("w", arrival=Arrival("ramp", from_rate=1e-4, to_rate=1e-4, over_s=1.0))  # past the parser's check
    message = one_line_error(
        WorkloadError,
        lambda: plan_workload(w, WhitespaceTokenizer(), 0, None, endpoint="completions", max_model_len=None),
    )
    assert message.startswith(
        "workloads.w.arrival: nothing to send: the ramp's schedule (seed 0) holds no arrival within its 1 s"
    ), message


# ---- traces -------------------------------------------------------------------------------------------------
def _trace(tmp_path: Path, *stamps: float, name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps({"timestamp": t, "input_length": 8, "output_length": 4}) + "\n" for t in stamps))
    return path


def test_a_trace_gap_that_would_sleep_for_years_names_its_line(tmp_path):
    message = one_line_error(TraceError, lambda: read_trace(_trace(tmp_path, 0, 1000, 1e15)))
    assert message.startswith(
        f"{tmp_path / 't.jsonl'}:3: timestamp 1e+15 is 1e+12 s after the first request "
        "(after time_scale): a replay spans at most 86,400 s"
    ), message


def test_a_time_scale_that_stretches_a_trace_past_a_day_is_refused(tmp_path):
    message = one_line_error(TraceError, lambda: read_trace(_trace(tmp_path, 0, 1000), time_scale=1e6))
    assert ":2: timestamp 1000 is 1e+06 s after the first request (after time_scale)" in message


def test_timestamps_at_the_ends_of_the_float_range_are_refused_not_overflowed(tmp_path):
    message = one_line_error(TraceError, lambda: read_trace(_trace(tmp_path, -1e308, 1e308)))
    assert message.startswith(f"{tmp_path / 't.jsonl'}:2: timestamp 1e+308 is inf s after the first request"), message


def test_a_directory_as_a_trace_is_named_a_directory(tmp_path):
    (tmp_path / "d.jsonl").mkdir()
    message = one_line_error(TraceError, lambda: read_trace(tmp_path / "d.jsonl"))
    assert "is a directory" in message and "no such file" not in message, message


def test_a_fifo_as_a_trace_is_not_a_regular_file_and_is_never_opened(tmp_path):
    os.mkfifo(tmp_path / "f.jsonl")
    with watchdog():
        message = one_line_error(TraceError, lambda: read_trace(tmp_path / "f.jsonl"))
    assert "named pipe (FIFO), not a regular file" in message and "no such file" not in message, message


def test_a_device_as_a_trace_is_refused_unread():
    with watchdog():
        message = one_line_error(TraceError, lambda: read_trace("/dev/zero"))
    assert "character device, not a regular file" in message, message


def test_a_trace_above_the_cap_is_refused_unread(tmp_path, monkeypatch):
    import agents.loadgen.traces as traces

    monkeypatch.setattr(traces, "TRACE_MAX_BYTES", 64)
    message = one_line_error(TraceError, lambda: read_trace(_trace(tmp_path, 0, 1, 2)))
    assert "over the cap of 64 bytes" in message, message


def test_a_csv_with_an_unterminated_quote_says_so_on_its_line(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text('Timestamp,Model,Request tokens,Response tokens\n1,m,10,20\n2,"gpt,10,20\n3,m,5,5\n')
    message = one_line_error(TraceError, lambda: read_trace(path))
    assert message == f"{path}:3: unterminated quote: the quoted field opened on this line never closes", message


# ---- datasets -----------------------------------------------------------------------------------------------
def test_a_device_as_a_dataset_is_refused_unread():
    with watchdog():
        message = one_line_error(DatasetError, lambda: read_dataset("/dev/zero", "jsonl"))
    assert "character device, not a regular file" in message, message


def test_a_fifo_as_a_dataset_is_refused_and_never_opened(tmp_path):
    os.mkfifo(tmp_path / "p.jsonl")
    with watchdog():
        message = one_line_error(DatasetError, lambda: read_dataset(str(tmp_path / "p.jsonl")))
    assert "named pipe (FIFO), not a regular file" in message, message


def test_a_dataset_above_the_cap_is_refused_unread(tmp_path, monkeypatch):
    import agents.loadgen.datasets as datasets

    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"prompt": "x" * 200}) + "\n")
    monkeypatch.setattr(datasets, "DATASET_MAX_BYTES", 64)
    message = one_line_error(DatasetError, lambda: read_dataset(str(path)))
    assert "over the cap of 64 bytes" in message, message


# ---- the capacity search ------------------------------------------------------------------------------------
def _spec(**kw) -> CapacitySpec:
    return CapacitySpec(**{**dict(ttft_ms=1000.0, tpot_ms=50.0, output_len=16, point_duration_s=10.0), **kw})


@pytest.mark.parametrize(
    "kw, start",
    [
        ({"rate_max": 1e9}, "--rate-max: at most 100,000 req/s"),
        ({"rate_min": 1e9, "rate_max": 1e9}, "--rate-min: at most 100,000 req/s"),
        ({"rate_min": 1e300}, "--rate-min: at most 100,000 req/s"),
        (
            {"rate_max": 1e5, "point_duration_s": 3600.0},
            "--rate-max 100000 x --point-duration 3600 s is 360,000,000 arrivals in one point; at most 1,000,000",
        ),
        ({"point_duration_s": 1e12}, "--point-duration: at most 86,400 s"),
        ({"max_search_s": 1e12}, "--max-search-s: at most 86,400 s"),
    ],
)
def test_a_search_that_would_allocate_without_limit_is_refused(kw, start):
    message = one_line_error(CapacitySpecError, lambda: _spec(**kw))
    assert message.startswith(start), message


def test_the_ladder_without_rate_max_stops_at_the_most_a_point_may_offer():
    s = _spec(point_duration_s=100.0)  # 1,000,000 arrivals a point: at most 10,000 req/s
    history = [Verdict(2.0**k, True) for k in range(14)] + [Verdict(10_000.0, True)]
    confirm = next_step(s, 1.0, history)  # the top is the answer: first its confirmation, within a point's arrivals
    assert isinstance(confirm, Measure) and confirm.phase == "confirm" and confirm.rate * confirm.duration_s <= 1e6
    step = next_step(s, 1.0, history + [Verdict(10_000.0, True, phase="confirm")])
    assert isinstance(step, Done) and step.found
    assert step.stop_reason.startswith("the SLO holds at 10000 req/s, the most a point of 100 s may offer"), step
    rates = [next_step(s, 1.0, [Verdict(2.0**k, True) for k in range(k_max)]).rate for k_max in (13, 14)]
    assert rates == [8192.0, 10_000.0]
