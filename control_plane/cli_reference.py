"""The `neuronpipe` CLI reference, written as Markdown from the argparse definitions themselves.

``python -m control_plane.cli_reference > docs/reference/cli.md`` (or ``make docs``) regenerates the checked-in
page; ``tests/unit/test_cli_reference.py`` fails when the page and the parser disagree. The text is built from
the parser's actions, never from ``format_help``, so it does not depend on the terminal's width: the same
parser gives the same bytes everywhere.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

REGENERATE = "make docs"
OUTPUT = Path("docs") / "reference" / "cli.md"

_HEADER = (
    "# CLI reference: `neuronpipe`",
    "",
    "<!-- Generated from the argparse definitions by `python -m control_plane.cli_reference` "
    f"(`{REGENERATE}`); do not edit by hand. -->",
    "",
    "Every command, subcommand and argument, with its default and help, as the parser defines them. "
    "What the commands are for: the [README](../../README.md) and the [guides](../README.md). "
    "On a box, `python -m agents run-lane` runs one lane; see [contracts](../dev/CONTRACTS.md).",
    "",
)


def _cell(text: object) -> str:
    """One Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: object) -> str:
    value = str(text)
    fence = "``" if "`" in value else "`"
    pad = " " if "`" in value else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if a.help is not argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
    ]


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    if action.choices is not None and not action.option_strings:
        return "{" + ",".join(map(str, action.choices)) + "}"
    return action.dest if not action.option_strings else action.dest.upper()


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0


def _spelling(action: argparse.Action, options: list[str] | None = None) -> str:
    """``--lanes LANES`` / ``-v, --verbose`` / ``SOURCE`` / ``RESULT.json ...`` (``options``: which to spell)."""
    options = action.option_strings if options is None else options
    meta = _metavar(action)
    if action.nargs in ("+", "*"):
        meta = f"{meta} ..." if action.nargs == "+" else f"[{meta} ...]"
    elif action.nargs == "?":
        meta = f"[{meta}]"
    elif isinstance(action.nargs, int) and action.nargs > 1:
        meta = " ".join([meta] * action.nargs)
    if not options:
        return meta
    if not _takes_value(action):
        return ", ".join(options)
    return ", ".join(f"{opt} {meta}" for opt in options)


def _help(action: argparse.Action, prog: str) -> str:
    """The help text with argparse's %-placeholders expanded the way argparse expands them."""
    text = action.help or ""
    if "%" not in text:
        return text
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params["prog"] = prog
    for key in list(params):
        if hasattr(params[key], "__name__"):
            params[key] = params[key].__name__
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    return text % params


def _default(action: argparse.Action) -> str:
    if not action.option_strings and action.nargs not in ("?", "*"):
        return "required"
    if action.required:
        return "required"
    default = action.default
    if default is None or default is argparse.SUPPRESS:
        return ""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return "off" if isinstance(action, argparse._StoreTrueAction) else "on"
    if isinstance(default, (list, tuple)):
        return _code(" ".join(map(str, default))) if default else ""
    return _code(default)


def _usage(prog: str, parser: argparse.ArgumentParser) -> str:
    parts = [prog]
    for action in _visible(parser):
        spelled = _spelling(action, action.option_strings[-1:])
        parts.append(spelled if action.required or not action.option_strings else f"[{spelled}]")
    sub = _subparsers(parser)
    if sub is not None:
        parts.append(sub.metavar or "{" + ",".join(sub.choices) + "}")
    return " ".join(parts)


def _table(prog: str, parser: argparse.ArgumentParser) -> Iterator[str]:
    actions = _visible(parser)
    if not actions:
        return
    yield "| argument | default | choices | help |"
    yield "|---|---|---|---|"
    for action in actions:
        choices = ", ".join(_code(c) for c in action.choices) if action.choices is not None else ""
        yield (
            f"| {_code(_cell(_spelling(action)))} | {_cell(_default(action))} | {_cell(choices)} "
            f"| {_cell(_help(action, prog))} |"
        )
    yield ""


def _section(prog: str, parser: argparse.ArgumentParser, summary: str, depth: int) -> Iterator[str]:
    yield f"{'#' * depth} `{prog}`"
    yield ""
    for text in dict.fromkeys(t for t in (summary, parser.description) if t):
        yield _cell(text)
        yield ""
    yield "```"
    yield _usage(prog, parser)
    yield "```"
    yield ""
    yield from _table(prog, parser)
    if parser.epilog:  # e.g. a command's exit codes, as its --help prints them
        yield "```"
        yield parser.epilog.strip("\n")
        yield "```"
        yield ""
    sub = _subparsers(parser)
    if sub is None:
        return
    helps = {choice.dest: choice.help or "" for choice in sub._choices_actions}
    for name, child in sub.choices.items():
        yield from _section(f"{prog} {name}", child, helps.get(name, ""), min(depth + 1, 4))


def _index(parser: argparse.ArgumentParser) -> Iterator[str]:
    sub = _subparsers(parser)
    if sub is None:
        return
    helps = {choice.dest: choice.help or "" for choice in sub._choices_actions}
    yield "| command | what it does |"
    yield "|---|---|"
    for name in sub.choices:
        anchor = f"{parser.prog} {name}".replace(" ", "-").lower()
        yield f"| [`{name}`](#{anchor}) | {_cell(helps.get(name, ''))} |"
    yield ""


def render(parser: argparse.ArgumentParser) -> str:
    """The whole reference page for ``parser`` (every level of subcommands), as Markdown."""
    lines = [*_HEADER, *_index(parser), *_section(parser.prog, parser, "", 2)]
    return "\n".join(lines).rstrip("\n") + "\n"


def generate() -> str:
    """The reference page of the `neuronpipe` parser as it is defined now."""
    from control_plane.cli import build_parser

    return render(build_parser())


def write_generated_page(
    argv: list[str] | None, prog: str, description: str, page: Callable[[], str], output: Path
) -> int:
    """The command line of a generated page: the page on stdout, or written to ``--output`` (e.g. ``output``)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--output", default=None, help=f"write here instead of stdout (e.g. {output})")
    args = parser.parse_args(argv)
    text = page()
    if args.output is None:
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    return write_generated_page(
        argv,
        "python -m control_plane.cli_reference",
        "write the neuronpipe CLI reference as Markdown",
        generate,
        OUTPUT,
    )


if __name__ == "__main__":
    sys.exit(main())
