"""``python -m agents run-lane LANE --run-id ID --results URI [--force] [--task-token TOKEN]``;
``python -m agents cache seed|push`` (:mod:`agents.cache_cli`)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from pipeline.config import PROFILES, LaneConfigError
from pipeline.lanes import UnknownLaneError, lane_names
from pipeline.quick_exit import skip_final_collection


def _parse_config(text: str | None) -> dict | None:
    if not text:
        return None
    from pipeline import jsonio  # one reader: a regular file, no repeated key, bounded depth and numbers

    value = jsonio.read_json(text[1:]) if text.startswith("@") else jsonio.loads(text, source="--config")
    if not isinstance(value, dict):
        raise ValueError("--config must be a JSON object of field -> value")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m agents", description="Run one lane of a run on this box.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run-lane", help="run one lane, commit its results, call Step Functions back")
    r.add_argument("lane", help=f"one of: {', '.join(lane_names())}")
    r.add_argument("--run-id", required=True)
    r.add_argument("--results", required=True, help="results root: a directory or s3://bucket/prefix")
    r.add_argument("--force", action="store_true", help="re-run even if already committed for this run")
    r.add_argument("--task-token", default=None, help="Step Functions task token (heartbeat + callback)")
    r.add_argument("--profile", default="tiny", choices=PROFILES)
    r.add_argument("--config", default=None, help="lane config overrides: a JSON object, or @file.json")
    r.add_argument("--backend", default=None, choices=("neuron", "cuda", "cpu"))
    r.add_argument("--heartbeat-s", type=float, default=60.0)
    r.add_argument(
        "--telemetry-interval-s",
        type=float,
        default=float(os.environ.get("NEURONPIPE_TELEMETRY_INTERVAL_S", "1.0")),
        help="seconds between telemetry samples (env NEURONPIPE_TELEMETRY_INTERVAL_S)",
    )
    r.add_argument("--progress-file", default=None, type=Path)
    r.add_argument(
        "--needs",
        default="",
        help="comma-separated result lanes that must have succeeded in this run "
        "(the planner's graph); when one has not, the lane is recorded skipped with the reason",
    )
    sub.add_parser("lanes", help="list lanes")
    from agents.cache_cli import add_parser as add_cache_parser

    add_cache_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    skip_final_collection()
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stderr)
    if args.command == "lanes":
        print("\n".join(lane_names()))
        return 0
    if args.command == "cache":
        from agents.cache_cli import main as cache_main

        return cache_main(args)
    from agents.runner import LaneRequest, run_lane
    from analytics.store import open_store
    from pipeline.names import run_id_problem

    if (problem := run_id_problem(args.run_id)) is not None:  # before the store is opened: nothing written
        print(f"error: invalid run_id {args.run_id!r}: {problem}", file=sys.stderr)
        return 2
    try:
        request = LaneRequest(
            lane=args.lane,
            run_id=args.run_id,
            force=args.force,
            task_token=args.task_token,
            profile=args.profile,
            config=_parse_config(args.config),
            backend=args.backend,
            heartbeat_s=args.heartbeat_s,
            progress_path=args.progress_file,
            telemetry_interval_s=args.telemetry_interval_s,
            needs=tuple(n.strip() for n in args.needs.split(",") if n.strip()),
        )
        result = run_lane(request, open_store(args.results))
    except (UnknownLaneError, LaneConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result.to_output()))
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
