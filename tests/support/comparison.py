"""comparison.json documents built by hand, for tests of the render stage: every section present and empty, with what
the test gives over it (a section's keys merged one level deep), validated by the document's model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analytics.report.document import COMPARISON_SCHEMA, Comparison
from analytics.report.rules import MEASUREMENT_RULES


def empty_sections() -> dict[str, Any]:
    """comparison.json of runs that committed nothing (the sections as the data stage writes them empty)."""
    return {
        "schema": COMPARISON_SCHEMA,
        "run_ids": [],
        "runs": [],
        "provenance": {"machines": [], "facts": []},
        "preflight": {"summary": [], "failed": []},
        "compile": {"summary": [], "superseded": [], "cold_start": {"boots": [], "cache": []}},
        "training": {"runs": [], "loss_trend": [], "loss_curves": [], "saves": []},
        "from_scratch": {"runs": [], "epochs": []},
        "serving": {"available": True, "view": "serving_points", "points": [], "grids": [], "aggregate_points": []},
        "workloads": {"points": [], "buckets": [], "turns": [], "sessions": []},
        "sustained": {
            "summary": [],
            "retention_view": "sustained_summary",
            "retention": [],
            "iterations": [],
            "lanes": [],
            "windows": [],
        },
        "quality": {"summary": [], "delta": []},
        "roundtrip": {"files": [], "models": [], "artifacts": []},
        "exclusions": [],
        "host_cpu": [],
        "telemetry": [],
        "cost": {"notes": [], "price_table": [], "lanes": [], "runs": [], "points": []},
        "decision": {"available": False, "rule": "", "formula": "", "rows": [], "slos": [], "pricing": []},
        "rules": [{"rule": i + 1, "title": t, "text": x} for i, (t, x) in enumerate(MEASUREMENT_RULES)],
        "variants": {"configs": [], "comparisons": [], "limits": [], "lora_traffic": []},
        "accuracy": {
            "available": False,
            "method": {},
            "evaluations": [],
            "not_ok": [],
            "pairs": [],
            "configs": [],
            "flags": [],
        },
    }


def document(data: Mapping[str, Any] | None = None, **sections: Any) -> Comparison:
    """The model of a hand-built comparison.json: :func:`empty_sections` with ``data`` and ``sections`` over it."""
    merged = empty_sections()
    for key, value in {**(data or {}), **sections}.items():
        base = merged.get(key)
        merged[key] = {**base, **value} if isinstance(base, dict) and isinstance(value, dict) else value
    return Comparison.model_validate(merged)
