"""`neuronpipe schema request|comparison`: print the JSON Schema of a run request or of comparison.json.

The same text as the checked-in ``docs/reference/schemas/*.schema.json`` (``control_plane.schemas``). A request that
the schema accepts can still be refused by the planner (an unknown lane or model, a cost above the ceiling):
``neuronpipe plan --input`` applies every check.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    from control_plane.schemas import SCHEMAS

    p = sub.add_parser(
        "schema",
        help="print the JSON Schema of a run request or of comparison.json",
        description="Print a published JSON Schema (docs/reference/schemas/).",
    )
    p.add_argument("name", choices=list(SCHEMAS), help="; ".join(f"{s.name}: {s.what}" for s in SCHEMAS.values()))
    p.set_defaults(func=schema_command)


def schema_command(args: argparse.Namespace) -> int:
    from control_plane.schemas import get_schema

    sys.stdout.write(get_schema(args.name).text())
    return 0
