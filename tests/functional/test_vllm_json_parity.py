"""``--save-vllm-json`` against files ``vllm bench serve`` itself wrote (tests/fixtures/vllm_bench/README.md).

Key set, key order, value types and per-request list lengths must match vLLM's, with and without failed
requests and with ``--save-detailed``. Values are never compared (different clients, different runs).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from control_plane.cli import main
from tests.functional.test_loadgen_synthetic import Server

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_bench"
PER_REQUEST = (
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "latencies",
    "start_times",
    "queue_times",
    "generated_texts",
    "errors",
)
FAULTS = ("--error-rate", "0.25", "--fault", "close:0.15", "--seed", "1")


def kind(value) -> str:
    """A JSON value's type as vLLM writes it (a float is never an int; None is its own type)."""
    if isinstance(value, list):
        inner = {kind(v) for v in value}
        return f"list[{'|'.join(sorted(inner))}]" if inner else "list"
    return type(value).__name__


def assert_same_shape(ours: dict, theirs: dict) -> None:
    assert list(ours) == list(theirs), set(ours) ^ set(theirs)  # same keys, same order
    for key, value in theirs.items():
        if key in PER_REQUEST:
            continue
        assert kind(ours[key]) == kind(value), (key, ours[key], value)
    n = ours["completed"] + ours["failed"]
    for key in PER_REQUEST:
        if key not in theirs:
            continue
        assert len(ours[key]) == n and len(theirs[key]) == theirs["completed"] + theirs["failed"], key
        # element types (vLLM: int lens, float times, list[float] itls, str texts and errors)
        assert {kind(v) for v in ours[key]} <= {kind(v) for v in theirs[key]} | {"list"}, key


@pytest.fixture(scope="module")
def healthy():
    s = Server("--ttft-ms", "5", "--itl-ms", "2")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def faulty():
    s = Server("--ttft-ms", "5", "--itl-ms", "2", *FAULTS)
    yield s
    s.stop()


def ours(url: str, out: Path, *extra: str) -> dict:
    rc = main(
        [
            "loadgen",
            "--base-url",
            url,
            "--concurrency",
            "4",
            "--input-len",
            "8",
            "--output-len",
            "6",
            "--num-prompts",
            "12",
            "--warmup",
            "0",
            "--idle-timeout",
            "5",
            "--save-vllm-json",
            str(out),
            *extra,
        ]
    )
    assert rc == 0
    return json.loads(out.read_text())


def test_default_save_has_vllms_shape(healthy, tmp_path):
    theirs = json.loads((FIXTURES / "default.json").read_text())
    data = ours(healthy.url, tmp_path / "o.json")
    assert_same_shape(data, theirs)
    assert not any(k in data for k in ("ttfts", "itls", "generated_texts", "errors", "p90_ttft_ms"))
    assert len(data["latencies"]) == 12 and data["request_rate"] == "inf" and data["max_concurrency"] == 4
    assert data["max_concurrent_requests"] >= 1 and data["max_output_tokens_per_s"] > 0


def test_failures_keep_one_entry_per_request(faulty, tmp_path):
    theirs = json.loads((FIXTURES / "failures.json").read_text())
    assert theirs["failed"] > 0
    data = ours(faulty.url, tmp_path / "o.json")
    assert data["failed"] > 0 and data["completed"] > 0
    assert_same_shape(data, theirs)
    assert len(data["latencies"]) == 12 and data["latencies"].count(0.0) == data["failed"]


def test_detailed_save_has_vllms_shape_with_failures(faulty, tmp_path):
    theirs = json.loads((FIXTURES / "detailed.json").read_text())
    data = ours(faulty.url, tmp_path / "o.json", "--save-detailed", "--goodput", "ttft:1000,tpot:100")
    assert_same_shape(data, theirs)
    failed = [i for i, e in enumerate(data["errors"]) if e]
    assert len(failed) == data["failed"] > 0
    for i in failed:  # vLLM's values for a failed request
        assert data["output_lens"][i] == 0 and data["latencies"][i] == 0.0 and data["generated_texts"][i] == ""
    for i in set(range(12)) - set(failed):
        assert data["generated_texts"][i].split() == [f"t{k}" for k in range(6)]  # the server's words
        assert len(data["itls"][i]) == 5 and data["output_lens"][i] == 6


def test_fixtures_were_written_by_vllm():
    """The fixture files are vLLM's (not ours): their key order is serve.py's and they carry vLLM-only keys."""
    for name in ("default", "failures", "detailed"):
        data = json.loads((FIXTURES / f"{name}.json").read_text())
        assert list(data)[:3] == ["date", "endpoint_type", "backend"] and "rtfx" in data
