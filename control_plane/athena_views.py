"""Create the Athena views in the deploy's workgroup: ``python -m control_plane.athena_views`` (``make
athena-install``), once after a deploy and again after ``make athena-views`` changed them.

Runs every ``CREATE OR REPLACE VIEW`` of ``analytics/athena/views`` (``00_committed.sql`` first, then the files in
the DuckDB load order) through the workgroup, one at a time, stopping at the first failure with one line naming
the view and Athena's reason (exit 1). It needs an operator's credentials (Glue CreateTable/UpdateTable on the
database): the query role ``neuronpipe query --engine athena`` uses cannot create or change a view.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from importlib import resources
from typing import Any

_VIEW = re.compile(r"^CREATE OR REPLACE VIEW (\w+)", re.M)


def view_statements() -> list[tuple[str, str]]:
    """(view name, statement) of every generated view, in creation order."""
    root = resources.files("analytics.athena") / "views"
    names = sorted(e.name for e in root.iterdir() if e.name.endswith(".sql"))
    out = []
    for name in names:
        text = (root / name).read_text()
        starts = [m.start() for m in _VIEW.finditer(text)]
        for i, start in enumerate(starts):
            end = starts[i + 1] if i + 1 < len(starts) else len(text)
            statement = re.sub(r"\n-- [^\n]*", "", text[start:end]).strip().rstrip(";").strip()
            out.append((_VIEW.match(statement).group(1), statement))
    return out


def install(athena: Any, workgroup: str, database: str, timeout_s: float = 300.0, say: Callable = print) -> int:
    from control_plane.athena import AthenaQueryFailed, AthenaTimeout, run_statement

    statements = view_statements()
    for i, (name, sql) in enumerate(statements, 1):
        try:
            run_statement(athena, sql, workgroup, database, timeout_s)
        except (AthenaQueryFailed, AthenaTimeout) as exc:
            say(f"error: view {name} ({i} of {len(statements)}): {exc}", file=sys.stderr)
            return 1
        say(f"created {database}.{name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from control_plane.athena import AthenaInputError, resolve_target
    from control_plane.aws import aws_client

    parser = argparse.ArgumentParser(prog="python -m control_plane.athena_views", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    try:
        workgroup, database = resolve_target(aws_client("ssm"))
    except AthenaInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return install(aws_client("athena"), workgroup, database)


if __name__ == "__main__":
    sys.exit(main())
