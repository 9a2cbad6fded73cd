"""Headline metrics of a comparison, and their deltas between runs.

Only reads comparison.json values (computed by the views); the delta of two
numbers is the one arithmetic done here. Points match across runs on the
measurement key (lane, model, server config, shape, concurrency, rate); what
matches in one run only is listed, never dropped silently.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

SERVING_HEADLINES = ("output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms")
TRAINING_HEADLINES = ("tokens_per_s", "mfu", "last_loss")
COMPILE_HEADLINES = ("cold_wall_s", "warm_wall_s")
SUSTAINED_HEADLINES = ("retention_vs_first", "retention_vs_peak")


class UnknownRunError(KeyError):
    def __init__(self, run_id: str, known: Iterable[str]):
        super().__init__(f"run {run_id!r} is not in the results; runs found: {', '.join(sorted(known)) or 'none'}")

    def __str__(self) -> str:
        return self.args[0]


def metric_value(row: dict[str, Any], name: str) -> Any:
    """A metric by its vLLM name; ``p50_*`` falls back to vLLM's ``median_*`` spelling."""
    if row.get(name) is None and name.startswith("p50_"):
        return row.get("median_" + name[4:])
    return row.get(name)


def is_headline_point(p: dict[str, Any]) -> bool:
    """RULES.md 7: a point without telemetry, or flagged invalid, stays out of headline tables."""
    return (p.get("telemetry_samples") or 0) > 0 and p.get("valid") is not False


def headline_metrics(c: dict[str, Any], run_id: str) -> dict[str, Any]:
    """{"section · key · metric": value} for one run."""
    out: dict[str, Any] = {}
    for r in c["compile"]["summary"]:
        if r["run_id"] == run_id:
            for m in COMPILE_HEADLINES:
                out[f"compile · {r['what']} {r.get('model')} {r.get('config') or ''}".rstrip() + f" · {m}"] = r.get(m)
    for r in c["training"]["runs"]:
        if r["run_id"] == run_id:
            for m in TRAINING_HEADLINES:
                out[f"training · {r['lane']} {r['model']} · {m}"] = r.get(m)
    for p in c["serving"]["points"]:
        if p.get("run_id") == run_id and is_headline_point(p):
            key = (f"{p.get('lane')} {p.get('model')} {p.get('server_config')} in={p.get('input_len')} "
                   f"out={p.get('output_len')} conc={p.get('max_concurrency')}")
            if p.get("request_rate") is not None:
                key += f" rate={p['request_rate']}"
            for m in SERVING_HEADLINES:
                # a coalesced point's TPOT is a delivery rate: keyed apart so it never compares as decode speed
                name = f"{m} (delivery rate)" if p.get("coalesced") and "tpot" in m else m
                out[f"serving · {key} · {name}"] = metric_value(p, m)
    for r in c["sustained"]["retention"]:
        if r.get("run_id") == run_id:
            for m in SUSTAINED_HEADLINES:
                if m in r:
                    out[f"sustained · {r.get('lane')} {r.get('model')} {r.get('point_id')} · {m}"] = r.get(m)
    return out


@dataclass(frozen=True)
class Delta:
    metric: str
    a: Any
    b: Any

    @property
    def delta(self) -> float | None:
        if isinstance(self.a, (int, float)) and isinstance(self.b, (int, float)) \
                and not isinstance(self.a, bool) and not isinstance(self.b, bool):
            return self.b - self.a
        return None

    @property
    def pct(self) -> float | None:
        d = self.delta
        if d is None or not self.a:
            return None
        return 100.0 * d / abs(self.a)


def compare_runs(c: dict[str, Any], run_a: str, run_b: str) -> tuple[list[Delta], list[str], list[str]]:
    """Deltas of B against A on every shared headline key; keys only in A; keys only in B."""
    known = {r["run_id"] for r in c["runs"]}
    for rid in (run_a, run_b):
        if rid not in known:
            raise UnknownRunError(rid, known)
    ha, hb = headline_metrics(c, run_a), headline_metrics(c, run_b)
    shared = sorted(set(ha) & set(hb))
    return ([Delta(k, ha[k], hb[k]) for k in shared], sorted(set(ha) - set(hb)), sorted(set(hb) - set(ha)))
