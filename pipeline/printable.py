"""What a stored string looks like when it is printed or rendered: every control character shown as its escape.

A string in the results (a box's error message, a model name, a tag, a dataset's text) is written by code this
project does not trust; a terminal, a Markdown viewer or a CSV reader shown it must see what was stored and be
acted on by none of it. Standard library only: the CLI, the report and the Lambdas share it.
"""

from __future__ import annotations

import re

# What a terminal or a Markdown viewer would act on rather than show: C0 controls but the tab and the line feed,
# DEL, C1 controls (U+009B is a CSI on its own), and the bidirectional marks, embeddings, overrides and isolates
# that reorder what a reader sees.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` with every control character shown as its escape (``\\x1b``, ``\\u202e``): what is printed or
    rendered is what was stored, and nothing in it acts on the terminal or reorders the line."""
    return _CONTROLS.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text
    )
