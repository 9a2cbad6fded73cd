"""REPORT.md parts about the boxes themselves: the Preflight section, the Cold start table under Compile, and the
saturation cells (accelerator busy % and utilisation p90 beside throughput) of the serving tables with their
footnote. Render stage: rows comparison.json already holds, nothing computed (the views are
39_report_saturation.sql, 40_report_cold_start.sql and 41_report_preflight.sql)."""
from __future__ import annotations

from typing import Any

from analytics.report.document import Comparison
from analytics.report.format import Column, fmt, table

SATURATION_COLUMNS: list[Column] = [("accel_busy_pct", "accel busy %"), ("accel_util_p90_pct", "util p90 %")]
SATURATION_KEYS = tuple(k for k, _ in SATURATION_COLUMNS)
ABSENT = "—"


def saturation_cell(r: dict[str, Any], k: str) -> Any:
    """A saturation cell: its value, or "—" where the view left it NULL (the footnote says why)."""
    v = r.get(k)
    return ABSENT if v is None else v


def saturation_notes(points: list[dict[str, Any]]) -> list[str]:
    """One line per distinct reason a point's saturation cells are "—", naming the points; the busy rule once."""
    lines: list[str] = []
    if any(p.get("accel_busy_pct") is not None for p in points):
        threshold = next(p.get("accel_busy_threshold_pct") for p in points if p.get("accel_busy_pct") is not None)
        lines.append(f"accel busy % = share of the accelerator utilisation samples inside the point's span above "
                     f"{fmt(threshold)} % (a sample: the mean over the cores reported at one telemetry tick); "
                     "util p90 % = their 90th percentile (point_saturation).")
    reasons: dict[tuple[Any, Any], list[str]] = {}
    for p in points:
        if p.get("accel_busy_pct") is None:
            where = (f"conc {fmt(p.get('max_concurrency'))}" if p.get("request_rate") is None
                     else f"rate {fmt(p.get('request_rate'))}")
            reasons.setdefault((p.get("accel_util_reason"), p.get("accel_util_note")), []).append(where)
    for (reason, note), where in reasons.items():
        which = "every point" if len(where) == len(points) else ", ".join(where)
        detail = f" ({fmt(note)})" if note else ""
        lines.append(f"{ABSENT} in accel busy % / util p90 % at {which}: {fmt(reason or 'no saturation row')}"
                     f"{detail}.")
    return lines + [""] if lines else []


def s_preflight(c: Comparison) -> list[str]:
    """Per box: checks passed/failed/skipped, then every failed check with its reason verbatim; nothing when empty."""
    p = c.preflight
    if not p.summary:
        return []
    lines = ["## Preflight", "",
             "The preflight gate ran first on each box: the environment checked before any compute was spent.", ""]
    lines += table(p.summary, [("run_id", "run"), ("box_role", "box"), ("lane", "lane"), ("checks", "checks"),
                                  ("passed", "passed"), ("failed", "failed"), ("skipped", "skipped"),
                                  ("failed_checks", "failed checks")])
    for f in p.failed:
        lines.append(f"- **{fmt(f.get('box_role'))} · `{fmt(f.get('check'))}` failed** (run `{f.get('run_id')}`): "
                     f"{fmt(f.get('reason'))} (observed {fmt(f.get('observed'))}, expected {fmt(f.get('expected'))})")
    return lines + [""] if p.failed else lines


COLD_START_COLUMNS: list[Column] = [
    ("run_id", "run"), ("box_role", "box"), ("segment", "segment"), ("instance_type", "instance"),
    ("instance_start_s", "instance start s"), ("os_setup_s", "OS setup s"), ("agent_registered_s", "agent s"),
    ("harness_sync_s", "harness sync s"), ("cache_seed_s", "cache seed s"), ("server_healthy_s", "server healthy s"),
    ("first_token_s", "first token s"), ("total_min", "total min"), ("serving_config", "first server"),
    ("serving_cache", "its cache")]
BOOT_CACHE_COLUMNS: list[Column] = [
    ("run_id", "run"), ("box_role", "box"), ("segment", "segment"), ("cache_namespace", "namespace"),
    ("seed_entries_fetched", "entries fetched"), ("seed_entries_present", "already present"),
    ("seed_bytes_fetched", "bytes fetched"), ("seed_s", "seed s"), ("push_entries", "pushed"),
    ("push_bytes", "bytes pushed"), ("serving_boots", "serving boots"), ("serving_cache_labels", "cache labels")]


def cold_start_lines(c: Comparison) -> list[str]:
    """The Cold start table (cold_start) and the compile-cache row per boot (boot_compile_cache)."""
    cs = c.compile.cold_start
    if not cs.boots:
        return []
    lines = ["### Cold start", "",
             "Per box boot, the phases from the start request to the first token (seconds; the total in minutes). "
             "NULL where a mark is missing — locally there is no instance start, so no total.", ""]
    lines += table(cs.boots, COLD_START_COLUMNS)
    for b in cs.boots:
        if b.get("missing"):
            lines.append(f"- {fmt(b.get('box_role'))} segment {fmt(b.get('segment'))}: missing {b['missing']}.")
    if any(b.get("missing") for b in cs.boots):
        lines.append("")
    if cs.cache:
        lines += ["Compile cache per boot (the shared S3 cache: entries fetched vs already on the volume; labels "
                  "`cache/basis` of the serving boots, `s3` = seeded from S3 this boot):", ""]
        lines += table(cs.cache, BOOT_CACHE_COLUMNS)
    return lines
