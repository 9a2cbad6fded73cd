"""The JSON Schemas of what crosses the project's boundaries, generated from their pydantic models.

* ``request``: a run request (:class:`control_plane.models.RunRequest`), what a person, the console, a schedule or
  an event hands in;
* ``comparison``: comparison.json (:class:`analytics.report.document.Comparison`), what the report writes.

``neuronpipe schema request|comparison`` prints one; ``python -m control_plane.schemas`` (``make docs``) writes them
all under ``docs/reference/schemas/``, and ``tests/unit/test_schemas.py`` fails when the checked-in files and the
models disagree. A schema says the shape; the model says more (a run request's lanes and models are checked against
the catalogues, ``neuronpipe plan --input`` applies every check).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REGENERATE = "make docs"
OUTPUT_DIR = Path("docs") / "reference" / "schemas"
DIALECT = "https://json-schema.org/draft/2020-12/schema"


class UnknownSchemaError(KeyError):
    """A schema name that is not published (the message lists the valid ones)."""


@dataclass(frozen=True)
class PublishedSchema:
    name: str
    file: str
    what: str
    generate: Callable[[], dict[str, Any]]

    def text(self) -> str:
        """The schema as the checked-in file holds it (the dialect first, then pydantic's schema)."""
        return json.dumps({"$schema": DIALECT, **self.generate()}, indent=2, ensure_ascii=False) + "\n"


def _request() -> dict[str, Any]:
    from control_plane.models import RunRequest

    return RunRequest.model_json_schema()


def _comparison() -> dict[str, Any]:
    from analytics.report.document import comparison_json_schema

    return comparison_json_schema()


SCHEMAS: dict[str, PublishedSchema] = {
    s.name: s
    for s in (
        PublishedSchema(
            "request", "run-request.schema.json", "a run request (control_plane.models.RunRequest)", _request
        ),
        PublishedSchema(
            "comparison",
            "comparison.schema.json",
            "comparison.json, the report's data (analytics.report.document.Comparison)",
            _comparison,
        ),
    )
}


def get_schema(name: str) -> PublishedSchema:
    try:
        return SCHEMAS[name]
    except KeyError:
        raise UnknownSchemaError(f"no schema {name!r}; valid: {', '.join(SCHEMAS)}") from None


def write_all(directory: Path = OUTPUT_DIR) -> list[Path]:
    """Write every schema into ``directory``; the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for schema in SCHEMAS.values():
        path = directory / schema.file
        path.write_text(schema.text())
        out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m control_plane.schemas", description="write the published JSON Schemas"
    )
    parser.add_argument(
        "--output-dir", type=Path, default=OUTPUT_DIR, help=f"where to write them (default {OUTPUT_DIR})"
    )
    args = parser.parse_args(argv)
    for path in write_all(args.output_dir):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
