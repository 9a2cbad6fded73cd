"""Reading synthesized CloudFormation in the infra tests: a value as text, a maybe-list as a list."""

from __future__ import annotations

import json
from typing import Any


def as_list(x: Any) -> list[Any]:
    """A CloudFormation field that holds one item or a list of them, as a list."""
    return x if isinstance(x, list) else [x]


def flat(value: Any) -> str:
    """A CloudFormation value as text (Fn::Join parts concatenated, other intrinsics as JSON)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(flat(p) for p in parts)
    return json.dumps(value, sort_keys=True)
