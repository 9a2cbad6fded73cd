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
5. else runs again, in one of two uses of the budget (:func:`choose_use`), taken in order of the bound, highest
   first, while the box-hours spent plus the use's stay within ``budget_box_hours``; the rest stop ``budget``:

   * ``capacity``: its capacity lane (with the box's own lanes, provenance and preflight, not its other serving
     lanes), on another box of its type, its search bisecting the cell's bracket
     (``rate_min`` the highest rate that met the SLO, ``rate_max`` the lowest that missed it) — when the group is
     ranked on the open-loop rate, the cell's plan has the capacity lane, and the bracket is what keeps the
     decision open: ln(lowest missing / highest meeting) is wider than the sd of the ln $/M gap to the type that
     bounds it. The $/M at the rate is priced at the highest passing rate (report_capacity), so the type's true
     $/M may lie lower by up to that bracket, and 78's variance does not include it (it holds the points' and the
     runs' spread): another run cannot narrow the bracket beyond the lane's precision, a bisection can. Its rows
     feed the Decision as a capacity lane's do (report_decision_at_rate pairs a cell's capacity lane with its
     serving lane by the cell, and a capacity lane alone is a row of its own at the rate basis);
   * ``repeat``: every lane of the cell again (another box of its type, so the group's repeats measure the
     run-to-run spread) — otherwise; the use's reason says which condition sent it there (ranked on the
     concurrency, no capacity lane in the plan, no bracket, or a bracket narrower than the gap's sd). Whether
     the lane can run is read from the cell's plan: a lane in the plan is in the harness the box syncs, so the
     plan is the one place it can be missing from (``capacity_why_not``).

The run-level spread P is computed with (78's run_sd_source, recorded on each stop) is: the group's own repeats, else
the family's A/A history in the store (control_plane.adaptive_waves passes the store's earlier runs' Decision rows
as history groups, analytics.decision_noise.history_rows), else the prior.

Pure over a DuckDB connection whose views include report_decision_hardware and the noise views: the wave
scheduler's connection over the store (analytics.views.connect), or analytics.decision_noise.connection over
fixed rows. Every stop carries its reason, the probability it was decided on and its run-level source.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import duckdb

from analytics.decision_noise import HISTORY_GROUP
from pipeline.matrix import AdaptiveSpec

DECIDED_AT = 0.99  # 78_report_decision_noise.sql's p_threshold: 'cheaper' only at P(at least 5 % cheaper) >= 0.99
REPEAT, CAPACITY = "repeat", "capacity"  # the uses of the budget (module docstring, step 5)
NO_CAPACITY_LANE = "the capacity lane is not in this cell's plan (matrix.lanes)"


@dataclass(frozen=True)
class CellRuns:
    """What the scheduler knows of one cell: its id, type and Decision group, how many runs it has made, the
    box-hours one run of it costs (its last run's lanes' wall time), and its capacity lane's: the box-hours of its
    last capacity search, or ``capacity_why_not`` (why the capacity lane cannot run on this cell)."""

    cell: str
    instance: str
    decision_group: str | None
    runs: int
    box_hours_per_run: float
    capacity_box_hours: float | None = None
    capacity_why_not: str | None = NO_CAPACITY_LANE


@dataclass(frozen=True)
class Stop:
    cell: str
    instance: str
    decision_group: str | None
    wave: int
    kind: str  # no $/M at the SLO | decided | dominated | max repeats | budget (| box failed: adaptive_waves)
    reason: str
    p_bound: float | None = None
    run_sd_source: str | None = None  # where P's run-level spread came from: repeats | aa_history | prior

    def to_json(self) -> dict[str, Any]:
        return {
            "cell": self.cell,
            "instance": self.instance,
            "decision_group": self.decision_group,
            "wave": self.wave,
            "kind": self.kind,
            "reason": self.reason,
            "p_bound": self.p_bound,
            "run_sd_source": self.run_sd_source,
        }


@dataclass(frozen=True)
class Use:
    """How a cell in contention spends its next run (module docstring, step 5): ``repeat`` or ``capacity``, why, its
    box-hours, for ``capacity`` the bracket its search bisects (req/s), and the P bound of its (group, type) against
    the other candidates (None: the only candidate so far, or untested)."""

    cell: str
    decision_group: str | None
    use: str
    reason: str
    box_hours: float
    rate_min: float | None = None
    rate_max: float | None = None
    p_bound: float | None = None


@dataclass(frozen=True)
class WavePlan:
    wave: int
    stops: list[Stop] = field(default_factory=list)
    repeat: list[str] = field(default_factory=list)  # cells that run again in the next wave
    uses: list[Use] = field(default_factory=list)  # how each of them runs (one per cell and group)

    @property
    def done(self) -> bool:
        return not self.repeat


def _standing(con: duckdb.DuckDBPyConnection, margin_pct: float) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (group, type): the smallest p_within_margin and p_cheaper_by_margin (the verdict's P) against the other
    candidates, the pair that gives the bound and the sd of the ln $/M gap to it, the number of other candidates."""
    con.execute(f"SET VARIABLE decision_margin_pct = {float(margin_pct)!r}")
    got = con.execute(
        """SELECT decision_group, instance, count(*) AS others,
                  min(p_within_margin) AS p_bound, arg_min(other_instance, p_within_margin) AS bound_by,
                  arg_min(sd_ln_gap, p_within_margin) AS sd_gap,
                  min(p_cheaper_by_margin) AS p_cheaper_min, count(p_cheaper) = count(*) AS tested,
                  any_value(usd_per_million_output_tokens) AS usd
           FROM report_decision_noise GROUP BY decision_group, instance"""
    ).fetchall()
    return {
        (g, i): {
            "others": n,
            "p_bound": pb,
            "bound_by": by,
            "sd_gap": sd,
            "p_cheaper_min": pc,
            "tested": t,
            "usd": u,
        }
        for g, i, n, pb, by, sd, pc, t, u in got
    }


def _sources(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], str]:
    """Per (group, type) of a candidate: where its run-level spread comes from (78's run_sd_source)."""
    got = con.execute("SELECT decision_group, instance, run_sd_source FROM decision_noise_options").fetchall()
    return {(g, i): src for g, i, src in got}


def _brackets(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (group, type) of a candidate: the basis its group is ranked on and, at the rate basis, the narrowest
    capacity bracket of its rows (highest rate meeting the SLO, lowest missing it; both found)."""
    got = con.execute(
        """SELECT decision_group, instance, any_value(ranked_basis) AS basis,
                  arg_min(max_rate_meeting_slo, ln(lowest_rate_missing_slo / max_rate_meeting_slo))
                      FILTER (WHERE lowest_rate_missing_slo > max_rate_meeting_slo AND max_rate_meeting_slo > 0)
                      AS low,
                  arg_min(lowest_rate_missing_slo, ln(lowest_rate_missing_slo / max_rate_meeting_slo))
                      FILTER (WHERE lowest_rate_missing_slo > max_rate_meeting_slo AND max_rate_meeting_slo > 0)
                      AS high
           FROM report_decision_hardware
           WHERE candidate AND NOT coalesce(is_reference, false) GROUP BY decision_group, instance"""
    ).fetchall()
    return {(g, i): {"basis": b, "low": lo, "high": hi} for g, i, b, lo, hi in got}


def choose_use(c: CellRuns, bracket: Mapping[str, Any] | None, sd_gap: float | None) -> Use:
    """How ``c``, in contention, spends its next run (module docstring, step 5): ``bracket`` its (group, type)'s
    entry of the rate basis and capacity bracket, ``sd_gap`` the sd of the ln $/M gap to the type that bounds
    its P. Every outcome says why."""

    def repeat(why: str) -> Use:
        return Use(c.cell, c.decision_group, REPEAT, why, c.box_hours_per_run)

    if not bracket or bracket.get("basis") != "rate":
        return repeat("the group is ranked on the closed-loop concurrency (no type found an open-loop rate): a repeat")
    if c.capacity_why_not is not None:
        return repeat(f"{c.capacity_why_not}: a repeat")
    low, high = bracket.get("low"), bracket.get("high")
    if low is None or high is None:
        return repeat("no capacity bracket to bisect (no rate missed the SLO above the one found): a repeat")
    width = math.log(high / low)
    if sd_gap is not None and width <= sd_gap:
        return repeat(
            f"its capacity bracket [{low:.4g}, {high:.4g}] req/s (ln width {width:.3g}) is within the sd of the "
            f"ln $/M gap that keeps it in contention ({sd_gap:.3g}): a repeat narrows the run-level spread"
        )
    gap = "no sd of the gap (untested)" if sd_gap is None else f"the sd of the ln $/M gap ({sd_gap:.3g})"
    return Use(
        c.cell,
        c.decision_group,
        CAPACITY,
        f"its capacity bracket [{low:.4g}, {high:.4g}] req/s (ln width {width:.3g}) is wider than {gap}: "
        "its capacity search bisects the bracket",
        c.capacity_box_hours if c.capacity_box_hours is not None else c.box_hours_per_run,
        low,
        high,
    )


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
    """The stops and the runs after ``wave`` (module docstring) for the ``cells`` still running."""
    standing = _standing(con, spec.margin_pct)
    candidates = _candidates(con)
    sources = _sources(con)
    brackets = _brackets(con)
    decided = {
        g: i
        for (g, i), s in standing.items()
        if s["p_cheaper_min"] is not None and s["p_cheaper_min"] >= DECIDED_AT and s["tested"]
    }
    stops: list[Stop] = []
    contending: list[tuple[float, CellRuns, Use]] = []
    for c in cells:
        key = (c.decision_group or "", c.instance)
        s = standing.get(key)

        def stop(kind: str, reason: str, p: float | None = None, c: CellRuns = c, key: Any = key) -> None:
            stops.append(Stop(c.cell, c.instance, c.decision_group, wave, kind, reason, p, sources.get(key)))

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
            contending.append((1.0, c, choose_use(c, brackets.get(key), None)))
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
            bound = 1.0 if s["p_bound"] is None else s["p_bound"]
            use = replace(choose_use(c, brackets.get(key), s["sd_gap"]), p_bound=s["p_bound"])
            contending.append((bound, c, use))
    repeat: list[str] = []
    uses: list[Use] = []
    spent = spent_box_hours
    for bound, c, use in sorted(contending, key=lambda x: (-x[0], x[1].cell)):
        if spec.budget_box_hours is not None and spent + use.box_hours > spec.budget_box_hours:
            stops.append(
                Stop(
                    c.cell,
                    c.instance,
                    c.decision_group,
                    wave,
                    "budget",
                    f"another run ({use.use}, {use.box_hours:.3g} box-hours) would pass the budget: "
                    f"{spent:.3g} of {spec.budget_box_hours:g} box-hours spent",
                    bound,
                    sources.get((c.decision_group or "", c.instance)),
                )
            )
            continue
        spent += use.box_hours
        repeat.append(c.cell)
        uses.append(use)
    return WavePlan(wave, stops, repeat, uses)


def _fmt(p: float | None) -> str:
    return "untested" if p is None else f"{p:.3g}"


def ranking(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """Per Decision group, the candidate types by their mean ln $/M (decision_noise_options), cheapest first; the
    store's history groups (analytics.decision_noise.history_rows) are not ranked."""
    out: dict[str, list[str]] = {}
    for g, i in con.execute(
        """SELECT decision_group, instance FROM decision_noise_options WHERE NOT starts_with(decision_group, ?)
           ORDER BY decision_group, mean_ln_usd_per_million, instance""",
        [HISTORY_GROUP],
    ).fetchall():
        out.setdefault(g, []).append(i)
    return out


def summary(plans: Sequence[WavePlan]) -> Mapping[str, Any]:
    """The stops of every wave, by kind."""
    kinds: dict[str, int] = {}
    for p in plans:
        for s in p.stops:
            kinds[s.kind] = kinds.get(s.kind, 0) + 1
    return {"waves": len(plans), "stops": kinds}
