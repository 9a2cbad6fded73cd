"""Names shared by the markdown and the plots, without importing matplotlib (the report Lambda has none)."""
from __future__ import annotations

import re
from typing import Any


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(text)).strip("_") or "none"


def compile_rows(summary: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The compile summary's rows (comparison.json ``compile.summary``) with at least one successful wall time
    (cold, warm or no cache)."""
    return [r for r in summary
            if any(r.get(k) is not None for k in ("cold_wall_s", "warm_wall_s", "uncached_wall_s"))]
