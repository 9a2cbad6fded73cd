"""docs/reference/cli.md is exactly what the argparse definitions generate, and the generator is deterministic."""

from __future__ import annotations

import argparse
from pathlib import Path

from control_plane.cli_reference import OUTPUT, REGENERATE, generate, render

ROOT = Path(__file__).resolve().parents[2]


def test_the_checked_in_cli_reference_is_what_the_parser_generates():
    checked_in = (ROOT / OUTPUT).read_text()
    assert checked_in == generate(), f"{OUTPUT} is stale: run `{REGENERATE}` and commit the result"


def test_every_command_and_subcommand_of_the_parser_has_a_section():
    from control_plane.cli import build_parser

    text = generate()
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, child in sub.choices.items():
        assert f"`neuronpipe {name}`" in text, name
        for action in child._actions:
            if isinstance(action, argparse._SubParsersAction):
                for kind in action.choices:
                    assert f"`neuronpipe {name} {kind}`" in text, (name, kind)
            elif action.option_strings and action.help is not argparse.SUPPRESS and action.dest != "help":
                assert action.option_strings[-1] in text, (name, action.option_strings)


def test_the_reference_does_not_depend_on_the_terminal_width(monkeypatch):
    first = generate()
    monkeypatch.setenv("COLUMNS", "17")
    assert generate() == first


def _toy() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toy", description="a toy")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser("go", help="go somewhere", description="Go somewhere, fast.")
    run.add_argument("where", help="the place")
    run.add_argument("--speed", type=float, default=2.5, help="how fast (default %(default)s)")
    run.add_argument("--mode", choices=["a", "b"], default="a", help="a|b")
    run.add_argument("--dry", action="store_true", help="say, do not do")
    run.add_argument("--secret", help=argparse.SUPPRESS)
    return parser


def test_a_toy_parser_renders_its_arguments_defaults_choices_and_expanded_help():
    text = render(_toy())
    assert "| [`go`](#toy-go) | go somewhere |" in text
    assert "### `toy go`" in text and "toy go where [--speed SPEED] [--mode MODE] [--dry]" in text
    assert "| `where` | required |  | the place |" in text
    assert "| `--speed SPEED` | `2.5` |  | how fast (default 2.5) |" in text
    assert "| `--mode MODE` | `a` | `a`, `b` | a\\|b |" in text
    assert "| `--dry` | off |  | say, do not do |" in text
    assert "--secret" not in text
