"""The child command lines ``run --local`` builds: a user's value (a results root named ``-x``, a lane config)
is always its option's value, never read by the child as an option of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.__main__ import build_parser
from control_plane.local import cache_step_argv, lane_command


@pytest.mark.parametrize("results", ["-x", "--force", "--config={}", "--results=/etc", "-", "plain/dir"])
def test_a_results_root_that_looks_like_an_option_reaches_the_lane_as_its_value(results):
    cmd = lane_command("host_cpu", "r1", results, "tiny", False, {"k": "--force"}, Path("/tmp/p.jsonl"))
    args = build_parser().parse_args(cmd[3:])  # after: python -m agents
    assert args.results == results and args.run_id == "r1" and args.force is False


@pytest.mark.parametrize("results", ["-x", "--run-id=other", "s3://b/p"])
def test_the_cache_steps_pass_the_results_root_as_a_value(results):
    args = build_parser().parse_args(["cache", *cache_step_argv("push", results, "r1")])
    assert args.results == results and args.run_id == "r1"
