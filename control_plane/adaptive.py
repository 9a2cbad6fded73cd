"""An adaptive run matrix: after each wave, which cells stop and which run again (``matrix.adaptive``,
pipeline.matrix.AdaptiveSpec; docs/explanation/decision-noise.md).

A cell is one instance type in one Decision group (model, server config, workload, shape, SLO). What decides is
78_report_decision_noise.sql over the store, read here with the margin set (``decision_margin_pct``): for each
candidate type, ``p_within_margin`` against every other candidate — P(its $/M <= (1 + margin) x the other's).
The probability that it is the cheapest or within the margin of the cheapest is at most the smallest of these (the
event needs every one of them), so that smallest value bounds it from above; a cell stops when the bound is
below ``threshold`` — a stop is never made on a probability the bound overstates. In order, a cell:

1. stops ``no $/M at the SLO`` when its runs gave no candidate row (SLO never met, not priced): it cannot be the
   cheapest; the Decision's own verdict is the reason;
2. stops ``decided`` when its group's cheapest type is ``cheaper`` than every other candidate (the Decision's
   verdict: P(at least 5 % cheaper) >= 0.99);
3. stops ``dominated`` when its bound is below ``threshold`` (the pair that bounds it is named);
4. stops ``max repeats`` when it has run ``max_repeats`` times, still in contention;
5. else runs again (a repeat: another box of its type, so the group's repeats measure the run-to-run spread); the
   repeats are taken in order of the bound, highest first, while the box-hours spent plus the next repeat's stay
   within ``budget_box_hours``; the rest stop ``budget``.

Pure over a DuckDB connection whose views include report_decision_hardware and the noise views: the wave
scheduler's connection over the store (analytics.views.connect), or analytics.decision_noise.connection over
fixed rows. Every stop carries its reason and the probability it was decided on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipeline.matrix import AdaptiveSpec

DECIDED_AT = 0.99  # 78_report_decision_noise.sql's p_threshold: 'cheaper' only at P(at least 5 % cheaper) >= 0.99


@dataclass(frozen=True)
class CellRuns:
    """What the scheduler knows of one cell: its id, type and Decision group, how many runs it has made and the
    box-hours one run of it costs (its last run's, launch to termination)."""

    cell: str
    instance: str
    decision_group: str | None
    runs: int
    box_hours_per_run: float


@dataclass(frozen=True)
class Stop:
    cell: str
    instance: str
    decision_group: str | None
    wave: int
    kind: str  # no $/M at the SLO | decided | dominated | max repeats | budget (| box failed: adaptive_waves)
    reason: str
    p_bound: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "cell": self.cell,
            "instance": self.instance,
            "decision_group": self.decision_group,
            "wave": self.wave,
            "kind": self.kind,
            "reason": self.reason,
            "p_bound": self.p_bound,
        }


@dataclass(frozen=True)
class WavePlan:
    wave: int
    stops: list[Stop] = field(default_factory=list)
    repeat: list[str] = field(default_factory=list)  # cells that run again in the next wave

    @property
    def done(self) -> bool:
        return not self.repeat


def _standing(con: duckdb.DuckDBPyConnection, margin_pct: float) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (group, type): the smallest p_within_margin and p_cheaper_by_margin (the verdict's P) against the other
    candidates, the pair that gives the bound, the number of other candidates."""
    con.execute(f"SET VARIABLE decision_margin_pct = {float(margin_pct)!r}")
    got = con.execute(
        """SELECT decision_group, instance, count(*) AS others,
                  min(p_within_margin) AS p_bound, arg_min(other_instance, p_within_margin) AS bound_by,
                  min(p_cheaper_by_margin) AS p_cheaper_min, count(p_cheaper) = count(*) AS tested,
                  any_value(usd_per_million_output_tokens) AS usd
           FROM report_decision_noise GROUP BY decision_group, instance"""
    ).fetchall()
    return {
        (g, i): {"others": n, "p_bound": pb, "bound_by": by, "p_cheaper_min": pc, "tested": t, "usd": u}
        for g, i, n, pb, by, pc, t, u in got
    }


def _candidates(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], str]:
    """(group, type) of every candidate row, and the Decision's verdict note of each non-candidate type."""
    rows = con.execute(
        """SELECT decision_group, instance, bool_or(candidate) AS candidate,
                  any_value(verdict_note) FILTER (WHERE NOT candidate) AS why
           FROM report_decision_hardware WHERE NOT coalesce(is_reference, false) GROUP BY ALL"""
    ).fetchall()
    return {(g, i): ("" if c else (why or "no $/M at the SLO")) for g, i, c, why in rows}


def next_wave(
    con: duckdb.DuckDBPyConnection, spec: AdaptiveSpec, cells: Sequence[CellRuns], wave: int, spent_box_hours: float
) -> WavePlan:
    """The stops and repeats after ``wave`` (module docstring) for the ``cells`` still running."""
    standing = _standing(con, spec.margin_pct)
    candidates = _candidates(con)
    decided = {
        g: i
        for (g, i), s in standing.items()
        if s["p_cheaper_min"] is not None and s["p_cheaper_min"] >= DECIDED_AT and s["tested"]
    }
    stops: list[Stop] = []
    contending: list[tuple[float, CellRuns]] = []
    for c in cells:
        key = (c.decision_group or "", c.instance)
        s = standing.get(key)

        def stop(kind: str, reason: str, p: float | None = None, c: CellRuns = c) -> None:
            stops.append(Stop(c.cell, c.instance, c.decision_group, wave, kind, reason, p))

        if candidates.get(key) != "":  # no row, or rows without a $/M at the SLO
            stop("no $/M at the SLO", candidates.get(key) or "no Decision row for this cell: it cannot be the cheapest")
        elif c.decision_group in decided:
            leader = decided[c.decision_group]
            p = standing[(c.decision_group, leader)]["p_cheaper_min"]
            stop(
                "decided",
                f"the group is decided: {leader} is at least 5 % cheaper than every other type at P >= {p:.3f} "
                f"(>= {DECIDED_AT})",
                p,
            )
        elif s is None:  # the only candidate so far: nothing to rank against, measure again
            contending.append((1.0, c))
        elif s["p_bound"] is not None and s["p_bound"] < spec.threshold:
            stop(
                "dominated",
                f"P(cheapest or within {spec.margin_pct:g} % of the cheapest) <= {s['p_bound']:.3g} "
                f"< {spec.threshold:g} (against {s['bound_by']})",
                s["p_bound"],
            )
        elif c.runs >= spec.max_repeats:
            stop(
                "max repeats",
                f"{c.runs} runs (max_repeats) and still in contention (P bound {_fmt(s['p_bound'])})",
                s["p_bound"],
            )
        else:
            contending.append((1.0 if s["p_bound"] is None else s["p_bound"], c))
    repeat: list[str] = []
    spent = spent_box_hours
    for bound, c in sorted(contending, key=lambda x: (-x[0], x[1].cell)):
        if spec.budget_box_hours is not None and spent + c.box_hours_per_run > spec.budget_box_hours:
            stops.append(
                Stop(
                    c.cell,
                    c.instance,
                    c.decision_group,
                    wave,
                    "budget",
                    f"another run ({c.box_hours_per_run:.3g} box-hours) would pass the budget: "
                    f"{spent:.3g} of {spec.budget_box_hours:g} box-hours spent",
                    bound,
                )
            )
            continue
        spent += c.box_hours_per_run
        repeat.append(c.cell)
    return WavePlan(wave, stops, repeat)


def _fmt(p: float | None) -> str:
    return "untested" if p is None else f"{p:.3g}"


def ranking(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """Per Decision group, the candidate types by their mean ln $/M (decision_noise_options), cheapest first."""
    out: dict[str, list[str]] = {}
    for g, i in con.execute("""SELECT decision_group, instance FROM decision_noise_options
                               ORDER BY decision_group, mean_ln_usd_per_million, instance""").fetchall():
        out.setdefault(g, []).append(i)
    return out


def summary(plans: Sequence[WavePlan]) -> Mapping[str, Any]:
    """The stops of every wave, by kind."""
    kinds: dict[str, int] = {}
    for p in plans:
        for s in p.stops:
            kinds[s.kind] = kinds.get(s.kind, 0) + 1
    return {"waves": len(plans), "stops": kinds}
