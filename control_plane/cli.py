"""`neuronpipe`: one entry point for a person.

Each subcommand lives in its own module under ``control_plane.commands`` with
``register(subparsers)``, which adds its parser and sets ``func(args) -> int``.
Heavy imports happen inside ``func``, so ``neuronpipe --help`` stays fast.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys

COMMAND_MODULES = [
    "control_plane.commands.lanes",
    "control_plane.commands.run",
    "control_plane.commands.query",
    "control_plane.commands.report",
    "control_plane.commands.compare",
    "control_plane.commands.pull",
    "control_plane.commands.demo",
    "control_plane.commands.plan",
    "control_plane.commands.status",
    "control_plane.commands.loadgen",
    "control_plane.commands.synthetic_server",
    "control_plane.commands.verify",
    "control_plane.commands.import_cmd",
]
# Commands that live with an optional package (registered when it is installed): the rehearsal is its own
# top-level package, and its command lives inside it.
OPTIONAL_COMMAND_MODULES = [
    "rehearsal.command",
]


def _optional(module: str) -> bool:
    try:
        importlib.import_module(module)
        return True
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return False
        raise


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="neuronpipe", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    for module in OPTIONAL_COMMAND_MODULES:
        if _optional(module):
            importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s %(message)s", stream=sys.stderr)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
