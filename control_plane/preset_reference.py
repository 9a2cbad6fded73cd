"""The presets' lanes and waves, written as Markdown from the lane registry and the planner's graph rules.

``python -m control_plane.preset_reference --output docs/reference/presets.md`` (or ``make docs``) regenerates the
checked-in page; ``tests/unit/test_preset_reference.py`` fails when the page and the registry disagree. Every other
page that names a preset's waves links here instead of listing them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from control_plane.cli_reference import write_generated_page
from pipeline.graph import build_nodes
from pipeline.lanes import PRESETS, request_lanes

REGENERATE = "make docs"
OUTPUT = Path("docs") / "reference" / "presets.md"
BOXES = ("trn1", "inf2")


def _preset(name: str) -> list[str]:
    specs = request_lanes(None, name)
    nodes = build_nodes(specs, list(BOXES))
    waves = sorted({n.wave for n in nodes})
    lines = [
        f"## `{name}`",
        "",
        f"Lanes, in plan order: {', '.join(f'`{s.name}`' for s in specs)}.",
        "",
        "| wave | " + " | ".join(BOXES) + " |",
        "|---|" + "---|" * len(BOXES),
    ]
    for wave in waves:
        cells = [", ".join(n.lane for n in nodes if n.wave == wave and n.box == box) or "—" for box in BOXES]
        lines.append(f"| {wave} | " + " | ".join(cells) + " |")
    crossing = sorted(
        {
            f"`{n.lane}` after `{need}`"
            for n in nodes
            if n.wave > 0
            for need in n.needs
            if need in {m.result_lane for m in nodes if m.box != n.box}
        }
    )
    if crossing:
        lines += ["", "A lane waits a wave for a producer on the other box: " + "; ".join(crossing) + "."]
    return lines + [""]


def generate() -> str:
    """The page for the registry as it is defined now."""
    lines = [
        "# Presets: lanes and waves",
        "",
        "<!-- Generated from the lane registry by `python -m control_plane.preset_reference` "
        f"(`{REGENERATE}`); do not edit by hand. -->",
        "",
        "What a request's `preset` runs, and how the planner groups its lanes into **waves**: in a wave every box "
        "runs its segment of lanes at once, one lane after another in plan order; a lane that needs a lane on "
        "the other box runs one wave after its producer ([planning](../explanation/planning.md)). A request "
        "without `preset` or `lanes` runs `full`.",
        "",
    ]
    for name in PRESETS:
        lines += _preset(name)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    return write_generated_page(
        argv,
        "python -m control_plane.preset_reference",
        "write the presets' lanes and waves as Markdown",
        generate,
        OUTPUT,
    )


if __name__ == "__main__":
    sys.exit(main())
