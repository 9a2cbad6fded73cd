"""`neuronpipe synthetic-server`: a deterministic OpenAI-compatible streaming server on loopback."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    from agents.loadgen import synthetic_server  # stdlib-only module: cheap

    p = sub.add_parser(
        "synthetic-server",
        help="deterministic streaming server with faults and ground-truth timing",
        description=synthetic_server.__doc__,
    )
    synthetic_server.add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agents.loadgen import synthetic_server

    try:
        config = synthetic_server.config_from_args(args)
    except synthetic_server.SyntheticServerConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return synthetic_server.run(config)
