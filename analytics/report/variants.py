"""comparison.json ``variants``: the server configs each run booted, each variant against its base, and how each
multi-LoRA variant's requests split across its adapters.

A variant is a server config declared on top of a catalogue config (its ``base``; ``pipeline.servers``). Within a
run, every variant is compared with its base at the points both measured (same lane, model, shape and
concurrency or rate) through :func:`analytics.report.compare.config_deltas`: the paired test over repeat pairs
when the sweep repeats (balanced order best), the noise floor from an A/A copy of the base when the run declares
one (a variant whose fingerprint equals its base's: same graphs, same server), else the practical margin.
"""
from __future__ import annotations

import json
import re
from typing import Any

from analytics.report.compare import FAIL_PCT, UnknownConfigError, config_deltas
from analytics.report.rows import clean, rows


def _sets(config_json: str | None) -> dict[str, Any] | None:
    if not config_json:
        return None
    data = json.loads(config_json)
    return {k: v for k, v in data.items() if k not in ("name", "base", "fingerprint")}


def server_config_rows(con: Any, present: set[str]) -> list[dict[str, Any]]:
    """report_server_configs (``present``: the connection's views; empty without it)."""
    if "report_server_configs" not in present:
        return []
    # the limits lane's probes are boots, not variants: its own section shows them
    out = rows(con, "SELECT * FROM report_server_configs WHERE lane <> 'limits' ORDER BY run_id, lane, model, config")
    for r in out:
        r["sets"] = _sets(r.pop("config_json", None))
    return out


def _floor_copy(configs: dict[str, dict[str, Any]], base: str, variant: str) -> str | None:
    """An A/A copy of ``base`` in the run (declared on it, the same fingerprint), other than ``variant``."""
    fp = (configs.get(base) or {}).get("fingerprint")
    if fp is None:
        return None
    return next((n for n, r in sorted(configs.items()) if n not in (base, variant) and r.get("base") == base
                 and r.get("fingerprint") == fp and _tenants(r) == 1), None)


def _tenants(row: dict[str, Any]) -> int:
    """A booted config's tenants (its fingerprint leaves placement out: tenants of A share A's)."""
    return int((row.get("sets") or {}).get("tenants") or 1)


def variants_section(con: Any, c: dict[str, Any], present: set[str], fail_pct: float = FAIL_PCT,
                     compare: bool = True) -> dict[str, Any]:
    """{"configs": every booted config per run, "comparisons": each variant against its base in its run (none
    without ``compare``), "limits": the limits lane's brackets}; ``present``: the connection's views."""
    configs = server_config_rows(con, present)
    comparisons: list[dict[str, Any]] = []
    runs = [r["run_id"] for r in c["runs"]] if compare else []
    for run in runs:
        mine: dict[str, dict[str, Any]] = {}
        for r in configs:
            if r["run_id"] == run:
                mine.setdefault(r["config"], r)  # one row per config suffices for base and fingerprint
        for name, r in sorted(mine.items()):
            base = r.get("base")
            if not base or base == name:
                continue
            tenants = _tenants(r)
            if tenants > 1:
                name = f"{name}.alone"  # a multi-tenant variant against its base: its first tenant, alone
            entry: dict[str, Any] = {"run_id": run, "baseline": base, "variant": name, "sets": r.get("sets"),
                                     "aa_copy": tenants == 1 and r.get("fingerprint") is not None and
                                     r.get("fingerprint") == (mine.get(base) or {}).get("fingerprint")}
            floor = _floor_copy(mine, base, name)
            try:
                deltas = config_deltas(c, [run], base, name, con, fail_pct, floor_config=floor)
            except UnknownConfigError as exc:
                entry["note"] = _not_compared(c, run, (base, name), exc)
                comparisons.append(entry)
                continue
            entry["deltas"] = deltas
            comparisons.append(entry)
        comparisons += _isolation(c, con, run, fail_pct)
    return clean({"configs": configs, "comparisons": comparisons, "limits": limits_rows(con, present),
                  "lora_traffic": lora_traffic_rows(con, present)})


def _isolation(c: dict[str, Any], con: Any, run: str, fail_pct: float) -> list[dict[str, Any]]:
    """Each tenant of a multi-tenant variant loaded with its neighbours (NAME.t<i>) against the first tenant
    alone (NAME.alone), in the same boots: what sharing the box costs a tenant."""
    # every point of the run, kept or not: a tenant whose points all left the headline tables (a starved client,
    # no telemetry) is listed as not compared, with the reason, rather than dropped from the section unsaid
    names = {p.get("server_config") for p in c["serving"]["points"] if p.get("run_id") == run}
    out = []
    for name in sorted(n for n in names if n and re.fullmatch(r".+\.t\d+", n)):
        variant = name.rsplit(".t", 1)[0]
        alone = f"{variant}.alone"
        if alone not in names:
            continue
        entry: dict[str, Any] = {"run_id": run, "baseline": alone, "variant": name, "isolation": True,
                                 "tenant_of": variant}
        try:
            entry["deltas"] = config_deltas(c, [run], alone, name, con, fail_pct)
        except UnknownConfigError as exc:
            entry["note"] = _not_compared(c, run, (alone, name), exc)
        out.append(entry)
    return out


def _not_compared(c: dict[str, Any], run: str, configs: tuple[str, ...], exc: UnknownConfigError) -> str:
    """Why a comparison has no side: the error, and for each side whose points all left the headline tables
    (rules 7 and 15) how many and the first reason (report_exclusions lists every one)."""
    from analytics.report.compare import is_headline_point

    parts = [str(exc)]
    for cfg in configs:
        pts = [p for p in c["serving"]["points"] if p.get("run_id") == run and p.get("server_config") == cfg]
        if not pts or any(is_headline_point(p) for p in pts):
            continue
        p = pts[0]
        why = "no telemetry sample inside its window" if not p.get("telemetry_samples") else \
            f"invalid: {p.get('invalid_reason') or 'flagged invalid'}"
        parts.append(f"all {len(pts)} points of `{cfg}` are kept out of the headline tables (first: {why}; "
                     "\"Failures and exclusions\" lists every one)")
    return "; ".join(parts)


def lora_traffic_rows(con: Any, present: set[str]) -> list[dict[str, Any]]:
    """report_lora_traffic: each multi-LoRA variant's requests per adapter (empty without the view)."""
    if "report_lora_traffic" not in present:
        return []
    return rows(con, "SELECT * FROM report_lora_traffic ORDER BY run_id, lane, model, config, request_model")


def limits_rows(con: Any, present: set[str]) -> list[dict[str, Any]]:
    """report_limits: one row per bisection of the limits lane (empty without the view)."""
    if "report_limits" not in present:
        return []
    return rows(con, "SELECT * FROM report_limits ORDER BY run_id, lane, model, kind, at_value, search_id")
