"""Workloads (issue 27): the spec's checks (one line per refusal), each distribution's draws, the request plan
(exact lengths, shared prefixes, sessions, trace blocks, ramps), the plan-time refusals, the rows and the views."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import duckdb
import numpy as np
import pytest

from agents.loadgen.prompts import WhitespaceTokenizer
from agents.loadgen.workload import conversation, draw, plan_workload, ramp_schedule, stream_starts
from pipeline.workloads import WorkloadError, check_workloads, describe, fit_problems, lane_workload, parse_workload

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "workloads"


@pytest.mark.parametrize(
    "spec, line",
    [
        ({"inputs": 3}, "workloads.w.inputs: unknown field; a workload takes input, output, prompts"),
        ({"input": 0}, "workloads.w.input: an integer >= 1, got 0"),
        ({"input": 2.5}, "workloads.w.input: an integer >= 1, got 2.5"),
        ({"input": {"dist": "zipf"}}, "workloads.w.input.dist: one of exact, normal, uniform, lognormal, empirical"),
        ({"input": {"dist": "normal", "mean": 10}}, "workloads.w.input.stdev: a normal length needs mean and stdev"),
        ({"input": {"dist": "normal", "mean": -5, "stdev": 1}}, "workloads.w.input.mean: a number > 0, got -5"),
        ({"input": {"dist": "normal", "mean": 5, "stdev": -1}}, "workloads.w.input.stdev: a number >= 0, got -1"),
        ({"input": {"dist": "uniform", "low": 9, "high": 3}}, "workloads.w.input: empty support: low 9 > high 3"),
        ({"input": {"dist": "uniform", "low": 1, "high": 3, "mean": 2}}, "workloads.w.input.mean: unknown field"),
        ({"input": {"dist": "lognormal", "mean": 50, "stdev": 0}}, "workloads.w.input.stdev: a lognormal length needs"),
        ({"input": {"dist": "empirical", "values": []}}, "workloads.w.input.values: a non-empty list of lengths"),
        (
            {"input": {"dist": "empirical", "values": [5, 9], "weights": [1]}},
            "workloads.w.input.weights: one weight per",
        ),
        ({"input": {"dist": "empirical", "values": [500], "high": 100}}, "workloads.w.input.values: empty support"),
        (
            {"output": {"dist": "normal", "mean": 8, "stdev": 2, "low": 9, "high": 4}},
            "workloads.w.output: empty support",
        ),
        ({"prompts": {"source": "csv"}}, "workloads.w.prompts.source: one of random, instructions, sharegpt, jsonl"),
        ({"prompts": {"source": "jsonl"}}, "workloads.w.prompts.path: source jsonl reads a file"),
        ({"prompts": {"source": "random", "path": "x"}}, "workloads.w.prompts.path: source random reads no file"),
        (
            {"prompts": {"source": "jsonl", "path": "x", "split": "train"}},
            "workloads.w.prompts.split: a split name, for",
        ),
        ({"prefix": {"groups": 2}}, "workloads.w.prefix.tokens: the shared prefix's length in tokens"),
        ({"input": 32, "prefix": {"tokens": 32}}, "workloads.w.prefix.tokens: 32 leaves no room for a request's own"),
        ({"turns": 0}, "workloads.w.turns: an integer >= 1, got 0"),
        ({"turns": 2, "prefix": {"tokens": 8}}, "workloads.w.prefix: a multi-turn session shares its own history"),
        ({"turns": 2, "arrival": {"kind": "trace", "path": "t.jsonl"}}, "workloads.w.turns: a trace replays single"),
        ({"think_time_s": -1}, "workloads.w.think_time_s: a number >= 0, got -1"),
        ({"arrival": {"kind": "burst"}}, "workloads.w.arrival.kind: one of closed, poisson, gamma, trace, ramp"),
        ({"arrival": {"kind": "poisson"}}, "workloads.w.arrival.rate: a poisson arrival needs a rate"),
        ({"arrival": {"kind": "poisson", "rate": 0}}, "workloads.w.arrival.rate: a number > 0, got 0"),
        (
            {"arrival": {"kind": "poisson", "rate": 1, "concurrency": 2}},
            "workloads.w.arrival.concurrency: unknown field",
        ),
        ({"arrival": {"kind": "closed", "concurrency": [2, 0]}}, "workloads.w.arrival.concurrency: an integer >= 1"),
        ({"arrival": {"kind": "trace"}}, "workloads.w.arrival.path: a trace arrival replays a file"),
        ({"arrival": {"kind": "trace", "path": "t", "time_scale": 0}}, "workloads.w.arrival.time_scale: a number > 0"),
        ({"arrival": {"kind": "trace", "path": "t", "timestamp_unit": "us"}}, "workloads.w.arrival.timestamp_unit: ms"),
        ({"arrival": {"kind": "ramp", "from_rate": 1, "over_s": 5}}, "workloads.w.arrival: a ramp is from_rate and"),
        ({"arrival": {"kind": "ramp", "from_rate": 1, "to_rate": 2}}, "workloads.w.arrival.over_s: a ramp needs"),
        (
            {"arrival": {"kind": "ramp", "from_concurrency": 4, "to_concurrency": 2, "over_s": 5}},
            "workloads.w.arrival.to_concurrency: a ramp rises: 2 < from_concurrency 4",
        ),
        ({"configs": []}, "workloads.w.configs: a non-empty list of server config names"),
        ({"seed": -1}, "workloads.w.seed: an integer >= 0, got -1"),
    ],
)
def test_every_bad_field_is_one_line_naming_it(spec, line):
    with pytest.raises(WorkloadError) as err:
        parse_workload("w", spec)
    assert str(err.value).startswith(line) and "\n" not in str(err.value)


def test_names_and_shapes_of_the_map():
    with pytest.raises(WorkloadError, match=r"^workloads.9: a workload name is a letter"):
        check_workloads({"9": {}})
    with pytest.raises(WorkloadError, match=r"^workloads: a map NAME -> workload, got list"):
        check_workloads([{"input": 3}])
    assert check_workloads(None) == []


def test_bounds_beyond_max_model_len_are_refused_for_the_config():
    w = parse_workload("w", {"input": {"dist": "uniform", "low": 8, "high": 200}, "output": 64})
    assert fit_problems(w, "A", 256) == [
        "workloads.w.input: the longest request (200 input + 64 output tokens) "
        "exceeds max_model_len 256 of server config A"
    ]
    assert fit_problems(w, "B", 1024) == []
    unbounded = parse_workload("u", {"input": {"dist": "normal", "mean": 300, "stdev": 10, "low": 250}, "output": 8})
    assert fit_problems(unbounded, "A", 256) == [
        "workloads.u.input: the shortest request (250 + 8 tokens) exceeds max_model_len 256 of server config A"
    ]


@pytest.mark.parametrize(
    "spec, mean, stdev",
    [
        ({"dist": "normal", "mean": 200, "stdev": 40}, 200, 40),
        ({"dist": "uniform", "low": 10, "high": 90}, 50, ((81**2 - 1) / 12) ** 0.5),
        ({"dist": "lognormal", "mean": 300, "stdev": 150}, 300, 150),
        ({"dist": "empirical", "values": [10, 20, 80], "weights": [1, 2, 1]}, 32.5, None),
    ],
)
def test_each_distribution_draws_its_mean_and_spread_seeded(spec, mean, stdev):
    from pipeline.workloads import parse_lengths

    lengths = parse_lengths("w.input", spec)
    xs = np.asarray(draw(lengths, 20_000, np.random.default_rng(3)))
    assert abs(xs.mean() - mean) / mean < 0.03
    if stdev is not None:
        assert abs(xs.std() - stdev) / stdev < 0.06
    assert draw(lengths, 50, np.random.default_rng(3)) == draw(lengths, 50, np.random.default_rng(3))
    assert lengths.nominal == round(mean)


def test_draws_are_clipped_to_the_bounds_and_the_cap():
    from pipeline.workloads import parse_lengths

    lengths = parse_lengths("w.input", {"dist": "normal", "mean": 100, "stdev": 80, "low": 20, "high": 150})
    xs = draw(lengths, 5_000, np.random.default_rng(0), cap=120)
    assert min(xs) == 20 and max(xs) == 120
    assert draw(parse_lengths("w.input", 64), 3, np.random.default_rng(0)) == [64, 64, 64]


def test_single_requests_are_built_to_their_drawn_lengths():
    w = parse_workload(
        "w", {"input": {"dist": "uniform", "low": 5, "high": 40}, "output": {"dist": "empirical", "values": [3, 9]}}
    )
    tok = WhitespaceTokenizer()
    plan = plan_workload(w, tok, 2, 30, endpoint="completions", max_model_len=64)
    assert len(plan.prompts) == len(plan.metas) == 32 and plan.warmup == 2
    assert [len(tok.encode(p.text, True)) for p in plan.prompts] == [m.input_len for m in plan.metas]
    assert {m.output_len for m in plan.metas} == {3, 9} and len({m.input_len for m in plan.metas}) > 10
    stats = plan.stats()
    assert stats["input_len"]["n"] == 30 and 5 <= stats["input_len"]["min"] <= stats["input_len"]["max"] <= 40


def test_shared_prefixes_are_the_same_token_ids_in_every_request_of_a_group(shared_cache):
    from agents.loadgen.prompts import load_tokenizer

    tok = load_tokenizer(None, "vllm", shared_cache)
    w = parse_workload("w", {"input": 48, "output": 4, "prefix": {"tokens": 32, "groups": 3}, "seed": 1})
    plan = plan_workload(w, tok, 0, 24, endpoint="completions", max_model_len=256)
    by_group: dict[int, set[tuple[int, ...]]] = {}
    for p, m in zip(plan.prompts, plan.metas):
        ids = tok.encode(p.text, True)
        assert len(ids) == 48
        by_group.setdefault(m.prefix_group, set()).add(tuple(ids[:33]))  # BOS + the 32 prefix tokens
    assert set(by_group) == {0, 1, 2} and all(len(v) == 1 for v in by_group.values())
    assert len({next(iter(v)) for v in by_group.values()}) == 3  # three different prefixes
    suffixes = {tuple(tok.encode(p.text, True)[33:]) for p in plan.prompts}
    assert len(suffixes) == 24  # every request's own suffix


def test_a_session_is_the_conversation_so_far():
    w = parse_workload("w", {"input": 6, "output": 3, "turns": {"dist": "uniform", "low": 2, "high": 4}})
    plan = plan_workload(w, WhitespaceTokenizer(), 2, 5, endpoint="chat", max_model_len=512)
    assert len(plan.sessions) == 5 and [len(s.user_texts) for s in plan.warmup_sessions] == [1, 1]
    assert {len(s.user_texts) for s in plan.sessions} <= {2, 3, 4}
    s = max(plan.sessions, key=lambda x: len(x.user_texts))
    assert len(s.user_texts) >= 3 and all(len(t.split()) == 6 for t in s.user_texts)
    msgs = conversation(s.user_texts, ["a b c", "d e f"], 2)
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
    assert msgs[1]["content"] == "a b c" and msgs[-1]["content"] == s.user_texts[2]
    assert WhitespaceTokenizer().conversation_count(msgs) == 6 * 3 + 3 * 2


def test_sessions_from_a_dataset_keep_its_turns_in_order():
    w = parse_workload(
        "w",
        {
            "input": 40,
            "output": 3,
            "turns": 2,
            "prompts": {"source": "sharegpt", "path": str(FIXTURES / "chat.sharegpt.json")},
        },
    )
    plan = plan_workload(w, WhitespaceTokenizer(), 0, 6, endpoint="chat", max_model_len=512)
    assert all(len(t.split()) == 40 for s in plan.sessions for t in s.user_texts)


@pytest.mark.parametrize("tokenizer", ["whitespace", "tiny"])
def test_a_trace_replays_its_timestamps_lengths_and_shared_blocks(tokenizer, shared_cache):
    from agents.loadgen.prompts import load_tokenizer
    from agents.loadgen.traces import read_trace

    tok = WhitespaceTokenizer() if tokenizer == "whitespace" else load_tokenizer(None, "vllm", shared_cache)
    path = FIXTURES / "mooncake_small.jsonl"
    w = parse_workload("t", {"arrival": {"kind": "trace", "path": str(path), "time_scale": 0.5, "block_tokens": 8}})
    trace = read_trace(path, time_scale=0.5)
    plan = plan_workload(w, tok, 1, None, endpoint="completions", max_model_len=8192)
    assert plan.offsets_s == [r.t_s for r in trace.requests] and plan.trace_sha256 == trace.sha256
    measured = plan.metas[1:]
    assert [(m.input_len, m.output_len) for m in measured] == [
        (r.input_length, r.output_length) for r in trace.requests
    ]
    first_blocks = {}
    for p, r in zip(plan.prompts[1:], trace.requests):
        ids = tok.encode(p.text, True)
        assert len(ids) == r.input_length
        if r.hash_ids:
            special = len(tok.encode("", True))
            first_blocks.setdefault(r.hash_ids[0], set()).add(tuple(ids[: special + 8]))
    assert first_blocks and all(len(v) == 1 for v in first_blocks.values())  # a shared block: the same tokens
    assert any(c > 1 for c in Counter(r.hash_ids[0] for r in trace.requests if r.hash_ids).values())


def test_a_rate_ramp_rises_and_a_stream_ramp_adds_streams():
    offsets = ramp_schedule(1.0, 20.0, 10.0, 12.0, np.random.default_rng(0))
    assert offsets == sorted(offsets) and offsets[-1] < 12.0
    first, last = sum(o < 3 for o in offsets), sum(7 <= o < 10 for o in offsets)
    assert last > 3 * first  # expected about 7.4 vs 49.5
    assert len(ramp_schedule(1.0, 20.0, 10.0, 12.0, np.random.default_rng(0), n=5)) == 5
    assert stream_starts(1, 4, 6.0) == [0.0, 2.0, 4.0, 6.0]


def test_lanes_with_a_loop_of_their_own_take_one_single_request_workload():
    assert lane_workload({"w": {"input": 16}}, "sustained").arrival.kind == "closed"
    with pytest.raises(WorkloadError, match=r"^workloads.w.turns: capacity measures single requests"):
        lane_workload({"w": {"turns": 2}}, "capacity")
    with pytest.raises(WorkloadError, match=r"^workloads.w.arrival: a trace has its own schedule; sustained"):
        lane_workload({"w": {"arrival": {"kind": "trace", "path": "t"}}}, "sustained")
    with pytest.raises(WorkloadError, match=r"^workload: sustained runs one workload, got 2"):
        lane_workload({"a": {}, "b": {}}, "sustained")


def test_describe_says_what_a_workload_is():
    w = parse_workload(
        "w",
        {
            "input": {"dist": "normal", "mean": 48, "stdev": 16, "low": 8, "high": 160},
            "output": {"dist": "uniform", "low": 16, "high": 48},
            "turns": 3,
            "think_time_s": 1,
            "arrival": {"kind": "poisson", "rate": 2},
        },
    )
    assert describe(w) == "normal(48,16)∈[8,160]:U[16,48]; random; 3 turns, 1 s think; poisson 2/s"


def _plan_error(request: dict) -> str:
    from control_plane.lane_configs import LaneConfigInvalidError
    from control_plane.models import RunRequest
    from control_plane.request_configs import configured_lanes

    with pytest.raises((LaneConfigInvalidError, ValueError)) as err:
        configured_lanes(RunRequest.model_validate(request))
    return str(err.value)


def test_the_plan_refuses_what_a_lane_cannot_run():
    base = {"profile": "tiny", "lanes": ["serve_sweep"]}
    big = {"w": {"input": {"dist": "uniform", "low": 8, "high": 300}, "output": 16}}
    assert _plan_error({**base, "workloads": big, "lane_config": {"serve_sweep": {"server_configs": ["A"]}}}) == (
        "serve_sweep: workloads.w.input: the longest request (300 input + 16 output tokens) exceeds max_model_len 256 "
        "of server config A"
    )
    text = _plan_error({**base, "workloads": {"w": {"input": 16, "configs": ["Z"]}}})
    assert text == "serve_sweep: workloads.w.configs: 'Z' is not a server config of this lane (A, A-copy, A-int8, B)"
    picks = {"serve_sweep": {"workloads": ["x"]}}
    text = _plan_error({**base, "workloads": {"w": {"input": 16}}, "lane_config": picks})
    assert (
        text == "serve_sweep: workloads: 'x' is not declared; declared workloads: w (declare it in the run "
        "request's workloads)"
    )
    text = _plan_error(
        {
            "profile": "tiny",
            "lanes": ["sustained"],
            "workloads": {"m": {"turns": 2}},
            "lane_config": {"sustained": {"workload": "m"}},
        }
    )
    assert "workloads.m.turns: sustained measures single requests" in text
    with pytest.raises(ValueError, match="workloads.w.input.dist"):
        from control_plane.models import RunRequest

        RunRequest.model_validate({**base, "workloads": {"w": {"input": {"dist": "zipf"}}}})


def test_a_request_row_carries_its_workload_columns_and_the_reply_text():
    from types import SimpleNamespace

    from agents.loadgen.records import ClockAnchor, RawRequest, reply_text, request_row
    from agents.loadgen.workload import RequestMeta

    events = [
        (1_000, b'data: {"choices":[{"text":"Hello"}]}'),
        (2_000, b'data: {"choices":[{"text":" there","finish_reason":"length"}]}'),
    ]
    ex = SimpleNamespace(t_sent=500, t_done=2_500, status=200, error=None, events=events, done_marker=True)
    assert reply_text(ex) == "Hello there"
    assert reply_text(SimpleNamespace(**{**ex.__dict__, "status": 500})) is None
    row = request_row(
        RawRequest(3, "p-3", False, 7, 400, ex),
        point_id="p",
        model="m",
        server_config="A",
        endpoint="/v1/chat/completions",
        input_len=99,
        output_len=99,
        anchor=ClockAnchor.now(),
        tokenizer=None,
        meta=RequestMeta(7, 2, session_id="s1", turn_index=1, session_turns=3),
    )
    assert (
        row["input_len"],
        row["output_len"],
        row["session_id"],
        row["turn_index"],
        row["session_turns"],
        row["prefix_group"],
    ) == (7, 2, "s1", 1, 3, None)


def _views(con: duckdb.DuckDBPyConnection) -> None:
    from analytics.views import derived_sql_files

    (sql,) = [text for name, text in derived_sql_files() if name == "14_serving_workloads.sql"]
    con.execute(sql)


def test_the_workload_views_slice_a_point_by_bucket_turn_and_session():
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE request_metrics (run_id VARCHAR, lane VARCHAR, point_id VARCHAR, success BOOLEAN, "
        "client_queue_ms DOUBLE, t_sent_ns BIGINT, t_done_ns BIGINT, t_scheduled_ns BIGINT, ttft_ms DOUBLE, "
        "tpot_ms DOUBLE, e2el_ms DOUBLE, input_len INT, session_id VARCHAR, turn_index INT, "
        "session_turns INT, prefix_group BIGINT)"
    )
    con.execute(
        "CREATE TABLE sweep_points (run_id VARCHAR, lane VARCHAR, point_id VARCHAR, model VARCHAR, "
        "server_config VARCHAR, workload VARCHAR, arrival VARCHAR, mode VARCHAR, input_len INT, "
        "output_len INT, max_concurrency INT, request_rate DOUBLE, client_lag_bound_ms DOUBLE, "
        "prefix_cache_queries BIGINT, prefix_cache_hits BIGINT, prefix_cache_note VARCHAR, "
        "workload_json VARCHAR, repeat_index INT)"
    )
    con.execute(
        "INSERT INTO sweep_points VALUES ('r', 'l', 'p', 'm', 'A', 'chat', 'closed', 'closed', 24, 8, 2, "
        "NULL, 50, 1000, 250, NULL, '{}', NULL), ('r', 'l', 'q', 'm', 'A', NULL, NULL, 'closed', 16, 8, 2, "
        "NULL, 50, NULL, NULL, NULL, NULL, NULL)"
    )
    rows = [
        ("s0", 0, 3, 30, 10.0),
        ("s0", 1, 3, 70, 12.0),
        ("s0", 2, 3, 130, 15.0),
        ("s1", 0, 2, 30, 11.0),
        ("s1", 1, 2, 68, 13.0),
    ]
    for i, (sid, turn, turns, n, ttft) in enumerate(rows):
        con.execute(
            "INSERT INTO request_metrics VALUES ('r', 'l', 'p', true, ?, ?, ?, ?, ?, 2.0, 40.0, ?, ?, ?, ?, NULL)",
            [0.5 + i, i * 10**9, i * 10**9 + 5 * 10**8, i * 10**9, ttft, n, sid, turn, turns],
        )
    con.execute(
        "INSERT INTO request_metrics VALUES ('r', 'l', 'q', true, 1, 0, 1, 0, 5, 1, 9, 16, NULL, NULL, NULL, NULL)"
    )
    _views(con)
    (p,) = con.execute(
        "SELECT workload, requests, sessions, max_turns, prefix_cache_hit_rate, send_lag_ok FROM workload_points"
    ).fetchall()
    assert p == ("chat", 5, 2, 3, 0.25, True)
    buckets = con.execute("SELECT bucket_lo, bucket_hi, requests FROM workload_length_buckets ORDER BY 1").fetchall()
    assert buckets == [(16, 32, 2), (64, 128, 2), (128, 256, 1)]
    turns = con.execute(
        "SELECT turn_index, requests, mean_input_len, p50_ttft_ms FROM workload_turns ORDER BY 1"
    ).fetchall()
    assert turns == [(0, 2, 30.0, 10.5), (1, 2, 69.0, 12.5), (2, 1, 130.0, 15.0)]
    sessions = con.execute(
        "SELECT session_id, turns_drawn, turns_sent, turns_ok, wall_s FROM workload_sessions ORDER BY 1"
    ).fetchall()
    assert sessions == [("s0", 3, 3, 3, 2.5), ("s1", 2, 2, 2, 1.5)]


def test_the_vllm_json_carries_the_workload_under_its_own_keys():
    from types import SimpleNamespace

    from agents.loadgen.vllm_json import vllm_result

    sp = {
        "model": "m",
        "workload": "w",
        "workload_json": json.dumps({"name": "w", "spec": {"input": 8}}),
        "prefix_cache_queries": 100,
        "prefix_cache_hits": 40,
    }
    out = vllm_result(SimpleNamespace(metrics={}, sweep_point=sp, requests=[], texts={}))
    assert out["neuronpipe_workload"] == {"name": "w", "spec": {"input": 8}}
    assert out["neuronpipe_prefix_cache"] == {"queries": 100, "hits": 40}
    plain = vllm_result(SimpleNamespace(metrics={}, sweep_point={"model": "m"}, requests=[], texts={}))
    assert not any(k.startswith("neuronpipe_") for k in plain)


def test_a_file_with_too_few_prompts_is_refused_unless_they_may_repeat(tmp_path):
    from agents.loadgen.datasets import DatasetError
    from agents.loadgen.workload import preflight

    path = FIXTURES / "prompts.jsonl"  # 20 prompts
    w = parse_workload("w", {"input": 12, "output": 2, "prompts": {"source": "jsonl", "path": str(path)}})
    with pytest.raises(DatasetError, match=r"prompts.jsonl: 20 usable conversations, 31 needed"):
        plan_workload(w, WhitespaceTokenizer(), 1, 30, endpoint="completions", max_model_len=64)
    cycled = parse_workload(
        "w", {"input": 12, "output": 2, "prompts": {"source": "jsonl", "path": str(path), "cycle": True}}
    )
    assert (
        len(plan_workload(cycled, WhitespaceTokenizer(), 1, 30, endpoint="completions", max_model_len=64).prompts) == 31
    )
    missing = parse_workload("m", {"prompts": {"source": "sharegpt", "path": str(tmp_path / "nope.json")}})
    with pytest.raises(DatasetError, match="nope.json"):
        preflight([missing])
    bad = tmp_path / "t.jsonl"
    bad.write_text(
        '{"timestamp": 10, "input_length": 4, "output_length": 2}\n'
        '{"timestamp": 5, "input_length": 4, "output_length": 2}\n'
    )
    from agents.loadgen.traces import TraceError

    with pytest.raises(TraceError, match=r"t.jsonl:2: timestamp 5 is before line 1's 10"):
        preflight([parse_workload("t", {"arrival": {"kind": "trace", "path": str(bad)}})])


def test_a_prompt_file_is_read_once_for_the_lane_not_per_point(monkeypatch, tmp_path):
    import shutil

    from agents.loadgen import datasets
    from agents.loadgen.workload import preflight

    path = tmp_path / "p.jsonl"  # its own path: the process-wide cache starts empty for it
    shutil.copy(FIXTURES / "prompts.jsonl", path)
    reads = []
    real = datasets.read_dataset
    monkeypatch.setattr(datasets, "read_dataset", lambda *a, **k: reads.append(a) or real(*a, **k))
    w = parse_workload("w", {"input": 12, "output": 2, "prompts": {"source": "jsonl", "path": str(path)}})
    preflight([w])
    for _ in range(3):  # three points (concurrencies, repeats) of the same workload
        plan_workload(w, WhitespaceTokenizer(), 1, 6, endpoint="completions", max_model_len=64)
    assert len(reads) == 1
